"""Changing one field of a nested frozen dataclass by its dotted path."""

from __future__ import annotations

import dataclasses
from typing import Any

from distsim.validation import InputError, Rule, rule_of

#: Fields that are bookkeeping, not experiment settings.
HIDDEN_FIELDS: frozenset[str] = frozenset({"sources"})


def settable_fields(obj: Any) -> list[str]:
    """Field names of dataclass ``obj`` a path may name."""
    return [f.name for f in dataclasses.fields(obj) if f.name not in HIDDEN_FIELDS]


def replace_path(obj: Any, path: str, value: Any, done: str = "") -> Any:
    """A copy of dataclass ``obj`` with the field at dotted ``path`` set to
    ``value``; every dataclass on the way is rebuilt (and so re-validated).
    An unknown path raises :class:`InputError` listing the fields there."""
    if not isinstance(path, str) or not path:
        raise InputError("path", path, "a dotted field path such as 'training.global_batch'")
    name, _, rest = path.partition(".")
    here = f"{done}.{name}" if done else name
    if not dataclasses.is_dataclass(obj):
        raise InputError(here, value, f"no field here: {done or 'this'} is a value, not a group of fields")
    if name not in settable_fields(obj):
        raise InputError(here, value, f"a path through the fields {settable_fields(obj)}",
                         problem=f"no field {name!r}" + (f" in {done}" if done else ""))
    new = replace_path(getattr(obj, name), rest, value, here) if rest else value
    try:
        return dataclasses.replace(obj, **{name: new})
    except InputError as exc:  # a part reports under its class name; say where it sits
        raise (exc.rebased(type(obj).__name__, done) if done else exc) from None


def rule_at(obj: Any, path: str) -> Rule | None:
    """The rule guarding the field at dotted ``path`` of dataclass ``obj``
    (None for a part such as ``cluster.device``, which validates itself)."""
    parts = path.split(".") if isinstance(path, str) and path else [None]
    done = ""
    for i, name in enumerate(parts):
        here = f"{done}.{name}" if done else str(name)
        if not dataclasses.is_dataclass(obj) or name not in settable_fields(obj):
            allowed = settable_fields(obj) if dataclasses.is_dataclass(obj) else []
            raise InputError(here, None, f"a path through the fields {allowed}",
                             problem=f"no field {name!r}" + (f" in {done}" if done else ""))
        if i == len(parts) - 1:
            return rule_of(obj, name)
        obj, done = getattr(obj, name), here
    return None
