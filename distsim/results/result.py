"""The one result type shared by simulated and measured runs.

The timing engine (``distsim.predict``), the NumPy numerics (``distsim.numerics.train``)
and the real TensorFlow runs (``distsim.real``) all return a :class:`Result`.
That is what makes "predicted vs measured" one function call.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np

from distsim.results.trace import Trace, as_column, check_columns
from distsim.scenario import limits
from distsim.validation import (InputError, InstanceOf, Integer, Number, OneOf, Optional, StringMap, Text, check_fields,
                                check_keys, checked, read_json, write_json)

#: Where a result came from.
SOURCES: tuple[str, ...] = ("predicted", "simulated", "measured")

RESULT_SCHEMA_VERSION = 1


@dataclass
class Summary:
    """Headline metrics of one run.

    Attributes:
        step_time_s: mean wall time of one synchronous step (a prediction:
            the run's total simulated time, every epoch's first and final
            step included, over its steps; a measured run may report its
            median), or for async training the mean time
            between applied updates times the number of workers, in seconds.
        throughput_samples_per_s: training examples processed per second:
            the examples the steps aggregate over the time they took (a
            prediction: over the same total time as ``step_time_s``).
        speedup: weak scaling: throughput relative to one device of the same
            kind running one replica's batch; ``None`` when no baseline is known.
        efficiency: ``speedup / num_replicas``; ``None`` without a speedup.
        comm_fraction: share of the step spent in communication that is not
            hidden behind compute (0..1); ``None`` when not measured.
        epoch_time_s: seconds for one pass over the training set, or
            ``None`` (a synchronous prediction: ``steps_per_epoch`` mean steps).
        mean_staleness: mean staleness of applied updates (async only).
        strong_speedup: strong scaling: throughput relative to one device of
            the same kind running the whole global batch; ``None`` when not known.
        steps_per_epoch: synchronous steps (async: applied updates) in one
            epoch; ``None`` when not known.
        memory_bytes_per_replica: device memory one replica needs, bytes (a
            lower bound; see :mod:`distsim.mechanics.memory`); ``None`` when
            not known.
        median_step_time_s: median step, seconds (a synchronous prediction:
            of its full steps that open no epoch; async: of the times between
            applied updates times the workers); ``None`` when not known
            (results stored before it existed).
        bottleneck: the largest piece of the predicted step's critical
            path, one of ``compute``, ``input``, ``communication``,
            ``ps_nic``, ``ps_apply``, ``memory``; ``None`` when not known
            (measured runs, results stored before it existed). The kinds and
            the critical path: :mod:`distsim.engines.bottleneck`.
        bottleneck_share: that piece's seconds over the closed-form step's
            (async: over a cycle of one update from each worker), in [0, 1]:
            1 when overlapped input (prefetch) takes the whole step; without
            prefetch the pieces of a synchronous step add up to 1.
    """

    step_time_s: float
    throughput_samples_per_s: float
    speedup: float | None = None
    efficiency: float | None = None
    comm_fraction: float | None = None
    epoch_time_s: float | None = None
    mean_staleness: float | None = None
    strong_speedup: float | None = None
    steps_per_epoch: int | None = None
    memory_bytes_per_replica: float | None = None
    median_step_time_s: float | None = None
    bottleneck: str | None = None
    bottleneck_share: float | None = None

    def __post_init__(self) -> None:
        for f in fields(self):  # the numeric fields only: a later field may hold a name
            value = getattr(self, f.name)
            if value is None or isinstance(value, float) and value != value:  # not known (an untimed training
                continue  # run, the dashboard's empty table)
            if f.name in _SUMMARY_POSITIVE:
                _SUMMARY_POSITIVE[f.name](f"Summary.{f.name}", value)
            elif f.name in _SUMMARY_NUMBERS:
                Number()(f"Summary.{f.name}", value)


#: Summary fields that every measured run has (finite and > 0) and the others (finite); None or NaN: not known.
_SUMMARY_POSITIVE = {name: Number(0, low_open=True) for name in ("step_time_s", "throughput_samples_per_s")}
_SUMMARY_NUMBERS = ("speedup", "efficiency", "comm_fraction", "epoch_time_s", "mean_staleness", "strong_speedup",
                    "steps_per_epoch", "memory_bytes_per_replica")


@dataclass
class Curve:
    """Training progress, one entry per recorded step.

    Attributes:
        step: step (sync) or applied-update number (async).
        time_s: wall-clock (simulated or measured) seconds since start.
        loss: training loss at that step.
        accuracy: training (or evaluation) accuracy in 0..1, NaN if unknown.
    """

    step: np.ndarray
    time_s: np.ndarray
    loss: np.ndarray
    accuracy: np.ndarray

    def __post_init__(self) -> None:
        check_columns("Curve", {"step": self.step, "time_s": self.time_s, "loss": self.loss,
                                "accuracy": self.accuracy})


@dataclass
class Staleness:
    """Staleness of every applied update in asynchronous training.

    ``staleness[i]`` is how many updates the parameter server applied between
    the moment update ``i``'s worker read the parameters and the moment update
    ``i`` itself was applied. ``worker[i]`` is the worker that sent it.
    """

    staleness: np.ndarray  # int64, one per applied update
    worker: np.ndarray  # int64, one per applied update

    def __post_init__(self) -> None:
        check_columns("Staleness", {"staleness": self.staleness, "worker": self.worker})

    @property
    def mean(self) -> float:
        return float(np.mean(self.staleness)) if len(self.staleness) else float("nan")

    def per_worker_mean(self) -> dict[int, float]:
        """Mean staleness of each worker's updates."""
        return {
            int(w): float(np.mean(self.staleness[self.worker == w]))
            for w in np.unique(self.worker)
        }


