"""``distsim.sweep``: predictions over a grid of scenario fields at once.

:func:`sweep` evaluates the closed-form steady-state model of
:mod:`distsim.engines.steady` (and the PS throughput bound for asynchronous
training: an upper bound; `predict` also counts how transfers queue at the
PS, except on an in-process cluster whose one server serves every stage in
turn, where the closed form is exact) over the cartesian product of the values given, vectorised with
NumPy, for speedup/efficiency tables and what-if plots. It uses the mean
compute time (no straggler draws), and the same epoch length, memory model
and time as :func:`distsim.predict`: the run's total simulated time
(:func:`distsim.engines.steady.run_time_s`), from which throughput, the mean
step and the epoch follow.

Every grid row is validated as a scenario would be: each value by its
field's rule, and every row by the cross-field rules of
:mod:`distsim.scenario.rules`, evaluated on whole columns at once. Rows whose
replica does not fit in device memory are flagged (``fits`` = 0) and get
NaN predictions.

``speedup`` is weak scaling (against one device running one replica's
batch), ``strong_speedup`` strong scaling (against one device running the
global batch); ``efficiency`` is the weak speedup divided by the replicas.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from distsim.engines import steady
from distsim.engines.costs import MODEL_FIELDS, StepCosts, async_costs, step_costs
from distsim.mechanics import memory
from distsim.mechanics.strategies import plan
from distsim.scenario import Scenario, limits, require_scenario, rules
from distsim.scenario.paths import rule_at
from distsim.validation import InputError

#: Columns of a :class:`SweepTable` besides the swept fields.
SWEEP_OUTPUTS: tuple[str, ...] = (
    "num_replicas",
    "step_time_s",
    "throughput_samples_per_s",
    "speedup",
    "strong_speedup",
    "efficiency",
    "comm_fraction",
    "epoch_time_s",
    "steps_per_epoch",
    "memory_bytes_per_replica",
    "fits",
)

#: Fields evaluated per group, not as arrays: the replica layout, and the counts that shape the gradient
#: stream (buckets, tensors), which the collectives read from the scenario rather than from a column.
_GROUP_FIELDS = ("cluster.num_workers", "cluster.devices_per_worker", "training.num_buckets",
                 "workload.num_gradient_tensors")


@dataclass
class SweepTable:
    """Predictions over a grid, one row per combination.

    Attributes:
        varied: the swept scenario paths, in the order given.
        columns: one array per swept path and per :data:`SWEEP_OUTPUTS` name.
    """

    varied: list[str]
    columns: dict[str, np.ndarray] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(next(iter(self.columns.values()))) if self.columns else 0

    def __getitem__(self, name: str) -> np.ndarray:
        return self.columns[name]

    def to_dict(self) -> dict:
        def plain(v):
            return None if isinstance(v, float) and np.isnan(v) else v
        return {"varied": list(self.varied),
                "columns": {k: [plain(x) for x in np.asarray(v).tolist()] for k, v in self.columns.items()}}

    def to_text(self, max_rows: int = 200) -> str:
        """A fixed-width table (for the CLI)."""
        names = list(self.varied) + list(SWEEP_OUTPUTS)
        heads = [n.split(".")[-1] for n in names]
        rows = [[_fmt(self.columns[n][i]) for n in names] for i in range(min(len(self), max_rows))]
        widths = [max(len(h), *(len(r[j]) for r in rows)) if rows else len(h) for j, h in enumerate(heads)]
        lines = ["  ".join(h.rjust(w) for h, w in zip(heads, widths))]
        lines += ["  ".join(c.rjust(w) for c, w in zip(r, widths)) for r in rows]
        if len(self) > max_rows:
            lines.append(f"... {len(self) - max_rows} more rows")
        if not np.all(self.columns["fits"]):
            lines.append("rows with fits=0 need more device memory per replica than the device has: no prediction")
        return "\n".join(lines)


def _fmt(v: Any) -> str:
    if v is None or isinstance(v, (str, np.str_)):
        return str(v)
    v = float(v)
    if np.isnan(v):
        return "-"
    if v == int(v) and abs(v) < 1e9:
        return str(int(v))
    return f"{v:.4g}"


def sweep(scenario: Scenario, over: Mapping[str, Any]) -> SweepTable:
    """Predict every combination of the values in ``over`` (a cartesian grid).

    ``over`` maps scenario paths (as in :meth:`Scenario.replace`) to lists of
    values, e.g. ``{"cluster.devices_per_worker": [1, 2, 4, 8],
    "training.global_batch": [64, 256]}``. Numeric model fields are evaluated
    as arrays; other fields (strategy, presets, the replica layout) in groups.

    Raises:
        InputError: a malformed ``over``, a value its field does not accept,
            a grid row that breaks a cross-field rule, or more rows than
            :data:`~distsim.scenario.limits.MAX_SWEEP_ROWS`.
    """
    keys, values = _checked_grid(require_scenario(scenario), over)
    numeric = [k for k in keys if k in MODEL_FIELDS and k not in _GROUP_FIELDS and _all_numbers(values[k])]
    structural = [k for k in keys if k not in numeric]
    for k in numeric:
        rule, integers = rule_at(scenario, k), all(isinstance(x, (int, np.integer)) for x in values[k])
        for v in np.unique(np.asarray(values[k], dtype=float)):
            rule(k, int(v) if integers and float(v).is_integer() else float(v))  # an integer field's rule sees an int
    lengths = [len(values[k]) for k in keys]
    # The grid is kept as an array of shape ``lengths`` (row order: its C order). Each numeric column is one
    # axis of it, so a cost depending on some fields is computed once per combination of those fields only.
    axis_values = {k: np.asarray(values[k], dtype=float if _all_numbers(values[k]) else object)
                   .reshape([n if j == i else 1 for j, n in enumerate(lengths)]) for i, k in enumerate(keys)}
    out = {name: np.zeros(lengths) for name in SWEEP_OUTPUTS}
    group_shape = [len(values[k]) if k in numeric else 1 for k in keys]
    numeric_shape = [len(values[k]) for k in keys if k in numeric]  # a group's block of the grid
    for combo in np.ndindex(*[len(values[k]) for k in structural]):
        scn = scenario
        for k, i in zip(structural, combo):
            scn = scn.replace(k, values[k][i])
        varied = {k: axis_values[k] for k in numeric}
        p = step_costs(scn, varied)
        rules.check_scenario(lambda path, p=p, scn=scn: np.broadcast_to(p.value_at(path), group_shape)
                             if path in numeric else scn.value_at(path))
        at = dict(zip(structural, combo))
        where = tuple(at[k] if k in at else slice(None) for k in keys)
        for name, col in _evaluate(scn, p, group_shape).items():
            out[name][where] = np.broadcast_to(col, group_shape).reshape(numeric_shape)
    columns = {k: np.broadcast_to(axis_values[k], lengths).reshape(-1) for k in keys}
    columns.update({name: col.reshape(-1) for name, col in out.items()})
    return SweepTable(varied=keys, columns=columns)


def _checked_grid(scenario: Scenario, over: Any) -> tuple[list[str], dict[str, list]]:
    """The grid's keys and value lists, each checked; structural values are
    validated by building the scenario with them."""
    if not isinstance(over, Mapping) or not over:
        raise InputError("over", over, "a non-empty mapping of scenario path -> list of values")
    values: dict[str, list] = {}
    rows = 1
    for key, vals in over.items():
        if not isinstance(key, str):
            raise InputError("over", key, "scenario paths as strings, e.g. 'training.global_batch'")
        if isinstance(vals, (str, bytes, Mapping)) or not hasattr(vals, "__len__") or len(vals) == 0:
            raise InputError(f"over[{key!r}]", vals, "a non-empty list of values")
        rows *= len(vals)
        if rows > limits.MAX_SWEEP_ROWS:
            raise InputError(f"over[{key!r}]", f"{len(vals):,} values", f"a grid of at most {limits.MAX_SWEEP_ROWS:,} "
                             "rows (the product of the list lengths)")
        values[key] = list(vals)
        rule_at(scenario, key)  # an unknown path fails here, before any work
        if key in _GROUP_FIELDS or key not in MODEL_FIELDS or not _all_numbers(values[key]):
            seen: dict = {}
            for v in values[key]:
                seen.setdefault(repr(v), v)
            for v in seen.values():
                scenario.replace(key, v)
    return list(values), values


def _all_numbers(vals: list) -> bool:
    return all(isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))
               for v in vals)


def _evaluate(scn: Scenario, p: StepCosts, shape: list[int]) -> dict[str, np.ndarray]:
    """The :data:`SWEEP_OUTPUTS` of one group's rows, arrays that broadcast to ``shape``."""
    plan_ = plan(scn)
    if plan_.mode == "async":
        p = p.broadcast(shape)  # the asynchronous costs expect every field at the rows' shape
    replicas = np.full(shape, float(scn.num_replicas))
    model = steady.step_model(scn, p)
    if plan_.mode == "async":
        costs = async_costs(p, plan_)
        transfers = costs.pull_s + costs.push_s
        # Workers are independent until the PS saturates (the last may be a straggler).
        free_rate = (replicas - 1) / (transfers + costs.compute_s) + 1 / (transfers + costs.straggler_compute_s)
        # Where the PS's one server serves the workers' own time too, it is never idle and serves every
        # worker's whole cycle in turn: one update each per sum of their cycles (the event engine exactly).
        turns_rate = replicas / ((replicas - 1) * (transfers + costs.compute_s) + transfers + costs.straggler_compute_s)
        rate = np.where(costs.compute_at_ps, turns_rate, np.minimum(free_rate, costs.ps_updates_per_s))
        throughput = rate * costs.worker_batch
        footprint = memory.footprint(p, scn.strategy.name, costs.worker_batch)
        out = {
            "step_time_s": replicas / rate,
            "throughput_samples_per_s": throughput,
            "comm_fraction": (costs.push_s + costs.pull_s) * rate / replicas,
            "epoch_time_s": p.num_examples / throughput,
            "steps_per_epoch": -(-p.num_examples // costs.worker_batch),
        }
    else:
        throughput = model.throughput_samples_per_s
        footprint = memory.footprint(p, scn.strategy.name, -(-p.global_batch // replicas))
        out = {
            "step_time_s": model.mean_step_time_s,
            "throughput_samples_per_s": throughput,
            "comm_fraction": model.run_exposed_comm_s / model.run_time_s,
            "epoch_time_s": model.epoch_time_s,
            "steps_per_epoch": model.steps_per_epoch,
        }
    speedup = throughput / model.baseline_throughput_samples_per_s
    out.update(speedup=speedup, efficiency=speedup / replicas,
               strong_speedup=throughput / model.strong_baseline_throughput_samples_per_s)
    fits = np.broadcast_to(footprint.fits, replicas.shape)
    out = {k: np.where(fits, np.broadcast_to(v, replicas.shape).astype(float), np.nan) for k, v in out.items()}
    out.update(num_replicas=replicas, memory_bytes_per_replica=np.broadcast_to(footprint.total_bytes, replicas.shape),
               fits=fits.astype(float))
    return out
