"""``distsim.sweep``: predictions over a grid of scenario fields at once.

:func:`sweep` evaluates the closed-form steady-state model of
:mod:`distsim.engines.timing` (and the PS throughput bound for asynchronous
training) over the cartesian product of the values given, vectorised with
NumPy, for speedup/efficiency tables and what-if plots. It uses the mean
compute time (no straggler draws).

Speedup is throughput relative to one device of the same kind running one
replica's batch with the same input pipeline (weak scaling); efficiency is
speedup divided by the number of replicas.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from distsim.engines import timing
from distsim.engines.prediction import async_costs
from distsim.mechanics.strategies import plan
from distsim.scenario import Scenario

#: Columns of a :class:`SweepTable` besides the swept fields.
SWEEP_OUTPUTS: tuple[str, ...] = (
    "num_replicas",
    "step_time_s",
    "throughput_samples_per_s",
    "speedup",
    "efficiency",
    "comm_fraction",
    "epoch_time_s",
)



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
        return {"varied": list(self.varied), "columns": {k: np.asarray(v).tolist() for k, v in self.columns.items()}}

    def to_text(self, max_rows: int = 200) -> str:
        """A fixed-width table (for the CLI)."""
        names = list(self.varied) + list(SWEEP_OUTPUTS)
        heads = [n.split(".")[-1] for n in names]
        rows = []
        for i in range(min(len(self), max_rows)):
            rows.append([_fmt(self.columns[n][i]) for n in names])
        widths = [max(len(h), *(len(r[j]) for r in rows)) if rows else len(h) for j, h in enumerate(heads)]
        lines = ["  ".join(h.rjust(w) for h, w in zip(heads, widths))]
        lines += ["  ".join(c.rjust(w) for c, w in zip(r, widths)) for r in rows]
        if len(self) > max_rows:
            lines.append(f"... {len(self) - max_rows} more rows")
        return "\n".join(lines)


def _fmt(v: Any) -> str:
    if isinstance(v, (str, np.str_)):
        return str(v)
    v = float(v)
    if v == int(v) and abs(v) < 1e9:
        return str(int(v))
    return f"{v:.4g}"


_GROUP_FIELDS = ("cluster.num_workers", "cluster.devices_per_worker")


def sweep(scenario: Scenario, over: dict[str, Sequence]) -> SweepTable:
    """Predict every combination of the values in ``over`` (a cartesian grid).

    ``over`` maps scenario paths (as in :meth:`Scenario.replace`) to lists of
    values, e.g. ``{"cluster.devices_per_worker": [1, 2, 4, 8],
    "training.global_batch": [64, 256]}``. Numeric model fields are evaluated
    as arrays; other fields (strategy, presets, the replica layout) in groups.
    Every value is validated the way a scenario validates it.
    """
    if not isinstance(over, dict) or not over:
        raise ValueError(f"over={over!r}; allowed: a non-empty dict of scenario path -> list of values")
    keys = list(over)
    values = {}
    for key in keys:
        vals = list(over[key]) if not isinstance(over[key], (str, bytes)) else None
        if not vals:
            raise ValueError(f"over[{key!r}]={over[key]!r}; allowed: a non-empty list of values")
        for v in _representatives(vals):
            scenario.replace(key, v)  # validates the value the way a scenario does
        values[key] = vals
    numeric = [k for k in keys if k in timing.MODEL_FIELDS and k not in _GROUP_FIELDS and _all_numbers(values[k])]
    structural = [k for k in keys if k not in numeric]
    grid = np.array(list(itertools.product(*(range(len(values[k])) for k in keys))), dtype=np.int64).reshape(-1, len(keys))
    n = len(grid)
    out = {name: np.zeros(n) for name in SWEEP_OUTPUTS}
    struct_cols = [keys.index(k) for k in structural]
    groups = {}
    for row, idx in enumerate(map(tuple, grid[:, struct_cols])):
        groups.setdefault(idx, []).append(row)
    for idx, rows in groups.items():
        rows = np.asarray(rows)
        scn = scenario
        for k, i in zip(structural, idx):
            scn = scn.replace(k, values[k][i])
        p = timing.model_params(scn)
        for k in numeric:
            col = np.asarray(values[k], dtype=float)[grid[rows, keys.index(k)]]
            p[k] = col
        p = {k: np.broadcast_to(v, (len(rows),)).astype(float) for k, v in p.items()}
        _check_grid(scn, p)
        for name, col in _evaluate(scn, p).items():
            out[name][rows] = col
    columns = {
        k: np.asarray(values[k], dtype=float if _all_numbers(values[k]) else object)[grid[:, j]]
        for j, k in enumerate(keys)
    }
    columns.update(out)
    return SweepTable(varied=keys, columns=columns)


def _all_numbers(vals: list) -> bool:
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals)


def _representatives(vals: list) -> list:
    """Values that stand for all of ``vals`` in validation: every distinct
    value, except that for numbers (whose rules are bounds and integrality)
    the smallest, the largest and the first non-integer suffice."""
    if not _all_numbers(vals):
        seen: dict = {}
        for v in vals:
            seen.setdefault(repr(v), v)
        return list(seen.values())
    reps = [min(vals), max(vals)]
    reps += [v for v in vals if isinstance(v, float) and not v.is_integer()][:1]
    return reps


def _check_grid(scn: Scenario, p: dict) -> None:
    """Cross-field rules a scenario checks, for the numeric columns."""
    replicas = scn.num_replicas
    bad = (p["training.drop_remainder"] > 0) & (p["training.global_batch"] < replicas)
    if bad.any():
        b = p["training.global_batch"][bad][0]
        raise ValueError(f"training.global_batch={int(b)}; allowed: >= {replicas} replicas when drop_remainder is true")
    bad = p["cluster.device.replica_variable_s"] > p["cluster.device.replica_dispatch_s"]
    if bad.any():
        v, d = p["cluster.device.replica_variable_s"][bad][0], p["cluster.device.replica_dispatch_s"][bad][0]
        raise ValueError(f"cluster.device.replica_variable_s={v:g}; allowed: <= cluster.device.replica_dispatch_s ({d:g} s)")


def _evaluate(scn: Scenario, p: dict) -> dict[str, np.ndarray]:
    plan_ = plan(scn)
    kind, policy = scn.cluster.device.kind, scn.training.shard_policy
    replicas = np.full(len(p["training.global_batch"]), float(scn.num_replicas))
    model = timing.step_model(p, plan_, kind, policy)
    if plan_.mode == "async":
        costs = async_costs(p, plan_, kind, policy)
        transfers = costs.pull_s + costs.push_s
        # Workers are independent until the PS saturates (the last may be a straggler).
        free_rate = (replicas - 1) / (transfers + costs.compute_s) + 1 / (transfers + costs.straggler_compute_s)
        rate = np.minimum(free_rate, costs.ps_updates_per_s)
        throughput = rate * costs.worker_batch
        speedup = throughput / model.baseline_throughput_samples_per_s
        return {
            "num_replicas": replicas,
            "step_time_s": replicas / rate,
            "throughput_samples_per_s": throughput,
            "speedup": speedup,
            "efficiency": speedup / replicas,
            "comm_fraction": (costs.push_s + costs.pull_s) * rate / replicas,
            "epoch_time_s": p["workload.num_examples"] / throughput,
        }
    speedup = model.speedup
    return {
        "num_replicas": replicas,
        "step_time_s": model.step_time_s,
        "throughput_samples_per_s": model.throughput_samples_per_s,
        "speedup": speedup,
        "efficiency": speedup / replicas,
        "comm_fraction": model.exposed_comm_s / model.step_time_s,
        "epoch_time_s": model.epoch_time_s,
    }
