"""The one result type shared by simulated and measured runs.

The timing engine (``distsim.predict``), the NumPy numerics (``distsim.numerics.train``)
and the real TensorFlow runs (``distsim.real``) all return a :class:`Result`.
That is what makes "predicted vs measured" one function call.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from distsim.validation.jsonfile import read_json, write_json
from distsim.results.trace import Trace

#: Where a result came from.
SOURCES: tuple[str, ...] = ("predicted", "simulated", "measured")

RESULT_SCHEMA_VERSION = 1


@dataclass
class Summary:
    """Headline metrics of one run.

    Attributes:
        step_time_s: median wall time of one synchronous step, or for async
            training the mean time between applied updates times the number of
            workers, in seconds.
        throughput_samples_per_s: training examples processed per second.
        speedup: weak scaling: throughput relative to one device of the same
            kind running one replica's batch; ``None`` when no baseline is known.
        efficiency: ``speedup / num_replicas``; ``None`` without a speedup.
        comm_fraction: share of the step spent in communication that is not
            hidden behind compute (0..1); ``None`` when not measured.
        epoch_time_s: seconds for one pass over the training set, or ``None``.
        mean_staleness: mean staleness of applied updates (async only).
        strong_speedup: strong scaling: throughput relative to one device of
            the same kind running the whole global batch; ``None`` when not known.
        steps_per_epoch: synchronous steps (async: applied updates) in one
            epoch; ``None`` when not known.
        memory_bytes_per_replica: device memory one replica needs, bytes (a
            lower bound; see :mod:`distsim.mechanics.memory`); ``None`` when
            not known.
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
        lengths = {len(self.step), len(self.time_s), len(self.loss), len(self.accuracy)}
        if len(lengths) != 1:
            raise ValueError(f"Curve columns differ in length: {sorted(lengths)}")


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
        if len(self.staleness) != len(self.worker):
            raise ValueError(
                f"Staleness has {len(self.staleness)} values but {len(self.worker)} worker ids"
            )

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

    source: str
    strategy: str
    num_replicas: int
    global_batch: int
    summary: Summary
    step_times_s: np.ndarray = field(default_factory=lambda: np.zeros(0))
    trace: Trace | None = None
    curve: Curve | None = None
    staleness: Staleness | None = None
    scenario: Any = None
    meta: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise ValueError(f"Result.source={self.source!r}; allowed: {SOURCES}")

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
    def from_dict(cls, d: dict) -> "Result":
        version = d.get("schema_version")
        if version != RESULT_SCHEMA_VERSION:
            raise ValueError(
                f"result schema_version={version!r}; this distsim reads version {RESULT_SCHEMA_VERSION}"
            )
        scenario = None
        if d.get("scenario") is not None:
            from distsim.scenario import Scenario

            scenario = Scenario.from_dict(d["scenario"])
        curve = d.get("curve")
        stale = d.get("staleness")
        return cls(
            source=d["source"],
            strategy=d["strategy"],
            num_replicas=int(d["num_replicas"]),
            global_batch=int(d["global_batch"]),
            summary=Summary(**d["summary"]),
            step_times_s=np.asarray(d.get("step_times_s", []), dtype=float),
            trace=Trace.from_dict(d["trace"]) if d.get("trace") else None,
            curve=Curve(**{k: np.asarray(v) for k, v in curve.items()}) if curve else None,
            staleness=(
                Staleness(**{k: np.asarray(v, dtype=np.int64) for k, v in stale.items()})
                if stale
                else None
            ),
            scenario=scenario,
            meta={str(k): str(v) for k, v in d.get("meta", {}).items()},
        )

    def save(self, path: str | Path) -> Path:
        return write_json(path, self.to_dict())

    @classmethod
    def load(cls, path: str | Path) -> "Result":
        return cls.from_dict(read_json(path, "result file"))


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
            try:
                results.append(Result.from_dict(d))
            except (KeyError, TypeError, ValueError) as exc:
                raise ValueError(f"{path} is not a valid result file: {exc}") from None
    return results
