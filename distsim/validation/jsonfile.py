"""Reading and writing JSON files, with errors that say which file and what went wrong.

Every way a path or a file can fail becomes one :class:`InputError`: a path
that is not a string (or ``os.PathLike``), an empty or over-long path, a
directory, a file that cannot be read or written, text that is not UTF-8,
JSON that is invalid, nested deeper than :data:`MAX_JSON_DEPTH`, or holds an
integer longer than Python converts (4,300 digits, ``sys.int_info``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from distsim.validation.errors import InputError, MissingFileError

#: Longest path accepted, characters (Linux's PATH_MAX, ``limits.h``, is 4,096 bytes).
MAX_PATH_CHARS = 4_096
#: Deepest nesting of arrays and objects a JSON file may have. Python's
#: decoder recurses once per level, so a file nested 100,000 deep would
#: otherwise exhaust the interpreter's stack (``RecursionError``); distsim's
#: own files nest fewer than 10 levels.
MAX_JSON_DEPTH = 100


def checked_path(path: Any, what: str, field: str | None = None) -> Path:
    """``path`` as a :class:`Path` after checking it is a non-empty string or
    ``os.PathLike`` of at most :data:`MAX_PATH_CHARS` characters; an error
    names ``field`` (default: ``what``)."""
    allowed = f"the path of a {what}: a non-empty string of at most {MAX_PATH_CHARS:,} characters"
    if isinstance(path, os.PathLike):
        path = os.fspath(path)
    if not isinstance(path, str) or not path or len(path) > MAX_PATH_CHARS or "\0" in path:
        raise InputError(field or what, path, allowed)
    return Path(path)


def output_path(path: Any, what: str, field: str | None = None) -> Path:
    """``path`` checked as a file to write before any work is done: a path
    (:func:`checked_path`) that is not a directory, in a folder that exists."""
    path = checked_path(path, what, field)
    try:
        is_dir, folder_ok = path.is_dir(), path.parent.is_dir()
    except OSError as exc:
        raise InputError(field or what, _shown(path), f"a usable path for a {what}",
                         problem=f"cannot use this path ({os.strerror(exc.errno or 0)})") from None
    if is_dir or not folder_ok:
        raise InputError(field or what, _shown(path), f"the path of a {what} in an existing folder",
                         problem="a directory, not a file" if is_dir else f"no folder {_shown(path.parent)}")
    return path


def _shown(path: Path) -> str:
    """``path`` for an error message: a long one keeps its start and its end."""
    text = str(path)
    return text if len(text) <= 160 else f"{text[:60]}...({len(text):,} characters)...{text[-60:]}"


def _depth(text: str) -> int:
    """Deepest bracket nesting of JSON ``text`` (brackets inside strings not counted)."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def _too_deep(text: str) -> bool:
    # Cheap test first: fewer brackets than the bound cannot nest deeper than it.
    return text.count("[") + text.count("{") > MAX_JSON_DEPTH and _depth(text) > MAX_JSON_DEPTH


def parse_json(text: str, where: str, what: str) -> Any:
    """JSON ``text`` of ``where`` (a file name) parsed, or an :class:`InputError`."""
    if _too_deep(text):
        raise InputError(where, None, f"a {what} nested at most {MAX_JSON_DEPTH} levels deep",
                         problem=f"JSON nested more than {MAX_JSON_DEPTH} levels deep")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(where, None, f"a {what} in valid JSON",
                         problem=f"not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    except (ValueError, RecursionError) as exc:  # an integer of more than 4,300 digits
        reason = " ".join(str(exc).split()[:8])
        raise InputError(where, None, f"a {what} in valid JSON with numbers of at most 4,300 digits",
                         problem=f"JSON that cannot be read ({reason})") from None


def read_json(path: str | Path, what: str) -> Any:
    """Parse the JSON file at ``path``.

    Args:
        path: the file.
        what: what the file should hold, for the error message (``"scenario file"``).

    Raises:
        MissingFileError: nothing at ``path``.
        InputError: ``path`` is not a path, a directory, unreadable, not
            UTF-8 text or not JSON distsim can read (see the module's docstring).
    """
    path = checked_path(path, what)
    try:
        exists, is_file = path.exists(), path.is_file()
    except OSError as exc:  # a name too long for the file system, a loop of links...
        raise InputError(_shown(path), None, f"the path of a readable {what}",
                         problem=f"cannot use this path ({os.strerror(exc.errno or 0) or type(exc).__name__})") from None
    if not exists:
        raise MissingFileError(str(path), None, f"the path of an existing {what}", problem=f"no {what} at this path")
    if not is_file:
        raise InputError(str(path), None, f"the path of a {what}, not a directory", problem="a directory, not a file")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(str(path), None, f"a readable UTF-8 {what}",
                         problem=f"cannot read it ({type(exc).__name__})") from None
    return parse_json(text, str(path), what)


def write_json(path: str | Path, data: Any, indent: int | None = 1, what: str = "JSON file") -> Path:
    """Write ``data`` as JSON to ``path`` (ending in a newline) and return the path.

    Raises:
        InputError: ``path`` is not a path, is a directory, or cannot be
            written (a missing folder, no permission, a name too long).
    """
    path = checked_path(path, what)
    text = json.dumps(data, indent=indent) + "\n"
    try:
        if path.is_dir():
            raise IsADirectoryError
        path.write_text(text)
    except OSError as exc:
        reason = os.strerror(exc.errno) if exc.errno else "a directory, not a file"
        raise InputError(_shown(path), None, f"a writable path for a {what} (an existing folder, not a directory itself)",
                         problem=f"cannot write it ({reason})") from None
    return path
