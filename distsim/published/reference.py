"""Published measurements and the simulator's predictions of them.

``distsim/published/tables/*.json`` hold published tables, their source, the
hardware setup as scenario fields and every assumption in words. For each
table this module calibrates the device's seconds per example from the
single-device column only (one number per table, or per row when the rows
are different models), predicts every other cell with :func:`distsim.predict`,
and reports the signed error. Nothing is fitted per cell. The rules every
hand-set parameter follows are in ``data/reference/RULES.md``; the residuals
are explained in ``data/reference/README.md``.

A table's metric is ``"seconds per epoch"``, ``"seconds for N epochs"``
(``epochs_reported``) or ``"images per second"`` (the predicted throughput).
Its setup is scenario fields shared by every cell (``cluster``,
``workload``, ``strategy``, ``training``, ``batch_per_replica``); ``rows``
override them per row (``devices`` sets the device count of columns that
leave it open), ``num_ps`` gives the parameter-server tasks of each cell,
and each column sets the replica layout, optionally the strategy and the
global batch.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np

from distsim.engines import steady
from distsim.engines.costs import step_costs
from distsim.engines.prediction import predict
from distsim.scenario import SCHEMA_VERSION, STRATEGIES, Scenario
from distsim.validation import (Boolean, InputError, Integer, Number, OneOf, Optional, StringMap, Text, check_fields,
                                check_keys, checked, read_json)

_COUNT = Integer(1)
_TEXT = Text(10_000)
#: What a table's setup (and a row's overrides) may set.
_SETUP_KEYS = ("cluster", "workload", "strategy", "training", "batch_per_replica", "devices")

#: The two tables of the chapter "Distributed training with TensorFlow" of *A Concise Handbook of
#: TensorFlow 2* (Xihan Li et al., https://tf.wiki/en/appendix/distributed.html): the seed tables.
SEED_FILE = "source001_tables.json"
#: Tables of published multi-GPU and multi-node results (issue 15).
CLUSTER_FILES: tuple[str, ...] = ("tf_benchmarks_2017.json", "cscs_2017.json", "nvidia_dle_rn50.json")
THROUGHPUT = "images per second"


def reference_dir() -> Path:
    """The folder of published tables installed with the package."""
    return Path(__file__).resolve().with_name("tables")


@dataclass(frozen=True)
class Column:
    """One column of a published table: a replica layout, optionally a
    strategy (else the setup's) and a global batch (else
    ``batch_per_replica`` x replicas); ``devices_per_worker`` null takes the
    row's ``devices``; ``prefetch`` overrides ``Training.prefetch`` when the
    source's TensorFlow release did not have today's default."""

    label: str = checked(_TEXT)
    num_workers: int = checked(_COUNT)
    devices_per_worker: int | None = checked(Optional(_COUNT, "the row's devices"))
    strategy: str | None = checked(Optional(OneOf(STRATEGIES), "the setup's strategy"), default=None)
    global_batch: int | None = checked(Optional(_COUNT, "batch_per_replica x replicas"), default=None)
    prefetch: bool | None = checked(Optional(Boolean(), "the strategy's default"), default=None)

    def __post_init__(self) -> None:
        check_fields(self, "Column")


@dataclass(frozen=True)
class ReferenceTable:
    """A published table.

    Attributes:
        id: short name.
        title: what was measured, and where in the source.
        metric: see the module docstring.
        epochs_reported: epochs each published number covers (time metrics).
        columns: the table's columns; column 0 is the single-device baseline.
        published: row -> one number per column.
        datasets: row -> training examples (time metrics).
        setup: scenario fields shared by every cell.
        rows: row -> overrides of the setup.
        num_ps: row -> parameter-server tasks per column.
        calibrate_per: ``"table"`` (one device time from every row's first
            cell, their geometric mean) or ``"row"`` (one per row).
        assumptions: every assumption, in words.
        source: where the numbers come from.
        file: the tables file it was read from.
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
    rows: dict = field(default_factory=dict)
    num_ps: dict = field(default_factory=dict)
    calibrate_per: str = "table"
    file: str = SEED_FILE

    @property
    def throughput(self) -> bool:
        return self.metric == THROUGHPUT


