"""Who uses the parameter server's NIC, and when: a packet trace of one network-lab point.

The simulator prices a PS's NIC in one of two ways (:mod:`distsim.engines.prediction`):
transfers served in turn (FIFO lanes), or streamed transfers sharing each direction
fairly (mean-value analysis). This runs one lab point for real
(``python -m distsim.real netlab``), captures the TCP segments on the PS's ``eth0``
from inside its network namespace, and says how often two workers' transfers
overlapped in one direction::

    flock /work/cpu.lock .venv/bin/python benchmarks/trace_ps_nic.py --rate-mbit 1000 --steps 200

Each bin (``--bin-ms``; at least four 64 KiB sends at the rate, so sends interleaved
by htb show as overlap) counts a worker as active in a direction when it moved at
least a fifth of what the NIC can carry in the bin. Needs root, as the lab does.

``--nudge-ms`` stops the last worker (SIGSTOP, then SIGCONT) for that long,
``--nudge-at-s`` into the capture, and ``--window-s`` reports each window of the
capture: whether the workers' phase returns after the nudge (an attractor) or stays
where the nudge put it::

    ... trace_ps_nic.py --rate-mbit 1000 --steps 300 --capture-s 10 --window-s 1 --nudge-ms 45
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

from distsim.real.launcher import launched_processes, python_module_argv

#: Runs inside the PS's namespace: one line per TCP segment, ``[t_s, outgoing, peer, payload_bytes]``.
SNIFFER = """
import json, socket, struct, sys, time
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.ntohs(0x0003))
for _ in range(100):  # eth0 joins the namespace after the namespace's first process starts
    try:
        s.bind(("eth0", 0)); break
    except OSError:
        time.sleep(0.1)
s.settimeout(0.2)
rows, end = [], time.monotonic() + float(sys.argv[1])
while time.monotonic() < end:
    try:
        data, addr = s.recvfrom(128)
    except socket.timeout:
        continue
    if len(data) < 54 or data[12:14] != b"\\x08\\x00" or data[23] != 6:
        continue
    ihl, total = (data[14] & 15) * 4, struct.unpack("!H", data[16:18])[0]
    out = addr[2] == socket.PACKET_OUTGOING
    peer = socket.inet_ntoa(data[30:34] if out else data[26:30])
    rows.append([time.monotonic(), out, peer, total - ihl - (data[14 + ihl + 12] >> 4) * 4])
