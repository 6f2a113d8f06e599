"""``pytest.raises`` for the one bad-input error, checking its three parts.

``raises_input("PipelineConfig.global_batch", "0", "an integer >= 1")``
expects an :class:`~distsim.validation.InputError` whose message starts with
``PipelineConfig.global_batch=0; allowed: `` and whose allowed text contains
``an integer >= 1``. With ``problem=``, the message is
``<path>: <problem>; allowed: ...`` (for values a message cannot show, such
as a NaN somewhere in an array).
"""

from __future__ import annotations

import json
import re

import pytest

from distsim.validation import InputError


def raises_input(path: str, value: str | None, allowed: str, *, problem: str | None = None):
    """Expect an InputError at ``path`` showing ``value`` (its repr, as the
    message prints it) or ``problem``, and an allowed text that contains ``allowed``."""
    middle = f": {problem}" if problem is not None else f"={value}"
    return pytest.raises(InputError, match=rf"^{re.escape(path + middle)}; allowed: .*{re.escape(allowed)}")


def edited_json_file(tmp_path, data, edit, name: str = "broken.json") -> str:
    """Write ``data`` as JSON after ``edit(data)`` changed it in place; return the file's path."""
    edit(data)
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return str(path)