def load_tables(path: str | Path | None = None) -> list[ReferenceTable]:
    """Read a reference file (default: the seed tables, ``tables/source001_tables.json``);
    every field is checked, errors name ``<file>.tables[i].<field>``."""
    path = Path(path) if path is not None else reference_dir() / SEED_FILE
    data = check_keys(str(path), read_json(path, "reference tables"), ("schema_version", "source", "tables"),
                      required=("schema_version", "source", "tables"))
    if data["schema_version"] != 1:
        raise InputError(f"{path}.schema_version", data["schema_version"], "1 (the reference-table format this "
                         "distsim reads)")
    source = _TEXT(f"{path}.source", data["source"])
    if not isinstance(data["tables"], list):
        raise InputError(f"{path}.tables", data["tables"], "a list of tables")
    return [_table(f"{path}.tables[{i}]", t, source, Path(path).name) for i, t in enumerate(data["tables"])]


def _table(path: str, t: Any, source: str, file: str) -> ReferenceTable:
    """One table of a reference file, every field checked."""
    required = ["id", "title", "metric", "columns", "published", "setup", "assumptions"]
    throughput = isinstance(t, dict) and t.get("metric") == THROUGHPUT
    if not throughput:
        required += ["epochs_reported", "datasets"]
    t = check_keys(path, t, required + ["epochs_reported", "datasets", "rows", "num_ps", "calibrate"],
                   required=required)
    if not isinstance(t["columns"], list) or not t["columns"]:
        raise InputError(f"{path}.columns", t["columns"], "a non-empty list of columns")
    columns = tuple(_column(f"{path}.columns[{j}]", c) for j, c in enumerate(t["columns"]))
    unit = "images/s" if throughput else "seconds"
    published = StringMap()(f"{path}.published", t["published"])
    for row, values in published.items():
        if not isinstance(values, list) or len(values) != len(columns):
            raise InputError(f"{path}.published.{row}", values, f"one number per column ({len(columns)})")
        published[row] = [float(Number(0, low_open=True, unit=unit)(f"{path}.published.{row}[{j}]", x))
                          for j, x in enumerate(values)]
    datasets = {k: _COUNT(f"{path}.datasets.{k}", v)
                for k, v in StringMap()(f"{path}.datasets", t.get("datasets", {})).items()}
    missing = sorted(set(published) - set(datasets))
    if missing and not throughput:
        raise InputError(f"{path}.datasets", datasets, f"the size of every published dataset (missing {missing})")
    rows = StringMap()(f"{path}.rows", t.get("rows", {}))
    for row, overrides in rows.items():
        OneOf(tuple(published))(f"{path}.rows.{row}", row)
        check_keys(f"{path}.rows.{row}", overrides, _SETUP_KEYS)
    num_ps = StringMap()(f"{path}.num_ps", t.get("num_ps", {}))
    for row, counts in num_ps.items():
        if not isinstance(counts, list) or len(counts) != len(columns):
            raise InputError(f"{path}.num_ps.{row}", counts, f"one PS count per column ({len(columns)})")
        num_ps[row] = [_COUNT(f"{path}.num_ps.{row}[{j}]", n) for j, n in enumerate(counts)]
    calibrate_per = OneOf(("per_table", "per_row"))(f"{path}.calibrate", t.get("calibrate", "per_table"))
    return ReferenceTable(
        id=_TEXT(f"{path}.id", t["id"]),
        title=_TEXT(f"{path}.title", t["title"]),
        metric=_TEXT(f"{path}.metric", t["metric"]),
        epochs_reported=_COUNT(f"{path}.epochs_reported", t.get("epochs_reported", 1)),
        columns=columns,
        published=published,
        datasets=datasets,
        setup=check_keys(f"{path}.setup", t["setup"], _SETUP_KEYS),
        assumptions=StringMap()(f"{path}.assumptions", t["assumptions"]),
        source=source,
        rows=rows,
        num_ps=num_ps,
        calibrate_per="row" if calibrate_per == "per_row" else "table",
        file=file,
    )


def _column(path: str, c: Any) -> Column:
    names = [f.name for f in fields(Column)]
    try:
        return Column(**check_keys(path, c, names, required=("label", "num_workers", "devices_per_worker")))
    except InputError as exc:
        raise exc.rebased("Column", path) from None


def load_cluster_tables() -> list[ReferenceTable]:
    """The published multi-GPU and multi-node tables (:data:`CLUSTER_FILES`)."""
    return [t for name in CLUSTER_FILES for t in load_tables(reference_dir() / name)]


def _merged(table: ReferenceTable, row: str) -> dict:
    """The table's setup with the row's overrides (dicts merged one level deep)."""
    setup = copy.deepcopy(table.setup)
    for key, value in table.rows.get(row, {}).items():
        if isinstance(value, dict) and isinstance(setup.get(key), dict):
            setup[key] = {**setup[key], **value}
        else:
            setup[key] = value
    return setup


