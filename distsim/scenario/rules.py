"""Rules that tie fields together, for one scenario or a whole sweep grid.

Every rule reads its values through ``get(path)``, which returns a Python
value for one scenario or a NumPy array (one entry per grid row) for a sweep,
so the same rule checks both and a grid row can never pass a rule a scenario
fails. A violation raises :class:`~distsim.validation.InputError` at the field
a learner should change, with the first offending row's values.

:func:`check_replica_layout` is shared with ``distsim.real.RunPlan``, so the
simulator and the real runs accept the same cluster shapes.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from distsim.scenario import limits
from distsim.validation import InputError

Get = Callable[[str], Any]

#: Strategies that run exactly one replica.
SINGLE_REPLICA: tuple[str, ...] = ("default", "one_device")
#: Strategies that run in one process on one machine.
ONE_MACHINE: tuple[str, ...] = ("mirrored", "central_storage")

#: Defaults of the knobs only one setting of another field reads; any other
#: value is refused where the model would ignore it (see :func:`check_training`).
FUSION_THRESHOLD_BYTES = 64 * 2**20
FUSION_CYCLE_S = 0.005
COMPUTE_SIGMA = 0.1


def _first(bad: Any) -> int | None:
    """Index of the first True in ``bad`` (0 for a scalar True), else None."""
    bad = np.asarray(bad, dtype=bool)
    if not bad.any():
        return None
    return int(np.flatnonzero(bad.ravel())[0]) if bad.ndim else 0


def _row(value: Any, i: int) -> Any:
    """Entry ``i`` of a grid column, or the value itself for a scalar."""
    a = np.asarray(value)
    if a.ndim == 0:
        return value.item() if hasattr(value, "item") else value
    item = a.ravel()[i]
    return item.item() if hasattr(item, "item") else item


def _require(ok: Any, path: str, value: Any, allowed: Callable[[int], str]) -> None:
    """Raise at ``path`` for the first row where ``ok`` is false; ``allowed(i)``
    says what that row would need."""
    i = _first(np.logical_not(ok))
    if i is not None:
        shown = _row(value, i)
        if isinstance(shown, float) and shown.is_integer() and abs(shown) < 2**53:
            shown = int(shown)  # grid columns are float arrays; show 3, not 3.0
        raise InputError(path, shown, allowed(i))


def check_replica_layout(strategy: str, num_workers: int, devices_per_worker: int, *,
                         workers_path: str, devices_path: str, strategy_path: str) -> None:
    """One replica for ``default``/``one_device``; one worker for ``mirrored``/``central_storage``."""
    if strategy in SINGLE_REPLICA and num_workers * devices_per_worker != 1:
        raise InputError(strategy_path, strategy,
                         f"a multi-replica strategy for {num_workers} x {devices_per_worker} devices "
                         f"({'/'.join(SINGLE_REPLICA)} run one replica)")
    if strategy in ONE_MACHINE and num_workers != 1:
        raise InputError(workers_path, num_workers,
                         f"1 for strategy {strategy!r} (one machine; use {devices_path} for its devices, "
                         "or multi_worker_mirrored for several machines)")


# ------------------------------------------------------------------ parts


def check_device(get: Get, at: str) -> None:
    """The variables' share of the dispatch is part of the dispatch."""
    dispatch, variable = get("replica_dispatch_s"), get("replica_variable_s")
    _require(np.asarray(variable) <= dispatch, f"{at}.replica_variable_s", variable,
             lambda i: f"<= replica_dispatch_s={_row(dispatch, i):g} seconds (it is a part of it)")


def check_cluster(get: Get, device_kind: str, at: str) -> None:
    """Shared cores only for CPU devices; a straggler has at most the others'
    cores and others exist; at most :data:`~distsim.scenario.limits.MAX_REPLICAS` replicas."""
    cores = get("physical_cores")
    if device_kind != "cpu":
        _require(np.isnan(np.asarray(cores, dtype=float)), f"{at}.physical_cores", cores,
                 lambda i: f"null for a {device_kind} device (only CPU devices share cores)")
    straggler = get("straggler_cores")
    cores_or_nan = np.asarray(cores, dtype=float)
    _require(np.isnan(np.asarray(straggler, dtype=float)) | (np.asarray(straggler, dtype=float) <= cores_or_nan),
             f"{at}.straggler_cores", straggler,
             lambda i: f"null, or <= physical_cores={_row(cores, i)} (a straggler is a CPU worker with fewer "
                       "cores than the others)")
    workers, devices = get("num_workers"), get("devices_per_worker")
    # The straggler is the last worker; alone, it is no straggler, and the one-device baseline has physical_cores.
    _require(np.isnan(np.asarray(straggler, dtype=float)) | (np.asarray(workers) > 1), f"{at}.straggler_cores", straggler,
             lambda i: "null with num_workers=1 (a straggler is the last of several workers; "
                       "give the one worker fewer physical_cores instead)")
    replicas = np.asarray(workers) * np.asarray(devices)
    _require(replicas <= limits.MAX_REPLICAS, f"{at}.devices_per_worker", devices,
             lambda i: f"num_workers x devices_per_worker <= {limits.MAX_REPLICAS:,} replicas "
                       f"(here {_row(workers, i):,} x {_row(devices, i):,})")


