"""Published measurements and the simulator's predictions of them.

``distsim/published/tables/*.json`` hold published tables, their source, the hardware
setup as scenario fields and every assumption in words. For each table this
module calibrates one number per hardware setup (the device's seconds per
example) from the single-device column only, predicts every other cell with
:func:`distsim.predict`, and reports the signed error. Nothing is fitted per
cell. ``data/reference/README.md`` explains the residuals.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from distsim.engines import steady
from distsim.validation.jsonfile import read_json
from distsim.engines.prediction import predict
from distsim.scenario import SCHEMA_VERSION, Scenario


def reference_dir() -> Path:
    """The folder of published tables installed with the package."""
    return Path(__file__).resolve().with_name("tables")


@dataclass(frozen=True)
class Column:
    """One column of a published table: a strategy and a batch."""

    label: str
    strategy: str
    num_workers: int
    devices_per_worker: int
    global_batch: int


@dataclass(frozen=True)
class ReferenceTable:
    """A published table.

    Attributes:
        id: short name.
        title: what was measured.
        metric: ``"seconds per epoch"`` or ``"seconds for N epochs"``.
        epochs_reported: epochs each published number covers.
        columns: the table's columns; column 0 is the single-device baseline.
        published: dataset -> one number per column (seconds).
        datasets: dataset -> training examples.
        setup: scenario fields shared by every cell (cluster, workload, training).
        assumptions: every assumption, in words.
        source: where the numbers come from.
    """

    id: str
    title: str
    metric: str
    epochs_reported: int
    columns: tuple[Column, ...]
    published: dict
    datasets: dict
    setup: dict
    assumptions: dict
    source: str


def load_tables(path: str | Path | None = None) -> list[ReferenceTable]:
    """Read a reference file (default: the package's ``tables/source001_tables.json``)."""
    path = Path(path) if path is not None else reference_dir() / "source001_tables.json"
    data = read_json(path, "reference tables")
    if data.get("schema_version") != 1:
        raise ValueError(f"{path}: schema_version={data.get('schema_version')!r}; allowed: 1")
    return [
        ReferenceTable(
            id=t["id"],
            title=t["title"],
            metric=t["metric"],
            epochs_reported=int(t["epochs_reported"]),
            columns=tuple(Column(**c) for c in t["columns"]),
            published={k: [float(x) for x in v] for k, v in t["published"].items()},
            datasets={k: int(v) for k, v in t["datasets"].items()},
            setup=t["setup"],
            assumptions=t["assumptions"],
            source=data["source"],
        )
        for t in data["tables"]
    ]


def cell_scenario(table: ReferenceTable, column: int, dataset: str, compute_s_per_sample: float) -> Scenario:
    """The scenario of one cell: the table's setup plus the column's strategy
    and batch, the dataset's size and the calibrated compute time."""
    col = table.columns[column]
    workload = table.setup["workload"]
    workload = dict(workload) if isinstance(workload, dict) else {"preset": workload}
    workload.update(num_examples=table.datasets[dataset], compute_s_per_sample=compute_s_per_sample)
    training = dict(table.setup.get("training", {}), global_batch=col.global_batch, epochs=table.epochs_reported)
    if col.num_workers == 1:
        training.pop("shard_policy", None)
        training.pop("num_files", None)
    cluster = dict(table.setup["cluster"], num_workers=col.num_workers, devices_per_worker=col.devices_per_worker)
    return Scenario.from_dict(
        {
            "schema_version": SCHEMA_VERSION,
            "name": f"{table.id}: {dataset}, {col.label}",
            "cluster": cluster,
            "workload": workload,
            "strategy": {"name": col.strategy},
            "training": training,
        }
    )


def predicted_seconds(table: ReferenceTable, column: int, dataset: str, compute_s_per_sample: float) -> float:
    """The simulator's value of one cell, in the table's metric."""
    result = predict(cell_scenario(table, column, dataset, compute_s_per_sample))
    return result.summary.epoch_time_s * table.epochs_reported


def _model_seconds(table: ReferenceTable, column: int, dataset: str, compute_s_per_sample: float) -> float:
    """The closed-form model's value of a cell (what :func:`predicted_seconds`
    gives for deterministic compute, without building the timeline)."""
    scn = cell_scenario(table, column, dataset, compute_s_per_sample)
    out = steady.step_model(scn)
    return float(out.epoch_time_s) * table.epochs_reported


def calibrate(table: ReferenceTable) -> float:
    """Seconds per example of the table's device: for each dataset the value
    that reproduces its single-device cell (bisection on the closed-form
    model; the prediction grows with it), then their geometric mean. Uses
    column 0 only."""
    solutions = []
    for dataset, values in table.published.items():
        lo, hi = 1e-7, 1.0
        for _ in range(50):
            mid = math.sqrt(lo * hi)
            if _model_seconds(table, 0, dataset, mid) > values[0]:
                hi = mid
            else:
                lo = mid
        solutions.append(math.sqrt(lo * hi))
    return float(np.exp(np.mean(np.log(solutions))))


@dataclass(frozen=True)
class Cell:
    """Published vs predicted for one cell; ``error`` is (predicted -
    published) / published. ``calibration`` marks the single-device column."""

    table: str
    dataset: str
    column: str
    published: float
    predicted: float
    calibration: bool

    @property
    def error(self) -> float:
        return (self.predicted - self.published) / self.published


def compare(table: ReferenceTable) -> tuple[float, list[Cell]]:
    """(calibrated seconds per example, every cell with its error)."""
    s = calibrate(table)
    cells = [
        Cell(table.id, dataset, col.label, values[j], predicted_seconds(table, j, dataset, s), j == 0)
        for dataset, values in table.published.items()
        for j, col in enumerate(table.columns)
    ]
    return s, cells


def report(tables: list[ReferenceTable] | None = None) -> str:
    """A Markdown report of every table: published, predicted, signed error,
    and the mean |error| over the predicted (non-calibration) cells."""
    lines = []
    for table in tables if tables is not None else load_tables():
        s, cells = compare(table)
        lines += [f"### {table.title}", "", f"Calibrated device time: {s * 1e3:.3f} ms per example "
                  f"({table.metric}).", "", "| dataset | column | published | predicted | error |", "|---|---|---|---|---|"]
        for c in cells:
            tag = " (calibration)" if c.calibration else ""
            lines.append(f"| {c.dataset} | {c.column}{tag} | {c.published:g} | {c.predicted:.1f} | {c.error:+.1%} |")
        errs = [abs(c.error) for c in cells if not c.calibration]
        lines += ["", f"Predicted cells: mean |error| {np.mean(errs):.1%}, largest {np.max(errs):.1%}.", ""]
    return "\n".join(lines)