#: What the simulator had before issue 15's mechanisms (for before/after reports).
_MECHANISMS_OFF = {"strategy": {"protocol": "alpha_beta", "inter_algorithm": "ring", "ps_local_sum": False,
                                "ps_placement": "own_hosts"},
                   "training": {"grouping": "buckets", "num_buckets": 1, "bytes_per_pack": 0}}


def cell_scenario(table: ReferenceTable, column: int, dataset: str, compute_s_per_sample: float,
                  mechanisms: bool = True) -> Scenario:
    """The scenario of one cell: the table's setup, the row's overrides, the
    column's layout and batch, the calibrated compute time. ``mechanisms=False``
    turns off server topology, NCCL, local sums, PS placement and gradient
    grouping (the simulator before issue 15)."""
    col = table.columns[Integer(0, len(table.columns) - 1, "a column of the table")("column", column)]
    OneOf(tuple(table.published))("dataset", dataset)
    setup = _merged(table, dataset)
    devices = col.devices_per_worker or setup.get("devices")
    workload = setup["workload"]
    workload = dict(workload) if isinstance(workload, dict) else {"preset": workload}
    workload["compute_s_per_sample"] = compute_s_per_sample
    if table.throughput:  # synthetic data: no input pipeline
        workload.update(input_s_per_sample=0.0, input_bytes_per_sample=0)
    else:
        workload["num_examples"] = table.datasets[dataset]
    batch = col.global_batch or setup["batch_per_replica"] * col.num_workers * devices
    training = dict(setup.get("training", {}), global_batch=batch, epochs=table.epochs_reported)
    if col.prefetch is not None:
        training["prefetch"] = col.prefetch
    if col.num_workers == 1:
        training.pop("shard_policy", None)
        training.pop("num_files", None)
    strategy = dict(setup.get("strategy", {}))
    if col.strategy:
        strategy["name"] = col.strategy
    if dataset in table.num_ps:
        strategy["num_ps"] = table.num_ps[dataset][column]
    cluster = dict(setup["cluster"], num_workers=col.num_workers, devices_per_worker=devices)
    if not mechanisms:
        cluster.pop("topology", None)
        strategy.update(_MECHANISMS_OFF["strategy"])
        training = {k: v for k, v in training.items() if not k.startswith("fusion_")}
        training.update(_MECHANISMS_OFF["training"])
    scenario = Scenario.from_dict({
        "schema_version": SCHEMA_VERSION,
        "name": f"{table.id}: {dataset}, {col.label}",
        "cluster": cluster,
        "workload": workload,
        "strategy": strategy,
        "training": training,
    })
    if table.throughput:
        return scenario
    # An epoch-time cell simulates one whole epoch: its fill and final step, counted once (predict's epoch
    # is steps_per_epoch mean steps of the run, distsim.engines.prediction).
    return scenario.replace("training.steps", int(steady.epoch_plan(step_costs(scenario)).steps))


def _value(table: ReferenceTable, scenario: Scenario, *, closed_form: bool) -> float:
    """A cell's value in the table's metric, from predict() or the closed form."""
    if closed_form:
        out = steady.step_model(scenario)
        if table.throughput:
            return float(out.throughput_samples_per_s)
        return float(out.epoch_time_s) * table.epochs_reported
    summary = predict(scenario).summary
    return summary.throughput_samples_per_s if table.throughput else summary.epoch_time_s * table.epochs_reported


def predicted_value(table: ReferenceTable, column: int, dataset: str, compute_s_per_sample: float,
                    mechanisms: bool = True) -> float:
    """The simulator's value of one cell, in the table's metric."""
    return _value(table, cell_scenario(table, column, dataset, compute_s_per_sample, mechanisms), closed_form=False)


#: The earlier name, for time metrics.
predicted_seconds = predicted_value


#: Seconds per example the calibration searches between: 0.1 us (far faster
#: than any published device per example) to 1 s.
_SOLVE_BOUNDS_S = (1e-7, 1.0)


