"""The costs the engines price a step from, computed once per scenario.

* :class:`StepCosts` (:func:`step_costs`): the scenario's numbers, typed
  and with their units, that the synchronous step of
  :mod:`~distsim.engines.steady` and :mod:`~distsim.engines.timeline`, the
  asynchronous worker below and :func:`distsim.sweep` all read (arrays that
  broadcast over a sweep's rows; defined in :mod:`distsim.mechanics.stepcosts`,
  where the collectives' and the memory model's prices read them too);
* :class:`AsyncCosts` (:func:`async_costs`): an asynchronous
  parameter-server worker's per-update costs, with the PS's apply
  (:func:`ps_apply_s`), and the rates they allow: in lockstep
  (:func:`lockstep_step_s`) and under fair sharing (:func:`fair_share_rate`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from distsim.engines import asyncps, steady
from distsim.mechanics.stepcosts import FIELD_PATHS, MODEL_FIELDS, StepCosts, step_costs
from distsim.mechanics.strategies import StrategyPlan
from distsim.scenario.presets import load_preset

__all__ = ["FIELD_PATHS", "MODEL_FIELDS", "AsyncCosts", "StepCosts", "WorkerTimes", "async_costs",
           "fair_share_rate", "lockstep_step_s", "ps_apply_s", "ps_host_memory_Bps", "step_costs"]


@dataclass(frozen=True)
class WorkerTimes:
    """An asynchronous worker's time per update outside its transfers, in
    parts (seconds), so that only the compute is random, as in the
    synchronous engines and the one-device baseline
    (:func:`asyncps.simulate_async`'s ``compute_mean_s``, ``input_s``,
    ``host_s``, ``min_compute_s`` and ``prefetch``).

    Attributes:
        input_s: reading and copying its own batch.
        host_s: its host's fixed overhead and dispatch.
        compute_s: its device's forward and backward at the mean compute.
        min_compute_s: the least a compute lasts (``steady.launch_s``).
        prefetch: the input overlaps the host and the device.
    """

    input_s: np.ndarray
    host_s: np.ndarray
    compute_s: np.ndarray
    min_compute_s: np.ndarray
    prefetch: bool

    @property
    def total_s(self) -> np.ndarray:
        """The time at the mean compute: ``max(input, host + compute)`` with prefetch, else their sum."""
        return asyncps.worker_time_s(self.input_s, self.host_s, self.compute_s, self.min_compute_s, self.prefetch)


@dataclass(frozen=True)
class AsyncCosts:
    """Per-update costs of an asynchronous PS worker (seconds).

    Attributes:
        worker_batch: examples per update.
        compute_s: a worker's time per update besides its transfers, at
            the mean compute (``worker.total_s``).
        straggler_compute_s: the same for the last worker (equal to
            ``compute_s`` unless ``cluster.straggler_cores`` is set).
        worker, straggler: those times in parts, of which only the compute
            is random (None: ``compute_s`` is all compute).
        push_s, pull_s: a transfer to an idle PS (a push ends with its apply).
        ps_service_s: PS time each transfer holds (see :func:`async_costs`).
        ps_request_s: the part of it that is the PS host's own work.
        ps_apply_s: the PS host's time to apply one pushed gradient, held
            after the push's bytes are in, one apply at a time.
        duplex: pushes and pulls queue for their bytes separately.
        compute_at_ps: a worker's time outside its transfers (input,
            host, compute) is served by the PS's one server too, in turn
            with the transfers and applies (an ``in_process`` cluster on
            shared CPU cores, :func:`async_costs`); a bool array in a sweep.
    """

    worker_batch: np.ndarray
    compute_s: np.ndarray
    straggler_compute_s: np.ndarray
    push_s: np.ndarray
    pull_s: np.ndarray
    ps_service_s: np.ndarray
    ps_request_s: np.ndarray
    ps_apply_s: np.ndarray
    duplex: bool
    compute_at_ps: np.ndarray | bool = False
    worker: WorkerTimes | None = None
    straggler: WorkerTimes | None = None

    def worker_parts(self, workers: int) -> dict[str, np.ndarray | bool]:
        """:func:`asyncps.simulate_async`'s per-worker ``compute_mean_s``,
        ``input_s``, ``host_s``, ``min_compute_s`` and ``prefetch`` (the last
        worker may be a straggler); scalar costs only. Without ``worker``
        parts, ``compute_s`` is all compute."""
        if self.worker is None or self.straggler is None:
            return {"compute_mean_s": self.worker_compute_s(workers)}
        out: dict[str, np.ndarray | bool] = {}
        for name, field in (("compute_mean_s", "compute_s"), ("input_s", "input_s"), ("host_s", "host_s"),
                            ("min_compute_s", "min_compute_s")):
            value = np.full(workers, float(getattr(self.worker, field)))
            value[-1] = float(getattr(self.straggler, field))
            out[name] = value
        out["prefetch"] = bool(self.worker.prefetch)
        return out

    def worker_compute_s(self, workers: int) -> np.ndarray:
        """Each worker's mean compute time (the last may be a straggler); scalar costs only."""
        compute = np.full(workers, float(self.compute_s))
        compute[-1] = float(self.straggler_compute_s)
        return compute

    @property
    def ps_updates_per_s(self) -> np.ndarray:
        """Most updates per second the PS can serve (two transfers each; with
        ``compute_at_ps`` the workers' own time too, which ``sweep`` prices itself)."""
        service = np.maximum(self.ps_service_s, 1e-300)
        if not self.duplex:
            return 1.0 / (2 * service + self.ps_apply_s)
        # Each direction carries one transfer per update; the host handles both requests and the apply.
        host = 2 * self.ps_request_s + self.ps_apply_s
        return 1.0 / np.maximum(np.maximum(service - self.ps_request_s, host), 1e-300)


