"""Field rules: the one way distsim checks a value.

A rule is a small frozen object. Called with a path and a value, it returns
the value in its plain Python form (a NumPy scalar becomes an ``int`` or
``float``) or raises :class:`~distsim.validation.errors.InputError`; its
:meth:`allowed` text is what the error says is allowed. Dataclasses declare a
rule per field with :func:`checked` and validate themselves with
:func:`check_fields`, so the rule sits next to the field it guards::

    @dataclass(frozen=True)
    class Cluster:
        num_workers: int = checked(Integer(1, 100_000), default=1)

        def __post_init__(self):
            check_fields(self, "cluster")
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Iterable

from distsim.validation.errors import InputError

_RULE = "distsim_rule"


def _plain(value: Any) -> Any:
    """A NumPy scalar as the Python number it holds; anything else unchanged."""
    if hasattr(value, "item") and getattr(value, "shape", None) == ():
        return value.item()
    return value


def _is_integer(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _bounds(low, high, low_open: bool = False) -> str:
    parts = []
    if low is not None:
        parts.append(f"{'>' if low_open else '>='} {low:,}" if isinstance(low, int) else f"{'>' if low_open else '>='} {low:g}")
    if high is not None:
        parts.append(f"<= {high:,}" if isinstance(high, int) else f"<= {high:g}")
    return " and ".join(parts)


class Rule:
    """Base of every rule: ``rule(path, value) -> value`` or :class:`InputError`."""

    def allowed(self) -> str:
        raise NotImplementedError

    def accepts(self, value: Any) -> bool:
        raise NotImplementedError

    def normalise(self, value: Any) -> Any:
        return _plain(value)

    def __call__(self, path: str, value: Any) -> Any:
        if not self.accepts(value):
            raise InputError(path, _plain(value), self.allowed())
        return self.normalise(value)


@dataclass(frozen=True)
class Integer(Rule):
    """An integer (Python or NumPy, never a bool or a float) in [low, high]."""

    low: int | None = 1
    high: int | None = None
    note: str = ""

    def accepts(self, value: Any) -> bool:
        value = _plain(value)
        return (_is_integer(value) and (self.low is None or value >= self.low)
                and (self.high is None or value <= self.high))

    def normalise(self, value: Any) -> int:
        return int(_plain(value))

    def allowed(self) -> str:
        bound = _bounds(self.low, self.high)
        return f"an integer{' ' + bound if bound else ''}{f' ({self.note})' if self.note else ''}"


@dataclass(frozen=True)
class Number(Rule):
    """A finite real number in [low, high] (or (low, high] with ``low_open``)."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    unit: str = ""

    def accepts(self, value: Any) -> bool:
        value = _plain(value)
        if not _is_number(value) or not math.isfinite(value):
            return False
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return False
        return self.high is None or value <= self.high

    def allowed(self) -> str:
        bound = _bounds(self.low, self.high, self.low_open)
        return f"a finite number{' ' + bound if bound else ''}{f' ({self.unit})' if self.unit else ''}"


@dataclass(frozen=True)
class OneOf(Rule):
    """One of a fixed set of values (compared exactly, so ``"data"`` is not ``"DATA"``)."""

    choices: tuple
    note: str = ""

    def accepts(self, value: Any) -> bool:
        try:
            return value in self.choices and not isinstance(value, bool)
        except TypeError:  # an unhashable value is never a choice
            return False

    def allowed(self) -> str:
        return f"one of {self.choices}{f' ({self.note})' if self.note else ''}"


@dataclass(frozen=True)
class Boolean(Rule):
    """``True`` or ``False`` (not 0/1, not a string)."""

    def accepts(self, value: Any) -> bool:
        return isinstance(_plain(value), bool)

    def allowed(self) -> str:
        return "true or false"


@dataclass(frozen=True)
class Text(Rule):
    """A string of at most ``max_chars`` characters."""

    max_chars: int = 10_000

    def accepts(self, value: Any) -> bool:
        return isinstance(value, str) and len(value) <= self.max_chars

    def allowed(self) -> str:
        return f"a string of at most {self.max_chars:,} characters"