def check_workload(get: Get, at: str) -> None:
    """Per-tensor sizes, when given, describe the whole model: one per
    gradient tensor, summing to ``num_params``."""
    sizes = get("tensor_params")
    if not len(sizes):
        return
    tensors, params = get("num_gradient_tensors"), get("num_params")
    _require(np.asarray(tensors) == len(sizes), f"{at}.num_gradient_tensors", tensors,
             lambda i: f"{len(sizes):,}, one per entry of tensor_params (or clear tensor_params)")
    _require(np.asarray(params) == sum(sizes), f"{at}.num_params", params,
             lambda i: f"the sum of tensor_params ({sum(sizes):,}), or clear tensor_params")


def check_training(get: Get, at: str) -> None:
    """Knobs that only one grouping or one compute distribution reads keep
    their defaults otherwise: the model would ignore them without a word."""
    grouping = get("grouping")
    buckets = get("num_buckets")
    _require((np.asarray(buckets) == 1) | (grouping == "buckets"), f"{at}.num_buckets", buckets,
             lambda i: f"1 unless grouping is 'buckets' (grouping {grouping!r} decides the collectives)")
    pack = get("bytes_per_pack")
    _require((np.asarray(pack) == 0) | (grouping == "pack"), f"{at}.bytes_per_pack", pack,
             lambda i: f"0 unless grouping is 'pack' (grouping {grouping!r} ignores it)")
    for name, default in (("fusion_threshold_bytes", FUSION_THRESHOLD_BYTES), ("fusion_cycle_s", FUSION_CYCLE_S)):
        value = get(name)
        _require((np.asarray(value) == default) | (grouping == "fusion"), f"{at}.{name}", value,
                 lambda i, default=default: f"{default:g} (the default) unless grouping is 'fusion' (grouping "
                                            f"{grouping!r} ignores it)")
    distribution, sigma = get("compute_distribution"), get("compute_sigma")
    _require((np.asarray(sigma) == COMPUTE_SIGMA) | (distribution == "lognormal"), f"{at}.compute_sigma", sigma,
             lambda i: f"{COMPUTE_SIGMA:g} (the default) unless compute_distribution is 'lognormal' "
                       f"({distribution!r} has no shape to set)")


def check_strategy(name: str, mode: str | None, at: str) -> None:
    if mode == "async" and name != "parameter_server":
        raise InputError(f"{at}.mode", mode, "'sync' or null (only parameter_server trains asynchronously)")


# ---------------------------------------------------------------- scenario


def check_scenario(get: Get) -> None:
    """Every rule that ties a scenario's parts together; ``get`` takes a full
    path such as ``"training.global_batch"``."""
    name = get("strategy.name")
    check_replica_layout(name, _row(get("cluster.num_workers"), 0), _row(get("cluster.devices_per_worker"), 0),
                         workers_path="cluster.num_workers", devices_path="cluster.devices_per_worker",
                         strategy_path="strategy.name")
    if name == "tpu" and get("cluster.device.kind") != "tpu":
        raise InputError("cluster.device.kind", get("cluster.device.kind"), "'tpu' for strategy 'tpu'")
    check_device(lambda f: get(f"cluster.device.{f}"), "cluster.device")
    check_cluster(lambda f: get(f"cluster.{f}"), get("cluster.device.kind"), "cluster")
    check_workload(lambda f: get(f"workload.{f}"), "workload")
    check_training(lambda f: get(f"training.{f}"), "training")
    _check_strategy_options(get)
    _check_batches(get)
    _check_size(get)
    buckets, tensors = get("training.num_buckets"), get("workload.num_gradient_tensors")
    _require(np.asarray(buckets) <= tensors, "training.num_buckets", buckets,
             lambda i: f"<= workload.num_gradient_tensors={_row(tensors, i):,} (a bucket holds whole tensors)")


def resolved_mode(name: str, mode: str | None) -> str:
    """``mode``, or the strategy's default: async for parameter_server, sync otherwise."""
    return mode or ("async" if name == "parameter_server" else "sync")


def _replicas(get: Get) -> Any:
    return np.asarray(get("cluster.num_workers")) * np.asarray(get("cluster.devices_per_worker"))


