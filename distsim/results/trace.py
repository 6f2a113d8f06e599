"""Per-device timelines: what each device did, from when to when.

A :class:`Trace` is stored column-wise (one NumPy array per field) because a
simulated run of 64 replicas x 100 steps holds tens of thousands of events and
must be built in milliseconds. :meth:`Trace.events` gives the row view.

Times are seconds from the start of the run. Both the timing engine and the
real-run measurements produce traces, and both export to the Chrome trace
format, which opens in Perfetto (https://ui.perfetto.dev).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np

from distsim.validation import InputError, Integer, Number, OneOf, check_keys, write_json

#: What a device can be doing. ``idle`` covers waiting for peers or data.
EVENT_KINDS: tuple[str, ...] = ("input", "compute", "comm", "update", "idle")

_KIND = OneOf(EVENT_KINDS)
_SECONDS = Number(unit="seconds")
_STEP = Integer(0)


def check_columns(owner: str, columns: dict[str, Any]) -> int:
    """The common length of the 1-D ``columns`` (name -> array); an
    :class:`InputError` at ``<owner>.<name>`` for one that is not 1-D or
    whose length differs from the first column's."""
    (first, reference), *rest = columns.items()
    n = len(_one_d(f"{owner}.{first}", reference))
    for name, column in rest:
        m = len(_one_d(f"{owner}.{name}", column))
        if m != n:
            raise InputError(f"{owner}.{name}", None, f"one entry per entry of {owner}.{first} ({n})",
                             problem=f"{m} entries")
    return n


def _one_d(path: str, column: Any) -> Any:
    if np.ndim(column) != 1:
        raise InputError(path, column, "a 1-D array (one entry per row)")
    return column


def as_column(path: str, values: Any, dtype) -> np.ndarray:
    """``values`` (a list read from JSON) as a 1-D array of ``dtype``: it must
    hold integers for an integer ``dtype``, numbers for a float one."""
    kind, what = (np.integer, "integers") if np.issubdtype(dtype, np.integer) else (np.number, "numbers")
    try:
        column = np.asarray(values)
    except ValueError:  # a ragged list
        column = None
    if column is None or column.ndim != 1 or (column.size and not np.issubdtype(column.dtype, kind)):
        raise InputError(path, values, f"a list of {what}")
    return column.astype(dtype)


@dataclass(frozen=True)
class Event:
    """One interval on one device.

    Attributes:
        device: device name, e.g. ``"worker0/replica1"`` or ``"ps0"``.
        kind: one of :data:`EVENT_KINDS`.
        start_s: start time in seconds.
        end_s: end time in seconds (``>= start_s``).
        step: training step (or, for async training, the update number).
        label: finer description, e.g. ``"forward"`` or ``"bucket 3"``.
    """

    device: str
    kind: str
    start_s: float
    end_s: float
    step: int
    label: str = ""

    def __post_init__(self) -> None:
        for name in ("device", "label"):
            if not isinstance(getattr(self, name), str):
                raise InputError(f"Event.{name}", getattr(self, name), "a string")
        _KIND("Event.kind", self.kind)
        for name in ("start_s", "end_s"):
            _SECONDS(f"Event.{name}", getattr(self, name))
        if self.end_s < self.start_s:
            raise InputError("Event.end_s", self.end_s, f">= start_s={self.start_s!r} (an event ends after it starts)")
        _STEP("Event.step", self.step)

    @property
    def duration_s(self) -> float:
        return self.end_s - self.start_s


#: The event columns of a :class:`Trace`, all of one length.
_COLUMNS = ("start_s", "end_s", "device", "kind", "step", "label")


