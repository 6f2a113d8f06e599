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
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from distsim.engines import timing
from distsim.engines.prediction import predict
from distsim.mechanics.strategies import plan
from distsim.scenario import SCHEMA_VERSION, STRATEGIES, Scenario
from distsim.validation import (InputError, Integer, Number, OneOf, StringMap, Text, check_fields, check_keys,
                                checked, read_json)

_COUNT = Integer(1)
_TEXT = Text(10_000)


def reference_dir() -> Path:
    """The folder of published tables installed with the package."""
    return Path(__file__).resolve().with_name("tables")


@dataclass(frozen=True)
class Column:
    """One column of a published table: a strategy and a batch."""

    label: str = checked(_TEXT)
    strategy: str = checked(OneOf(STRATEGIES))
    num_workers: int = checked(_COUNT)
    devices_per_worker: int = checked(_COUNT)
    global_batch: int = checked(_COUNT)

    def __post_init__(self) -> None:
        check_fields(self, "Column")


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
    data = check_keys(str(path), read_json(path, "reference tables"), ("schema_version", "source", "tables"),
                      required=("schema_version", "source", "tables"))
    if data["schema_version"] != 1:
        raise InputError(f"{path}.schema_version", data["schema_version"], "1 (the reference-table format this "
                         "distsim reads)")
    source = _TEXT(f"{path}.source", data["source"])
    if not isinstance(data["tables"], list):
        raise InputError(f"{path}.tables", data["tables"], "a list of tables")
    return [_table(f"{path}.tables[{i}]", t, source) for i, t in enumerate(data["tables"])]


def _table(path: str, t: Any, source: str) -> ReferenceTable:
    """One table of a reference file, every field checked (errors at ``<file>.tables[i].<field>``)."""
    names = [f.name for f in fields(ReferenceTable) if f.name != "source"]
    t = check_keys(path, t, names, required=names)
    if not isinstance(t["columns"], list) or not t["columns"]:
        raise InputError(f"{path}.columns", t["columns"], "a non-empty list of columns")
    columns = tuple(_column(f"{path}.columns[{j}]", c) for j, c in enumerate(t["columns"]))
    published = StringMap()(f"{path}.published", t["published"])
    for dataset, values in published.items():
        if not isinstance(values, list) or len(values) != len(columns):
            raise InputError(f"{path}.published.{dataset}", values, f"one number per column ({len(columns)})")
        published[dataset] = [float(Number(0, low_open=True, unit="seconds")(f"{path}.published.{dataset}[{j}]", x))
                              for j, x in enumerate(values)]
    datasets = {k: _COUNT(f"{path}.datasets.{k}", v) for k, v in StringMap()(f"{path}.datasets", t["datasets"]).items()}
    missing = sorted(set(published) - set(datasets))
    if missing:
        raise InputError(f"{path}.datasets", datasets, f"the size of every published dataset (missing {missing})")
    return ReferenceTable(
        id=_TEXT(f"{path}.id", t["id"]),
        title=_TEXT(f"{path}.title", t["title"]),
        metric=_TEXT(f"{path}.metric", t["metric"]),
        epochs_reported=_COUNT(f"{path}.epochs_reported", t["epochs_reported"]),
        columns=columns,
        published=published,
        datasets=datasets,
        setup=check_keys(f"{path}.setup", t["setup"], ("cluster", "workload", "training"),
                         required=("cluster", "workload")),
        assumptions=StringMap()(f"{path}.assumptions", t["assumptions"]),
        source=source,
    )


def _column(path: str, c: Any) -> Column:
    names = [f.name for f in fields(Column)]
    try:
        return Column(**check_keys(path, c, names, required=names))
    except InputError as exc:
        raise exc.rebased("Column", path) from None


def cell_scenario(table: ReferenceTable, column: int, dataset: str, compute_s_per_sample: float) -> Scenario:
    """The scenario of one cell: the table's setup plus the column's strategy
    and batch, the dataset's size and the calibrated compute time."""
    col = table.columns[Integer(0, len(table.columns) - 1, "a column of the table")("column", column)]
    OneOf(tuple(table.datasets))("dataset", dataset)
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
    out = timing.step_model(timing.model_params(scn), plan(scn), scn.cluster.device.kind, scn.training.shard_policy)
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
