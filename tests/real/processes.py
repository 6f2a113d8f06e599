"""Process helpers for the real-run tests (read /proc; Linux only)."""

from __future__ import annotations

import os
from pathlib import Path


def child_pids(pid: int) -> set[int]:
    """Live processes whose parent is ``pid`` (from /proc; Linux only)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # Fields after the ")" that ends the command name: state, ppid, ...
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == pid and fields[0] != "Z":
            found.add(int(entry.name))
    return found


def alive(pid: int) -> bool:
    """Whether ``pid`` exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def processes_in_netns(namespace: str) -> set[int]:
    """Live processes whose network namespace is ``namespace`` (``net:[inode]``)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.readlink(entry / "ns" / "net") == namespace and alive(int(entry.name)):
                    found.add(int(entry.name))
            except OSError:
                continue
    return found