@dataclass
class Trace:
    """Events in columns. ``device``/``kind``/``label`` are indices into the
    name tables ``devices``/:data:`EVENT_KINDS`/``labels``."""

    devices: list[str]
    labels: list[str]
    device: np.ndarray  # int32 index into devices
    kind: np.ndarray  # int8 index into EVENT_KINDS
    start_s: np.ndarray  # float64 seconds
    end_s: np.ndarray  # float64 seconds
    step: np.ndarray  # int64
    label: np.ndarray  # int32 index into labels

    def __post_init__(self) -> None:
        n = check_columns("Trace", {name: getattr(self, name) for name in _COLUMNS})
        if not n:
            return
        for name, table in (("device", self.devices), ("kind", EVENT_KINDS), ("label", self.labels)):
            column = getattr(self, name)
            outside = (column < 0) | (column >= len(table))
            if outside.any():
                bad = int(np.argmax(outside))
                raise InputError(f"Trace.{name}[{bad}]", column[bad].item(),
                                 f"an index into {'EVENT_KINDS' if name == 'kind' else 'Trace.' + name + 's'} "
                                 f"(0..{len(table) - 1})")
        backwards = self.end_s < self.start_s
        if backwards.any():
            bad = int(np.argmax(backwards))
            raise InputError(f"Trace.end_s[{bad}]", self.end_s[bad].item(),
                             f">= Trace.start_s[{bad}]={self.start_s[bad]!r} (an event ends after it starts)")

    @classmethod
    def from_events(cls, events: Sequence[Event]) -> "Trace":
        """Build a trace from row events (convenient for small traces and real runs)."""
        if not isinstance(events, (list, tuple)):
            raise InputError("events", events, "a list of Events")
        devices: dict[str, int] = {}
        labels: dict[str, int] = {}
        for i, e in enumerate(events):
            if not isinstance(e, Event):
                raise InputError(f"events[{i}]", e, "an Event (it checks its own fields)")
            devices.setdefault(e.device, len(devices))
            labels.setdefault(e.label, len(labels))
        return cls(
            devices=list(devices),
            labels=list(labels),
            device=np.array([devices[e.device] for e in events], dtype=np.int32),
            kind=np.array([EVENT_KINDS.index(e.kind) for e in events], dtype=np.int8),
            start_s=np.array([e.start_s for e in events], dtype=np.float64),
            end_s=np.array([e.end_s for e in events], dtype=np.float64),
            step=np.array([e.step for e in events], dtype=np.int64),
            label=np.array([labels[e.label] for e in events], dtype=np.int32),
        )

    def __len__(self) -> int:
        return len(self.start_s)

    def events(self) -> Iterator[Event]:
        """Iterate over the events as :class:`Event` rows."""
        for i in range(len(self)):
            yield Event(
                device=self.devices[self.device[i]],
                kind=EVENT_KINDS[self.kind[i]],
                start_s=float(self.start_s[i]),
                end_s=float(self.end_s[i]),
                step=int(self.step[i]),
                label=self.labels[self.label[i]],
            )

    @property
    def span_s(self) -> float:
        """Wall time from the first start to the last end, in seconds."""
        return float(self.end_s.max() - self.start_s.min()) if len(self) else 0.0

    def busy_s(self, kind: str) -> float:
        """Total seconds spent in ``kind``, summed over devices."""
        k = EVENT_KINDS.index(kind)
        mask = self.kind == k
        return float(np.sum(self.end_s[mask] - self.start_s[mask]))

    def to_chrome_trace(self) -> dict:
        """The trace in Chrome's trace-event JSON format (microseconds)."""
        events = [
            {"name": "process_name", "ph": "M", "pid": 0, "args": {"name": "distsim"}},
        ]
        events += [
            {"name": "thread_name", "ph": "M", "pid": 0, "tid": i, "args": {"name": name}}
            for i, name in enumerate(self.devices)
        ]
        for e_dev, e_kind, s, t, step, lab in zip(
            self.device, self.kind, self.start_s, self.end_s, self.step, self.label
        ):
            kind = EVENT_KINDS[e_kind]
            events.append(
                {
                    "name": self.labels[lab] or kind,
                    "cat": kind,
                    "ph": "X",
                    "pid": 0,
                    "tid": int(e_dev),
                    "ts": float(s) * 1e6,
                    "dur": float(t - s) * 1e6,
                    "args": {"step": int(step), "kind": kind},
                }
            )
        return {"traceEvents": events, "displayTimeUnit": "ms"}

    def save_chrome_trace(self, path: str | Path) -> Path:
        """Write :meth:`to_chrome_trace` to ``path``; open it in Perfetto."""
        return write_json(path, self.to_chrome_trace(), indent=None, what="trace file")

    def to_dict(self) -> dict:
        return {
            "devices": list(self.devices),
            "labels": list(self.labels),
            "device": self.device.tolist(),
            "kind": [EVENT_KINDS[k] for k in self.kind],
            "start_s": self.start_s.tolist(),
            "end_s": self.end_s.tolist(),
            "step": self.step.tolist(),
            "label": self.label.tolist(),
        }

    @classmethod
    def from_dict(cls, d: Any) -> "Trace":
        """A trace from :meth:`to_dict`'s JSON data; errors at ``trace.<field>``."""
        names = [f.name for f in fields(cls)]
        d = check_keys("trace", d, names, required=names)
        for name in ("devices", "labels", "kind"):
            if not isinstance(d[name], list) or name != "kind" and not all(isinstance(t, str) for t in d[name]):
                raise InputError(f"trace.{name}", d[name], "a list of strings")
        try:
            kinds = np.array([EVENT_KINDS.index(k) for k in d["kind"]], dtype=np.int8)
        except ValueError:  # an unknown kind: the rule names the first one
            for i, k in enumerate(d["kind"]):
                _KIND(f"trace.kind[{i}]", k)
            raise
        try:
            return cls(
                devices=list(d["devices"]),
                labels=list(d["labels"]),
                device=as_column("trace.device", d["device"], np.int32),
                kind=kinds,
                start_s=as_column("trace.start_s", d["start_s"], np.float64),
                end_s=as_column("trace.end_s", d["end_s"], np.float64),
                step=as_column("trace.step", d["step"], np.int64),
                label=as_column("trace.label", d["label"], np.int32),
            )
        except InputError as exc:
            raise exc.rebased("Trace", "trace") from None