@dataclass
class Result:
    """What one run (simulated or real) produced.

    Attributes:
        source: one of :data:`SOURCES`.
        strategy: strategy name, e.g. ``"mirrored"``.
        num_replicas: replicas in sync (or async workers).
        global_batch: examples per step across all replicas.
        summary: headline metrics.
        step_times_s: wall time of each step in seconds (measured per step).
        trace: per-device timeline, if recorded.
        curve: loss/accuracy per step, if the run trained.
        staleness: async staleness per applied update, if async.
        scenario: the :class:`distsim.scenario.Scenario` that was run, if any.
        meta: provenance as strings: device, cross-device op, TF/Keras
            versions, date, command, ...
    """

    source: str = checked(OneOf(SOURCES))
    strategy: str = checked(Text(200))
    num_replicas: int = checked(Integer(1, limits.MAX_REPLICAS))
    global_batch: int = checked(Integer(1, limits.MAX_EXAMPLES))
    summary: Summary = checked(InstanceOf(Summary))
    step_times_s: np.ndarray = field(default_factory=lambda: np.zeros(0))
    trace: Trace | None = checked(Optional(InstanceOf(Trace), "not recorded"), default=None)
    curve: Curve | None = checked(Optional(InstanceOf(Curve), "did not train"), default=None)
    staleness: Staleness | None = checked(Optional(InstanceOf(Staleness), "not asynchronous"), default=None)
    scenario: Any = None
    meta: dict[str, str] = checked(StringMap(), default_factory=dict)

    def __post_init__(self) -> None:
        check_fields(self, "Result")

    @property
    def per_replica_batch(self) -> float:
        return self.global_batch / self.num_replicas

    def to_dict(self) -> dict:
        """A JSON-ready dict with a schema version."""
        return {
            "schema_version": RESULT_SCHEMA_VERSION,
            "source": self.source,
            "strategy": self.strategy,
            "num_replicas": self.num_replicas,
            "global_batch": self.global_batch,
            "summary": asdict(self.summary),
            "step_times_s": np.asarray(self.step_times_s, dtype=float).tolist(),
            "trace": self.trace.to_dict() if self.trace is not None else None,
            "curve": (
                {k: np.asarray(v).tolist() for k, v in vars(self.curve).items()}
                if self.curve is not None
                else None
            ),
            "staleness": (
                {k: np.asarray(v).tolist() for k, v in vars(self.staleness).items()}
                if self.staleness is not None
                else None
            ),
            "scenario": self.scenario.to_dict() if self.scenario is not None else None,
            "meta": dict(self.meta),
        }

    @classmethod
    def from_dict(cls, d: Any) -> "Result":
        """A result from :meth:`to_dict`'s JSON data; errors at ``result.<field>``."""
        d = check_keys("result", d, [f.name for f in fields(cls)] + ["schema_version"], required=_REQUIRED)
        if d["schema_version"] != RESULT_SCHEMA_VERSION:
            raise InputError("result.schema_version", d["schema_version"],
                             f"{RESULT_SCHEMA_VERSION} (the result format this distsim reads)")
        summary = check_keys("result.summary", d["summary"], [f.name for f in fields(Summary)],
                             required=("step_time_s", "throughput_samples_per_s"))
        try:
            return cls(
                source=d["source"],
                strategy=d["strategy"],
                num_replicas=d["num_replicas"],
                global_batch=d["global_batch"],
                summary=Summary(**summary),
                step_times_s=as_column("result.step_times_s", d.get("step_times_s", []), float),
                trace=_part(d, "trace", Trace.from_dict),
                curve=_part(d, "curve", _curve_from),
                staleness=_part(d, "staleness", _staleness_from),
                scenario=_part(d, "scenario", _scenario_from),
                meta={k: str(v) for k, v in StringMap()("result.meta", d.get("meta", {})).items()},
            )
        except InputError as exc:
            raise exc.rebased("Result", "result") from None

    def save(self, path: str | Path) -> Path:
        return write_json(path, self.to_dict())

    @classmethod
    def load(cls, path: str | Path) -> "Result":
        """The result stored at ``path``; errors name the file (``<path>.summary``)."""
        return _from_file(path, read_json(path, "result file"))