json.dump(rows, sys.stdout)
"""


def _task_process(netlab_pid: int, task: bytes, timeout_s: float) -> int:
    """The PID of the task the netlab run started whose TF_CONFIG names ``task`` (e.g.
    ``b'"task":{"type":"ps","index":0}'``), once it is inside its own network namespace
    (its wrapper starts in this one)."""
    deadline = time.monotonic() + timeout_s
    here = os.readlink("/proc/self/ns/net")
    while time.monotonic() < deadline:
        for pid in launched_processes(netlab_pid):
            try:
                if task in Path(f"/proc/{pid}/cmdline").read_bytes() and os.readlink(f"/proc/{pid}/ns/net") != here:
                    return pid
            except OSError:
                continue
        time.sleep(0.1)
    raise SystemExit(f"no task {task.decode()} appeared within {timeout_s:g} s")


def _nudge(pid: int, at_s: float, for_s: float) -> threading.Thread:
    """Stop ``pid`` (SIGSTOP) ``at_s`` seconds from now for ``for_s`` seconds: it falls that far behind the
    other workers, which shows whether their phase returns (an attractor) or stays moved."""
    def run() -> None:
        time.sleep(at_s)
        with contextlib.suppress(ProcessLookupError):  # the run may have ended
            os.kill(pid, signal.SIGSTOP)
            try:
                time.sleep(for_s)
            finally:
                os.kill(pid, signal.SIGCONT)
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def capture(args) -> tuple[list, dict]:
    """Run the lab point and capture ``--capture-s`` seconds of the PS's NIC after ``--warmup-s``,
    stopping the last worker for ``--nudge-ms`` at ``--nudge-at-s`` into the capture."""
    argv = python_module_argv("distsim.real", "netlab", "--strategy", "parameter_server", "--workers",
                              str(args.workers), "--rate-mbit", str(args.rate_mbit), "--workload", args.workload,
                              "--steps", str(args.steps), "--json",
                              *(["--congestion-control", args.congestion_control] if args.congestion_control else []))
    netlab = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, start_new_session=True)
    nudge = None
    try:
        ps = _task_process(netlab.pid, b'"task":{"type":"ps","index":0}', timeout_s=120)
        if args.nudge_ms:
            last = f'"task":{{"type":"worker","index":{args.workers - 1}}}'.encode()
            nudge = _nudge(_task_process(netlab.pid, last, timeout_s=120), args.warmup_s + args.nudge_at_s,
                           args.nudge_ms / 1e3)
        time.sleep(args.warmup_s)
        sniff = subprocess.run(["nsenter", f"--net=/proc/{ps}/ns/net", sys.executable, "-c",
                                textwrap.dedent(SNIFFER), str(args.capture_s)],
                               capture_output=True, text=True, timeout=args.capture_s + 30)
        if sniff.returncode:
            raise SystemExit(f"the capture failed: {sniff.stderr.strip().splitlines()[-1:]}")
        out, _ = netlab.communicate(timeout=args.timeout)
        return json.loads(sniff.stdout), json.loads(out)
    finally:
        if nudge is not None:
            nudge.join()  # never leave a worker stopped
        if netlab.poll() is None:
            os.killpg(netlab.pid, signal.SIGINT)  # the launcher stops its tasks and namespaces on SIGINT
            netlab.wait(timeout=60)


def overlap(rows: list, rate_Bps: float, bin_s: float) -> dict:
    """Per direction: bins in which some worker was active, and in how many two or more were.
    Per worker: the share of the bins in which it moved nothing in either direction, its slack."""
    active_bytes = 0.2 * rate_Bps * bin_s
    bins: dict[tuple[int, bool], collections.Counter] = collections.defaultdict(collections.Counter)
    t0 = rows[0][0]
    for t, out, peer, n in rows:
        bins[int((t - t0) / bin_s), out][peer] += n
    result = {}
    for out, name in ((True, "PS to workers (pulls)"), (False, "workers to PS (pushes)")):
        counts = [sum(n >= active_bytes for n in c.values()) for (_, o), c in bins.items() if o == out]
        busy = sum(k >= 1 for k in counts)
        result[name] = {"busy_bins": busy, "shared_bins": sum(k >= 2 for k in counts),
                        "shared_fraction": sum(k >= 2 for k in counts) / busy if busy else float("nan")}
    n_bins = int((rows[-1][0] - t0) / bin_s) + 1
    workers = sorted({peer for c in bins.values() for peer, n in c.items() if n >= active_bytes})
    result["idle share per worker"] = {
        peer: 1 - len({b for (b, _), c in bins.items() if c[peer] >= active_bytes}) / n_bins for peer in workers}
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate-mbit", type=float, required=True)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--workload", default="mnist_mlp_wide")
    ap.add_argument("--steps", type=int, default=100, help="updates per worker (long enough to outlast the capture)")
    ap.add_argument("--warmup-s", type=float, default=8.0, help="seconds from the PS's start to the capture")
    ap.add_argument("--capture-s", type=float, default=3.0)
    ap.add_argument("--bin-ms", type=float, default=5.0)
    ap.add_argument("--window-s", type=float, default=None, help="report each window of this many seconds too")
    ap.add_argument("--nudge-ms", type=float, default=0.0, help="stop the last worker this long (SIGSTOP) ...")
    ap.add_argument("--nudge-at-s", type=float, default=3.0, help="... this many seconds into the capture")
    ap.add_argument("--timeout", type=float, default=900.0)
    ap.add_argument("--congestion-control", help="TCP congestion control in the lab's namespaces (default: the "
                    "machine's)")
    ap.add_argument("--rows", type=Path, default=None, help="also write the segments here (JSON) for a closer look")
    args = ap.parse_args()
    for name in ("rate_mbit", "capture_s"):
        if getattr(args, name) <= 0:
            ap.error(f"--{name.replace('_', '-')}={getattr(args, name)}; allowed: > 0")
    for name in ("warmup_s", "nudge_ms", "nudge_at_s", "window_s"):
        if (getattr(args, name) or 0) < 0:
            ap.error(f"--{name.replace('_', '-')}={getattr(args, name)}; allowed: >= 0")
    rate_Bps = args.rate_mbit * 1e6 / 8
    bin_s = max(args.bin_ms / 1e3, 4 * 65536 / rate_Bps)
    rows, lab = capture(args)
    if not rows:
        raise SystemExit(f"captured no TCP segment on the PS's NIC in {args.capture_s:g} s from {args.warmup_s:g} s "
                         "after its start: the workers had not begun or had already finished; change --warmup-s "
                         "or --steps")
    if args.rows:
        args.rows.write_text(json.dumps({"lab": lab, "rate_Bps": rate_Bps, "rows": rows}))
    print(f"{lab['scenario']}: measured step {lab['measured_step_s'] * 1e3:.1f} ms, "
          f"predicted {lab['predicted_step_s'] * 1e3:.1f} ms; {len(rows)} segments in {args.capture_s:g} s, "
          f"bins of {bin_s * 1e3:.1f} ms" + (f"; last worker stopped {args.nudge_ms:g} ms at {args.nudge_at_s:g} s"
                                              if args.nudge_ms else ""))
    windows = [(0.0, args.capture_s)]
    if args.window_s:
        windows += [(lo * args.window_s, (lo + 1) * args.window_s) for lo in range(int(args.capture_s // args.window_s))]
    for lo, hi in windows:
        part = [r for r in rows if lo <= r[0] - rows[0][0] < hi]
        if not part:
            print(f"{lo:5.1f}-{hi:5.1f} s: no segments")
            continue
        report = overlap(part, rate_Bps, bin_s)
        idle = report.pop("idle share per worker")
        print(f"{lo:5.1f}-{hi:5.1f} s: " + "; ".join(
            f"{name} shared in {r['shared_bins']} of {r['busy_bins']} busy bins ({r['shared_fraction']:.0%})"
            for name, r in report.items()) + "; idle " + ", ".join(f"{p} {f:.0%}" for p, f in idle.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