@dataclass(frozen=True)
class Optional(Rule):
    """``None`` (meaning ``none_means``) or a value the inner rule accepts."""

    rule: Rule
    none_means: str = "not set"

    def accepts(self, value: Any) -> bool:
        return value is None or self.rule.accepts(value)

    def normalise(self, value: Any) -> Any:
        return None if value is None else self.rule.normalise(value)

    def allowed(self) -> str:
        return f"{self.rule.allowed()}, or null ({self.none_means})"


@dataclass(frozen=True)
class Sequence(Rule):
    """A list or tuple of at most ``max_len`` items, each accepted by
    ``item``; stored as a tuple (JSON arrays come in as lists)."""

    item: Rule
    max_len: int = 100_000

    def accepts(self, value: Any) -> bool:
        return (isinstance(value, (list, tuple)) and len(value) <= self.max_len
                and all(self.item.accepts(v) for v in value))

    def normalise(self, value: Any) -> tuple:
        return tuple(self.item.normalise(v) for v in value)

    def allowed(self) -> str:
        return f"a list of at most {self.max_len:,} items, each {self.item.allowed()}"


@dataclass(frozen=True)
class StringMap(Rule):
    """A mapping of string keys to values of any JSON type (e.g. ``sources``)."""

    def accepts(self, value: Any) -> bool:
        return isinstance(value, Mapping) and all(isinstance(k, str) for k in value)

    def normalise(self, value: Any) -> dict:
        return dict(value)

    def allowed(self) -> str:
        return "an object with string keys"


@dataclass(frozen=True)
class InstanceOf(Rule):
    """An instance of ``cls`` (a part built from its own fields)."""

    cls: type
    what: str = ""

    def accepts(self, value: Any) -> bool:
        return isinstance(value, self.cls)

    def normalise(self, value: Any) -> Any:
        return value

    def allowed(self) -> str:
        return self.what or f"a {self.cls.__name__} (an object of its fields)"


def checked(rule: Rule, **field_kwargs: Any) -> Any:
    """A dataclass field guarded by ``rule`` (other arguments as :func:`dataclasses.field`)."""
    return dataclasses.field(metadata={_RULE: rule}, **field_kwargs)


def rule_of(cls_or_obj: Any, name: str) -> Rule | None:
    """The rule declared for field ``name`` of a dataclass, if any."""
    for f in dataclasses.fields(cls_or_obj):
        if f.name == name:
            return f.metadata.get(_RULE)
    raise KeyError(name)


def default_of(cls: Any, name: str) -> Any:
    """The default of field ``name`` of dataclass ``cls``: what another
    dataclass or function reads so that one vocabulary keeps one default."""
    for f in dataclasses.fields(cls):
        if f.name == name:
            if f.default is dataclasses.MISSING:
                raise KeyError(f"{cls.__name__}.{name} has no plain default")
            return f.default
    raise KeyError(name)


def check_fields(obj: Any, path: str) -> None:
    """Check every ruled field of dataclass ``obj``, reporting errors under
    ``path``; store each value in its plain form (frozen dataclasses too)."""
    for f in dataclasses.fields(obj):
        rule = f.metadata.get(_RULE)
        if rule is None:
            continue
        value = getattr(obj, f.name)
        plain = rule(f"{path}.{f.name}" if path else f.name, value)
        if plain is not value:
            object.__setattr__(obj, f.name, plain)


def check_keys(path: str, data: Any, allowed: Iterable[str], required: Iterable[str] = ()) -> dict:
    """``data`` as a dict after checking it is a JSON object with only
    ``allowed`` keys and every ``required`` one."""
    allowed = sorted(allowed)
    if not isinstance(data, Mapping):
        raise InputError(path, data, f"an object with fields {allowed}")
    for key in data:
        if key not in allowed:
            raise InputError(f"{path}.{key}" if path else str(key), data[key],
                             f"no such field here; the fields are {allowed}")
    for key in required:
        if key not in data:
            raise InputError(f"{path}.{key}" if path else key, None, "a value (this field is required)")
    return dict(data)