#: Keys every stored result has.
_REQUIRED = ("schema_version", "source", "strategy", "num_replicas", "global_batch", "summary")


def _from_file(path: str | Path, data: Any) -> Result:
    try:
        return Result.from_dict(data)
    except InputError as exc:
        raise exc.rebased("result", str(path)) from None


def _part(d: dict, key: str, build) -> Any:
    """``build(d[key])``, or None when the key is absent or null; errors at ``result.<key>...``."""
    if d.get(key) is None:
        return None
    try:
        return build(d[key])
    except InputError as exc:
        moved = exc.rebased(key, f"result.{key}")
        raise (moved if moved is not exc else exc.at(f"result.{key}")) from None


def _curve_from(d: Any) -> Curve:
    names = [f.name for f in fields(Curve)]
    d = check_keys("curve", d, names, required=names)
    dtypes = {"step": np.int64}
    try:
        return Curve(**{k: as_column(f"curve.{k}", d[k], dtypes.get(k, np.float64)) for k in names})
    except InputError as exc:
        raise exc.rebased("Curve", "curve") from None


def _staleness_from(d: Any) -> Staleness:
    names = [f.name for f in fields(Staleness)]
    d = check_keys("staleness", d, names, required=names)
    try:
        return Staleness(**{k: as_column(f"staleness.{k}", d[k], np.int64) for k in names})
    except InputError as exc:
        raise exc.rebased("Staleness", "staleness") from None


def _scenario_from(d: Any):
    from distsim.scenario import Scenario  # results sit above the scenario; imported when a file holds one

    return Scenario.from_dict(d)


def load_stored_results(directory: str | Path) -> list[Result]:
    """Every result file in ``directory`` (``*.json``), sorted by file name.

    JSON files that are not results (benchmark reports, which have no
    ``schema_version``/``source`` pair) are skipped; a file that claims to be a
    result but is malformed raises, naming the file.
    """
    results = []
    for path in sorted(Path(directory).glob("*.json")):
        d = read_json(path, "result file")
        if isinstance(d, dict) and "schema_version" in d and "source" in d:
            results.append(_from_file(path, d))
    return results