def _worker_times(p: StepCosts, plan_: StrategyPlan) -> WorkerTimes:
    parts = steady.step_parts(p, p.global_batch, plan_)
    # Each worker reads only its own batch (the PS coordinator hands out per-worker datasets)
    # and copies all of it to its device: the input of one device running that batch.
    batch = parts.replica_batch
    compute, launch = parts.forward_s + parts.backward_s, steady.launch_s(p)
    # The compute is max(batch x seconds per example, launches) (steady.replica_candidates); where the launches
    # bind, the random part is the batch's own compute, as the timeline draws it.
    raw = np.where(compute > launch, compute, batch * steady.seconds_per_example(p))
    return WorkerTimes(input_s=steady.input_s(steady.one_device_costs(p, batch), batch),
                       host_s=parts.overhead_s + parts.dispatch_s, compute_s=raw, min_compute_s=launch * np.ones_like(raw),
                       prefetch=plan_.prefetch)


def async_costs(p: StepCosts, plan_: StrategyPlan) -> AsyncCosts:
    """Every replica is an asynchronous worker: it computes one replica
    batch (input prefetched), pushes the gradient and pulls the variables
    over the inter-worker link. A transfer to an idle PS takes ``latency +
    request_s + gradient / bandwidth``. Each of ``num_ps`` PS shards serves
    one transfer at a time and is busy ``request_s + (gradient / num_ps) /
    bandwidth`` on it. With ``ps_cluster="processes"`` over a
    ``full_duplex`` link, pushes and pulls queue for their bytes separately,
    and only ``request_s``, the PS host's time, is shared by both. In an
    ``in_process`` cluster the one process is busy for the whole transfer,
    push or pull (its latency is that process's own work). When that
    cluster's workers are CPU devices sharing the machine's cores
    (``cluster.physical_cores`` set), the process also serves their input,
    host work and compute in turn with the transfers (``compute_at_ps``):
    one thing at a time, so a second worker adds no throughput. Measured on
    this machine's 2 cores (``data/measurements/README.md``, "The in-process
    parameter server takes turns"), a second worker's updates overlapped the
    first's little or not at all, at 16 to 512 examples per worker, where
    FIFO lanes without this rule let one worker compute while the PS served
    the other. The last worker computes with ``cluster.straggler_cores`` when
    that is set.

    Every push ends with the PS applying the gradient (:func:`ps_apply_s`):
    the apply is part of a push to an idle PS; it starts once the push's
    bytes are in (the worker's own path and the shard's service both done)
    and queues with the PS host's other work (with one server, its
    transfers), so each shard applies one gradient at a time."""
    worker, straggler = _worker_times(p, plan_), _worker_times(steady.straggler_costs(p), plan_)
    replicas = p.num_workers * p.devices_per_worker
    grad = p.gradient_bytes
    request = p.inter_request_s
    bandwidth = p.inter_Bps
    link = p.inter_latency_s + request + grad / bandwidth
    num_ps = float(plan_.options.get("num_shards", 1))
    in_process = plan_.ps_cluster == "in_process"
    apply = ps_apply_s(p, num_ps) * np.ones_like(link)
    return AsyncCosts(
        worker_batch=np.broadcast_to(steady.ceil_div(p.global_batch, replicas), np.shape(worker.total_s)),
        compute_s=worker.total_s,
        straggler_compute_s=straggler.total_s,
        push_s=link + apply,
        pull_s=link,
        ps_service_s=link if in_process else request + grad / num_ps / bandwidth,
        ps_request_s=np.zeros_like(link) if in_process else request * np.ones_like(link),
        ps_apply_s=apply,
        duplex=not in_process and bool(np.all(p.inter_full_duplex)),
        compute_at_ps=in_process & steady.shares_cores(p),
        worker=worker,
        straggler=straggler,
    )