def _solve(table: ReferenceTable, dataset: str, target: float, mechanisms: bool) -> float:
    """Seconds per example that reproduce ``target`` in column 0 (bisection
    in log space on the closed-form model, monotone in it).

    Raises:
        InputError: at ``<table>.published.<row>[0]`` when no seconds per
            example within :data:`_SOLVE_BOUNDS_S` reproduce ``target``
            (the bisection would return a bound and every cell of the row
            would be judged against a device that was never calibrated).
    """
    def slower(s: float) -> bool:
        value = _value(table, cell_scenario(table, 0, dataset, s, mechanisms), closed_form=True)
        return value < target if table.throughput else value > target

    lo, hi = _SOLVE_BOUNDS_S
    if slower(lo) or not slower(hi):
        reachable = [_value(table, cell_scenario(table, 0, dataset, s, mechanisms), closed_form=True)
                     for s in (hi, lo)]
        raise InputError(f"{table.id}.published.{dataset}[0]", target,
                         f"a {table.metric} the single-device cell can reach with {lo:g} to {hi:g} s per "
                         f"example (from {reachable[0]:.4g} to {reachable[1]:.4g})")
    for _ in range(60):
        mid = math.sqrt(lo * hi)
        if slower(mid):
            hi = mid
        else:
            lo = mid
    return math.sqrt(lo * hi)


def calibrate(table: ReferenceTable, mechanisms: bool = True) -> float | dict[str, float]:
    """Seconds per example of the table's device from column 0 only: one
    number (the geometric mean over the rows) or, per row, a dict."""
    solved = {row: _solve(table, row, values[0], mechanisms) for row, values in table.published.items()}
    if table.calibrate_per == "row":
        return solved
    return float(np.exp(np.mean(np.log(list(solved.values())))))


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


def compare(table: ReferenceTable, mechanisms: bool = True) -> tuple[float | dict, list[Cell]]:
    """(calibrated seconds per example, every published cell with its error)."""
    s = calibrate(table, mechanisms)
    cells = []
    for dataset, values in table.published.items():
        per_example = s[dataset] if isinstance(s, dict) else s
        for j, col in enumerate(table.columns):
            predicted = predicted_value(table, j, dataset, per_example, mechanisms)
            cells.append(Cell(table.id, dataset, col.label, values[j], predicted, j == 0))
    return s, cells


def report(tables: list[ReferenceTable] | None = None) -> str:
    """A Markdown report of every table: published, predicted, signed error,
    and the mean |error| over the predicted (non-calibration) cells."""
    lines = []
    for table in tables if tables is not None else load_tables():
        s, cells = compare(table)
        if isinstance(s, dict):
            calib = ", ".join(f"{row} {v * 1e3:.3f}" for row, v in s.items())
            lines += [f"### {table.title}", "", f"Calibrated device time (ms per example): {calib}.", ""]
        else:
            lines += [f"### {table.title}", "", f"Calibrated device time: {s * 1e3:.3f} ms per example "
                      f"({table.metric}).", ""]
        lines += ["| row | column | published | predicted | error |", "|---|---|---|---|---|"]
        for c in cells:
            tag = " (calibration)" if c.calibration else ""
            lines.append(f"| {c.dataset} | {c.column}{tag} | {c.published:g} | {c.predicted:.1f} | {c.error:+.1%} |")
        errs = [abs(c.error) for c in cells if not c.calibration]
        lines += ["", f"Predicted cells: mean |error| {np.mean(errs):.1%}, median {np.median(errs):.1%}, "
                  f"largest {np.max(errs):.1%}.", ""]
    return "\n".join(lines)


@dataclass(frozen=True)
class Comparison:
    """One cell predicted with issue 15's mechanisms and without them."""

    file: str
    cell: Cell
    before: Cell


def compare_all(tables: list[ReferenceTable] | None = None) -> list[Comparison]:
    """Every cell of ``tables`` (default: the cluster tables and the seed
    tables), predicted with the mechanisms and without (each calibrated its
    own way from the single-device column)."""
    tables = tables if tables is not None else load_cluster_tables() + load_tables()
    out = []
    for table in tables:
        _, after = compare(table)
        _, before = compare(table, mechanisms=False)
        out += [Comparison(table.file, a, b) for a, b in zip(after, before)]
    return out


def error_summary(comparisons: list[Comparison]) -> dict[str, dict[str, float]]:
    """Per tables file and over the cluster files: cells, median and largest
    |error| of the predicted (non-calibration) cells, after and before."""
    groups: dict[str, list[Comparison]] = {}
    for c in comparisons:
        if not c.cell.calibration:
            groups.setdefault(c.file, []).append(c)
            if c.file in CLUSTER_FILES:
                groups.setdefault("all cluster tables", []).append(c)
    out = {}
    for name, items in groups.items():
        after = np.abs([c.cell.error for c in items])
        before = np.abs([c.before.error for c in items])
        out[name] = {"cells": len(items), "median": float(np.median(after)), "max": float(after.max()),
                     "mean": float(after.mean()), "median_before": float(np.median(before)),
                     "max_before": float(before.max()), "mean_before": float(before.mean())}
    return out
