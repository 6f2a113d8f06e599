"""Rules that tie fields of a scenario together.

Each function checks one combination and raises
:class:`~distsim.validation.InputError` at the field a learner should change.
:func:`check_replica_layout` is shared with ``distsim.real.RunPlan``, so the
simulator and the real runs accept the same cluster shapes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from distsim.scenario import limits
from distsim.validation import InputError

if TYPE_CHECKING:
    from distsim.scenario.scenario import Scenario

#: Strategies that run exactly one replica.
SINGLE_REPLICA: tuple[str, ...] = ("default", "one_device")
#: Strategies that run in one process on one machine.
ONE_MACHINE: tuple[str, ...] = ("mirrored", "central_storage")


def check_replica_layout(strategy: str, num_workers: int, devices_per_worker: int, *,
                         workers_path: str, devices_path: str, strategy_path: str) -> None:
    """One replica for ``default``/``one_device``; one worker for
    ``mirrored``/``central_storage``."""
    if strategy in SINGLE_REPLICA and num_workers * devices_per_worker != 1:
        raise InputError(strategy_path, strategy,
                         f"a multi-replica strategy for {num_workers} x {devices_per_worker} devices "
                         f"({'/'.join(SINGLE_REPLICA)} run one replica)")
    if strategy in ONE_MACHINE and num_workers != 1:
        raise InputError(workers_path, num_workers,
                         f"1 for strategy {strategy!r} (one machine; use {devices_path} for its devices, "
                         "or multi_worker_mirrored for several machines)")


def check_scenario(s: "Scenario") -> None:
    """Every cross-field rule of a scenario."""
    c, w, st, t = s.cluster, s.workload, s.strategy, s.training
    check_replica_layout(st.name, c.num_workers, c.devices_per_worker, workers_path="cluster.num_workers",
                         devices_path="cluster.devices_per_worker", strategy_path="strategy.name")
    _check_strategy_options(s)
    _check_batches(s)
    _check_size(s)
    if st.name == "tpu" and c.device.kind != "tpu":
        raise InputError("cluster.device.kind", c.device.kind, "'tpu' for strategy 'tpu'")
    if t.num_buckets > w.num_gradient_tensors:
        raise InputError("training.num_buckets", t.num_buckets,
                         f"<= workload.num_gradient_tensors={w.num_gradient_tensors} (a bucket holds whole tensors)")


def _check_strategy_options(s: "Scenario") -> None:
    st, t, n = s.strategy, s.training, s.num_replicas
    if st.name == "parameter_server" and st.algorithm not in (None, "parameter_server"):
        raise InputError("strategy.algorithm", st.algorithm, "'parameter_server' or null for strategy 'parameter_server'")
    uses_ps = (st.algorithm or ("parameter_server" if st.name == "parameter_server" else None)) == "parameter_server"
    if st.num_ps != 1 and not uses_ps:
        raise InputError("strategy.num_ps", st.num_ps, "1 unless the gradient goes through parameter servers "
                         "(strategy 'parameter_server' or algorithm 'parameter_server')")
    if st.ps_placement == "host_cpu" and s.cluster.num_workers != 1:
        raise InputError("strategy.ps_placement", st.ps_placement,
                         f"'own_hosts' or 'worker_hosts' for {s.cluster.num_workers} workers ('host_cpu' is one "
                         "worker's own CPU)")
    if st.protocol == "nccl" and s.cluster.device.kind != "gpu":
        raise InputError("strategy.protocol", st.protocol, f"'alpha_beta' on {s.cluster.device.kind} devices "
                         "(NCCL runs on GPUs)")
    if st.ps_cluster != "processes" and st.name != "parameter_server":
        raise InputError("strategy.ps_cluster", st.ps_cluster, "'processes' unless strategy is 'parameter_server'")
    if t.backup_workers:
        if st.resolved_mode == "async":
            raise InputError("training.backup_workers", t.backup_workers, "0 for asynchronous training "
                             "(no step waits for anyone, so there is nothing to back up)")
        if t.backup_workers >= n:
            raise InputError("training.backup_workers", t.backup_workers, f"< {n} replicas")
        if t.num_buckets != 1:
            raise InputError("training.num_buckets", t.num_buckets,
                             "1 with backup workers (the step aggregates whole gradients of the first replicas)")


def _check_batches(s: "Scenario") -> None:
    c, w, t = s.cluster, s.workload, s.training
    if t.global_batch > w.num_examples:
        raise InputError("training.global_batch", t.global_batch,
                         f"<= workload.num_examples={w.num_examples:,} (a step cannot hold more examples "
                         "than the dataset has)")
    if t.drop_remainder and t.global_batch < s.num_replicas:
        raise InputError("training.global_batch", t.global_batch,
                         f">= {s.num_replicas} replicas when drop_remainder is true")
    if t.shard_policy == "FILE":
        if t.num_files is None or t.num_files < c.num_workers:
            raise InputError("training.num_files", t.num_files,
                             f"an integer >= num_workers={c.num_workers} for FILE sharding (one file per worker at least)")
        if t.num_files > w.num_examples:
            raise InputError("training.num_files", t.num_files,
                             f"<= workload.num_examples={w.num_examples:,} (a file holds at least one example)")
    elif t.num_files is not None:
        raise InputError("training.num_files", t.num_files, "null unless shard_policy is 'FILE'")


def _check_size(s: "Scenario") -> None:
    """Bounds on how much one prediction simulates (see :mod:`distsim.scenario.limits`)."""
    t, n = s.training, s.num_replicas
    if s.strategy.resolved_mode == "async":
        if t.steps * n > limits.MAX_ASYNC_UPDATES:
            raise InputError("training.steps", t.steps,
                             f"steps x workers <= {limits.MAX_ASYNC_UPDATES:,} updates (here x {n:,} workers)")
        return
    collectives = t.num_buckets if t.grouping == "buckets" else s.workload.num_gradient_tensors
    cells = t.steps * (n + collectives)
    if cells > limits.MAX_TIMELINE_CELLS:
        raise InputError("training.steps", t.steps,
                         f"steps x (replicas + collectives per step) <= {limits.MAX_TIMELINE_CELLS:,} "
                         f"(here x ({n:,} + {collectives:,}) = {cells:,})")
    shown = min(n, limits.MAX_TRACE_REPLICAS)
    events = t.steps * shown * (8 + min(collectives, 16) + collectives)
    if events > limits.MAX_TRACE_EVENTS:
        raise InputError("training.steps", t.steps,
                         f"steps x traced replicas x events per step <= {limits.MAX_TRACE_EVENTS:,} "
                         f"(here x {shown} replicas x {8 + min(collectives, 16) + collectives} = {events:,})")