@functools.cache
def ps_host_memory_Bps() -> float:
    """Memory bandwidth of a parameter server's host when the workers' devices
    are accelerators, bytes/s: the CPU device preset ``this_machine_core``'s
    (one core's streaming rate, an assumption stated in
    ``distsim/scenario/presets/devices.json``). A cluster has no field for its
    hosts' memory; TensorFlow keeps a PS task's variables on its CPU and
    applies the update there (``training_ops.h``'s ``ApplyXYZ`` functors on
    ``CPUDevice``). One core is a lower bound on the rate: Eigen's thread pool
    can spread a large apply over more of the host's cores."""
    return float(load_preset("device", "this_machine_core")[0]["memory_bandwidth_Bps"])


def ps_apply_s(p: StepCosts, num_ps) -> np.ndarray:
    """Seconds a PS shard takes to apply one pushed gradient: its share of
    the variables' ``num_params x optimizer_bytes_per_param`` (the bytes the
    update moves, as on a device: :func:`steady.update_s`) over its host's
    memory bandwidth. CPU workers' PS hosts are the same kind of machine
    (``cluster.device.memory_bandwidth_Bps``); accelerators' PS hosts are
    CPUs (:func:`ps_host_memory_Bps`). The ``num_ps`` shards apply their
    shares at once, each on its own host. With one shard a worker's cycle is
    never shorter than one device's step (the apply is no faster than the
    device's own update, and the transfers come on top); with several, the
    update's memory traffic is spread over their hosts, and a worker on a
    fast enough link can cycle faster than one device steps (efficiency
    above 1 by at most ``update x (1 - 1 / num_ps)`` of the step)."""
    host_Bps = p.memory_bandwidth_Bps if p.device_kind == "cpu" else ps_host_memory_Bps()
    return p.num_params * p.optimizer_bytes_per_param / host_Bps / num_ps


def lockstep_step_s(costs: AsyncCosts, workers: int, outside_s=None) -> float:
    """Seconds per cycle (one update from each worker) when all ``workers``
    visit every PS station together: each station then holds them for
    ``workers`` times its per-update demand (the NIC's bytes each way and the
    host's two requests and the apply: two PS services and an apply), and the slowest worker's own time is added.

    ``outside_s``: each worker's mean time outside its transfers (compute, input, host), seconds; default: at
    the mean compute (``worker_compute_s``). Under noisy compute, a run's own draws give each worker its mean
    over them (:func:`asyncps.own_time_means_s`), and the slowest worker over its draws sets the lockstep of
    that run (:func:`distsim.engines.asyncrun.rhythm_range_s`), which can exceed the one at the mean.

    With ``compute_at_ps`` the one server also serves every worker's own time, so lockstep holds it for
    all of them, one after another: their sum, not the slowest."""
    stations = workers * float(2 * costs.ps_service_s + costs.ps_apply_s)
    own = _own_s(costs, workers, outside_s)
    if bool(costs.compute_at_ps):
        return float(np.sum(own - _transfer_own_s(costs))) + _transfer_own_s(costs) + stations
    return float(np.max(own)) + stations


def _transfer_own_s(costs: AsyncCosts) -> float:
    """A worker's time per update in its own part of the transfers, outside the PS's stations (latencies,
    its own link): 0 in an ``in_process`` cluster, where the one server holds the whole transfer."""
    return float(costs.push_s + costs.pull_s - 2 * costs.ps_service_s - costs.ps_apply_s)


def _own_s(costs: AsyncCosts, workers: int, outside_s=None) -> np.ndarray:
    """Each worker's time per update outside the PS's stations: compute (``outside_s``, default at the
    mean: ``worker_compute_s``), latencies, its own link."""
    outside = costs.worker_compute_s(workers) if outside_s is None else np.asarray(outside_s, dtype=float)
    return outside + _transfer_own_s(costs)


def fair_share_rate(costs: AsyncCosts, workers: int, outside_s=None) -> float:
    """Updates per second when concurrent transfers share the PS fairly:
    each direction of its NIC carries the bytes of one transfer per update,
    its host serves both requests and the apply, and the rest of a worker's cycle (compute,
    latencies) is its own (:func:`asyncps.fair_share_updates_per_s`). ``outside_s``: each
    worker's mean time outside its transfers (default: at the mean compute,
    ``worker_compute_s``), seconds."""
    nic_s = float(costs.ps_service_s - costs.ps_request_s)
    host_s = float(2 * costs.ps_request_s + costs.ps_apply_s)
    own = _own_s(costs, workers) if outside_s is None else \
        np.asarray(outside_s, dtype=float) + (_own_s(costs, workers) - costs.worker_compute_s(workers))
    return asyncps.fair_share_updates_per_s(own, [nic_s, nic_s, host_s])