def _check_strategy_options(get: Get) -> None:
    name, algorithm = get("strategy.name"), get("strategy.algorithm")
    if name == "parameter_server" and algorithm not in (None, "parameter_server"):
        raise InputError("strategy.algorithm", algorithm, "'parameter_server' or null for strategy 'parameter_server'")
    uses_ps = (algorithm or ("parameter_server" if name == "parameter_server" else None)) == "parameter_server"
    if get("strategy.num_ps") != 1 and not uses_ps:
        raise InputError("strategy.num_ps", get("strategy.num_ps"), "1 unless the gradient goes through parameter "
                         "servers (strategy 'parameter_server' or algorithm 'parameter_server')")
    if get("strategy.ps_placement") == "host_cpu":
        shards = get("strategy.num_ps")
        _require(np.asarray(shards) == 1, "strategy.num_ps", shards,
                 lambda i: "1 with ps_placement 'host_cpu' (the one CPU holds every variable: the model counts "
                           "one server)")
    if get("strategy.ps_cluster") != "processes" and name != "parameter_server":
        raise InputError("strategy.ps_cluster", get("strategy.ps_cluster"),
                         "'processes' unless strategy is 'parameter_server'")
    workers = get("cluster.num_workers")
    if get("strategy.ps_placement") == "host_cpu":
        _require(np.asarray(workers) == 1, "strategy.ps_placement", get("strategy.ps_placement"),
                 lambda i: f"'own_hosts' or 'worker_hosts' for {_row(workers, i):,} workers ('host_cpu' is one "
                           "worker's own CPU)")
    if get("strategy.protocol") == "nccl" and get("cluster.device.kind") != "gpu":
        raise InputError("strategy.protocol", "nccl", f"'alpha_beta' on {get('cluster.device.kind')} devices "
                         "(NCCL runs on GPUs)")
    backup, replicas = get("training.backup_workers"), _replicas(get)
    if not np.any(backup):
        return
    if resolved_mode(name, get("strategy.mode")) == "async":
        _require(np.asarray(backup) == 0, "training.backup_workers", backup,
                 lambda i: "0 for asynchronous training (no step waits for anyone, so there is nothing to back up)")
    _require(np.asarray(backup) < replicas, "training.backup_workers", backup,
             lambda i: f"< {_row(replicas, i):,} replicas")
    buckets = get("training.num_buckets")
    _require((np.asarray(backup) == 0) | (np.asarray(buckets) == 1), "training.num_buckets", buckets,
             lambda i: "1 with backup workers (the step aggregates whole gradients of the first replicas)")


def _check_batches(get: Get) -> None:
    batch, examples = get("training.global_batch"), get("workload.num_examples")
    _require(np.asarray(batch) <= examples, "training.global_batch", batch,
             lambda i: f"<= workload.num_examples={_row(examples, i):,} (a step cannot hold more examples than "
                       "the dataset has)")
    drop, replicas = get("training.drop_remainder"), _replicas(get)
    _require(~np.asarray(drop, dtype=bool) | (np.asarray(batch) >= replicas), "training.global_batch", batch,
             lambda i: f">= {_row(replicas, i):,} replicas when drop_remainder is true")
    files, workers = get("training.num_files"), get("cluster.num_workers")
    if get("training.shard_policy") != "FILE":
        if files is not None:
            raise InputError("training.num_files", files, "null unless shard_policy is 'FILE'")
        return
    if files is None:
        raise InputError("training.num_files", None, f"an integer >= num_workers={workers} for FILE sharding")
    _require(np.asarray(files) >= workers, "training.num_files", files,
             lambda i: f"an integer >= num_workers={_row(workers, i):,} for FILE sharding (one file per worker at least)")
    _require(np.asarray(files) <= examples, "training.num_files", files,
             lambda i: f"<= workload.num_examples={_row(examples, i):,} (a file holds at least one example)")


def _check_size(get: Get) -> None:
    """Bounds on how much one prediction simulates (see :mod:`distsim.scenario.limits`)."""
    steps, replicas = get("training.steps"), _replicas(get)
    if resolved_mode(get("strategy.name"), get("strategy.mode")) == "async":
        _require(np.asarray(steps) * replicas <= limits.MAX_ASYNC_UPDATES, "training.steps", steps,
                 lambda i: f"steps x workers <= {limits.MAX_ASYNC_UPDATES:,} updates (here x {_row(replicas, i):,} workers)")
        return
    collectives = (np.asarray(get("training.num_buckets")) if get("training.grouping") == "buckets"
                   else np.asarray(get("workload.num_gradient_tensors")))
    cells = np.asarray(steps) * (replicas + collectives)
    _require(cells <= limits.MAX_TIMELINE_CELLS, "training.steps", steps,
             lambda i: f"steps x (replicas + collectives per step) <= {limits.MAX_TIMELINE_CELLS:,} "
                       f"(here x ({_row(replicas, i):,} + {_row(collectives, i):,}))")
    per_step = 8 + np.minimum(collectives, 16) + collectives
    events = np.asarray(steps) * np.minimum(replicas, limits.MAX_TRACE_REPLICAS) * per_step
    _require(events <= limits.MAX_TRACE_EVENTS, "training.steps", steps,
             lambda i: f"steps x traced replicas x events per step <= {limits.MAX_TRACE_EVENTS:,} (here x "
                       f"{min(_row(replicas, i), limits.MAX_TRACE_REPLICAS):,} x {_row(per_step, i):,})")
