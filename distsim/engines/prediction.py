"""``distsim.predict``: a Scenario in, a predicted Result out.

:func:`predict` runs the timeline (sync, :mod:`distsim.engines.timeline`)
or the asynchronous parameter-server simulation (:mod:`distsim.engines.asyncps`)
and returns a :class:`~distsim.results.result.Result` with
``source="predicted"``: the same type real runs produce.

Two speedups, both throughput relative to one device of the same kind with
the same input pipeline: ``speedup`` (weak scaling) against that device
running one replica's batch, ``strong_speedup`` against it running the whole
global batch. Efficiency is the weak speedup divided by the number of
replicas. A scenario whose replica does not fit in device memory
(:mod:`distsim.mechanics.memory`) is an error.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from distsim.engines import asyncps, steady, timeline
from distsim.mechanics import memory
from distsim.mechanics.communication import link_Bps
from distsim.results.result import Result, Summary
from distsim.scenario import Scenario, require_scenario
from distsim.mechanics.strategies import StrategyPlan, plan
from distsim.results.trace import EVENT_KINDS, Trace
from distsim.validation import InputError

def predict(scenario: Scenario) -> Result:
    """Predict one scenario: timeline (or async simulation) and summary."""
    plan_ = plan(require_scenario(scenario))
    if plan_.mode == "async":
        return _predict_async(scenario, plan_)
    return _predict_sync(scenario, plan_)


def _shown_note(run: timeline.Timeline) -> str:
    """Which replicas the trace shows (all of them unless there are many)."""
    shown, n = len(run.shown_replicas), run.num_replicas
    return f"all {n}" if shown == n else f"{shown} of {n:,} (the first workers' and the last worker's)"


def _meta(scenario: Scenario, plan_: StrategyPlan) -> dict[str, str]:
    return {
        "engine": "distsim.engines.timeline" if plan_.mode == "sync" else "distsim.engines.asyncps",
        "tf_class": plan_.tf_class,
        "algorithm": str(plan_.algorithm),
        "mode": plan_.mode,
        "prefetch": str(plan_.prefetch),
        "device": scenario.cluster.device.name,
        "workload": scenario.workload.name,
    }


def check_fits(footprint: memory.Footprint) -> None:
    """Raise at ``cluster.device.memory_bytes`` when a replica does not fit."""
    if not bool(np.all(footprint.fits)):
        i = int(np.flatnonzero(~np.asarray(footprint.fits).ravel())[0]) if np.ndim(footprint.fits) else 0
        capacity = float(np.asarray(footprint.capacity_bytes).ravel()[i] if np.ndim(footprint.capacity_bytes)
                         else footprint.capacity_bytes)
        total = float(np.asarray(footprint.total_bytes).ravel()[i] if np.ndim(footprint.total_bytes)
                      else footprint.total_bytes)
        raise InputError("cluster.device.memory_bytes", capacity,
                         f">= {total:.3g} bytes: one replica needs {footprint.describe(i)}, so it does not fit by "
                         f"{total - capacity:.3g} bytes (a lower bound; see distsim.mechanics.memory). Use a smaller "
                         "per-replica batch, a device with more memory, or a smaller model")


def _predict_sync(scenario: Scenario, plan_: StrategyPlan) -> Result:
    t = scenario.training
    p = steady.model_params(scenario)
    footprint = memory.footprint(p, scenario.strategy.name, scenario.per_replica_batch)
    check_fits(footprint)
    run = timeline.simulate(scenario)
    model = steady.step_model(scenario, p)
    steps = run.step_times_s
    full = (run.global_examples == t.global_batch) & ~run.epoch_start
    mean_full = float(np.mean(steps[full])) if full.any() else float(model.step_time_s)
    # The epoch: the model's fill and final step, the simulated full steps (stragglers included).
    epoch = float(model.epoch_time_s) + float(model.steps_per_epoch - 1) * (mean_full - float(model.step_time_s))
    # An epoch of one or two steps may have no full step outside an epoch's start: use the model's.
    step_time = float(np.median(steps[full])) if full.any() else float(model.step_time_s)
    throughput = t.global_batch / step_time
    speedup = throughput / float(model.baseline_throughput_samples_per_s)
    exposed = float(np.median(run.exposed_comm_s[full])) if full.any() else float(model.exposed_comm_s)
    summary = Summary(
        step_time_s=step_time,
        throughput_samples_per_s=throughput,
        speedup=speedup,
        efficiency=speedup / scenario.num_replicas,
        comm_fraction=exposed / step_time,
        epoch_time_s=epoch,
        strong_speedup=throughput / float(model.strong_baseline_throughput_samples_per_s),
        steps_per_epoch=int(model.steps_per_epoch),
        memory_bytes_per_replica=float(footprint.total_bytes),
    )
    return Result(
        source="predicted",
        strategy=scenario.strategy.name,
        num_replicas=scenario.num_replicas,
        global_batch=t.global_batch,
        summary=summary,
        step_times_s=steps,
        trace=run.trace,
        scenario=scenario,
        meta={**_meta(scenario, plan_), "trace_replicas": _shown_note(run)},
    )


@dataclass
class AsyncCosts:
    """Per-update costs of an asynchronous PS worker (seconds).

    Attributes:
        worker_batch: examples per update.
        compute_s: a worker's time per update besides its transfers.
        straggler_compute_s: the same for the last worker (equal to
            ``compute_s`` unless ``cluster.straggler_cores`` is set).
        push_s, pull_s: a transfer to an idle PS.
        ps_service_s: PS time each transfer holds (see :func:`async_costs`).
        ps_request_s: the part of it that is the PS host's own work.
        duplex: pushes and pulls queue for their bytes separately.
    """

    worker_batch: np.ndarray
    compute_s: np.ndarray
    straggler_compute_s: np.ndarray
    push_s: np.ndarray
    pull_s: np.ndarray
    ps_service_s: np.ndarray
    ps_request_s: np.ndarray
    duplex: bool

    def worker_compute_s(self, workers: int) -> np.ndarray:
        """Each worker's mean compute time (the last may be a straggler); scalar costs only."""
        compute = np.full(workers, float(self.compute_s))
        compute[-1] = float(self.straggler_compute_s)
        return compute

    @property
    def ps_updates_per_s(self) -> np.ndarray:
        """Most updates per second the PS can serve (two transfers each)."""
        service = np.maximum(self.ps_service_s, 1e-300)
        if not self.duplex:
            return 1.0 / (2 * service)
        # Each direction carries one transfer per update; the host handles both requests.
        return 1.0 / np.maximum(np.maximum(service - self.ps_request_s, 2 * self.ps_request_s), 1e-300)


def _worker_compute_s(p: dict, plan_: StrategyPlan, device_kind: str, shard_policy: str) -> np.ndarray:
    parts = steady.step_parts(p, p["training.global_batch"], plan_, device_kind, shard_policy)
    # Each worker reads only its own batch (the PS coordinator hands out per-worker datasets).
    own_input = parts.input_s * parts.replica_batch / p["training.global_batch"] if shard_policy == "DATA" else parts.input_s
    device = parts.overhead_s + parts.dispatch_s + parts.forward_s + parts.backward_s
    return np.where(plan_.prefetch, np.maximum(own_input, device), own_input + device)


def async_costs(p: dict, plan_: StrategyPlan, device_kind: str, shard_policy: str) -> AsyncCosts:
    """Every replica is an asynchronous worker: it computes one replica
    batch (input prefetched), pushes the gradient and pulls the variables
    over the inter-worker link. A transfer to an idle PS takes ``latency +
    request_s + gradient / bandwidth``. Each of ``num_ps`` PS shards serves
    one transfer at a time and is busy ``request_s + (gradient / num_ps) /
    bandwidth`` on it. With ``ps_cluster="processes"`` over a
    ``full_duplex`` link, pushes and pulls queue for their bytes separately,
    and only ``request_s``, the PS host's time, is shared by both. In an
    ``in_process`` cluster the one process is busy for the whole transfer,
    push or pull (its latency is that process's own work). The last worker
    computes with ``cluster.straggler_cores`` when that is set."""
    compute = _worker_compute_s(p, plan_, device_kind, shard_policy)
    replicas = p["cluster.num_workers"] * p["cluster.devices_per_worker"]
    grad = p["workload.num_params"] * p["workload.bytes_per_param"]
    request = p["cluster.inter_link.request_s"]
    bandwidth = link_Bps(p, "inter_link")
    link = p["cluster.inter_link.latency_s"] + request + grad / bandwidth
    num_ps = float(plan_.options.get("num_shards", 1))
    in_process = plan_.ps_cluster == "in_process"
    return AsyncCosts(
        worker_batch=np.broadcast_to(_ceil(p["training.global_batch"], replicas), np.shape(compute)),
        compute_s=compute,
        straggler_compute_s=_worker_compute_s(steady.straggler_params(p), plan_, device_kind, shard_policy),
        push_s=link,
        pull_s=link,
        ps_service_s=link if in_process else request + grad / num_ps / bandwidth,
        ps_request_s=np.zeros_like(link) if in_process else request * np.ones_like(link),
        duplex=not in_process and bool(np.all(p["cluster.inter_link.full_duplex"])),
    )


def _ceil(a, b):
    return -(-np.asarray(a) // np.asarray(b))


def simulate_updates(scenario: Scenario) -> tuple[asyncps.UpdateLog, AsyncCosts]:
    """The asynchronous update log of ``scenario`` (``training.steps`` updates
    per worker) and the costs behind it."""
    costs = _scenario_costs(scenario, plan(scenario))
    return _update_log(scenario, costs), costs


def _scenario_costs(scenario: Scenario, plan_: StrategyPlan) -> AsyncCosts:
    return async_costs(steady.model_params(scenario), plan_, scenario.cluster.device.kind,
                       scenario.training.shard_policy)


#: Said with every prediction of a parameter server whose NIC two or more workers' transfers queue at
#: (``Result.meta["caveat"]``), before the scenario's own :func:`rhythm_range_s`. The lab's range is every
#: single run of the network lab against its prediction, beside an unshaped run of the same cluster (each
#: benchmark JSON's ``summary.ps_runs_vs_paired_pct``; ``tests/test_bench_network.py`` holds this text to
#: them): the shortest, 3 workers of the wide MLP at 1000 Mbit/s (2026-11-26-full, BBR); the longest,
#: 3 workers of the MLP at 20 Mbit/s (2026-11-26, CUBIC).
PHASE_CAVEAT = (
    "workers' transfers through one parameter server's NIC can fall into turns or into lockstep, and this "
    "prediction does not follow which (it serves messages up to 1 MiB in turn and shares longer ones at "
    "random phases); single runs in the network lab took from 28 % less to 45 % more time than predicted, "
    "depending on the rate, the workers, the message size and the run (data/measurements/README.md)")


def phase_caveat(scenario: Scenario, costs: AsyncCosts, fifo: asyncps.UpdateLog) -> str:
    """:data:`PHASE_CAVEAT` and this scenario's two rhythms (:func:`rhythm_range_s`; ``fifo`` is its
    event-engine log) where two or more workers queue at a full-duplex PS NIC, else ``""``."""
    if not (costs.duplex and scenario.num_replicas >= 2):
        return ""
    turns, lockstep = _rhythms(scenario, costs, fifo)
    return f"{PHASE_CAVEAT}; here a step takes about {_seconds(turns)} in turns and {_seconds(lockstep)} in lockstep"


def _seconds(t: float) -> str:
    return f"{t * 1e3:.3g} ms" if t < 1 else f"{t:.3g} s"


def rhythm_range_s(scenario: Scenario) -> tuple[float, float]:
    """Step times (seconds, ``workers`` updates) of an asynchronous PS scenario in
    its two rhythms: ``(turns, lockstep)``.

    *Turns* is the event engine's FIFO lanes, where each NIC direction and
    the PS host serve one transfer at a time, so workers fall into a
    pipeline. *Lockstep* is every worker at every station at once: the
    ``n`` pulls share the PS's outgoing direction (``n`` transfers' bytes),
    its host serves ``2 n`` requests, the pushes share the incoming
    direction, and the slowest worker's own time (compute, latencies, its
    own link) comes on top (:func:`lockstep_step_s`). A prediction lies
    between them; real runs fall anywhere in between, and a little below
    turns where the model's per-transfer costs run high (``data/measurements/README.md``).
    """
    plan_ = plan(require_scenario(scenario))
    if plan_.mode != "async":
        raise InputError("strategy.mode", plan_.mode, "an asynchronous parameter-server scenario (mode='async')")
    costs = _scenario_costs(scenario, plan_)
    return _rhythms(scenario, costs, _fifo_update_log(scenario, costs))


def _rhythms(scenario: Scenario, costs: AsyncCosts, fifo: asyncps.UpdateLog) -> tuple[float, float]:
    """``(turns, lockstep)`` seconds per step, turns from the event engine's log ``fifo``."""
    return scenario.num_replicas / fifo.updates_per_s, lockstep_step_s(costs, scenario.num_replicas)


def lockstep_step_s(costs: AsyncCosts, workers: int) -> float:
    """Seconds per cycle (one update from each worker) when all ``workers``
    visit every PS station together: each station then holds them for
    ``workers`` times its per-update demand (the NIC's bytes each way and the
    host's two requests: two PS services), and the slowest worker's own time is added."""
    return float(np.max(_own_s(costs, workers))) + workers * 2 * float(costs.ps_service_s)


def _own_s(costs: AsyncCosts, workers: int) -> np.ndarray:
    """Each worker's time per update outside the PS's stations: compute, latencies, its own link."""
    return costs.worker_compute_s(workers) + float(costs.push_s + costs.pull_s - 2 * costs.ps_service_s)


def _update_log(scenario: Scenario, costs: AsyncCosts) -> asyncps.UpdateLog:
    return _phased(scenario, costs, _fifo_update_log(scenario, costs))


def _phased(scenario: Scenario, costs: AsyncCosts, fifo: asyncps.UpdateLog) -> asyncps.UpdateLog:
    """The event engine's log ``fifo``; with a full-duplex PS (``ps_cluster="processes"``
    over a ``full_duplex`` link) whose transfers stream (:func:`streamed`) its times are
    stretched to the rate of fair sharing (:func:`fair_share_rate`): the event engine's FIFO
    lanes serve one transfer at a time, while streamed transfers share each
    direction of the PS's NIC."""
    if not costs.duplex or not streamed(scenario):
        return fifo
    return fifo.stretched(fifo.updates_per_s / fair_share_rate(costs, scenario.num_replicas))


def streamed(scenario: Scenario) -> bool:
    """Whether a PS shard's transfers stream through its NIC (longer than
    ``inter_link.whole_message_bytes``), so that concurrent ones share it;
    shorter transfers arrive whole and are served in turn."""
    window = scenario.cluster.inter_link.whole_message_bytes
    shard_bytes = scenario.workload.gradient_bytes / plan(scenario).options.get("num_shards", 1)
    return window is not None and shard_bytes > window


def fair_share_rate(costs: AsyncCosts, workers: int) -> float:
    """Updates per second when concurrent transfers share the PS fairly:
    each direction of its NIC carries the bytes of one transfer per update,
    its host serves both requests, and the rest of a worker's cycle (compute,
    latencies) is its own (:func:`asyncps.fair_share_updates_per_s`)."""
    nic_s = float(costs.ps_service_s - costs.ps_request_s)
    return asyncps.fair_share_updates_per_s(_own_s(costs, workers), [nic_s, nic_s, 2 * float(costs.ps_request_s)])


def _fifo_update_log(scenario: Scenario, costs: AsyncCosts) -> asyncps.UpdateLog:
    t = scenario.training
    workers = scenario.num_replicas
    return asyncps.simulate_async(
        workers,
        t.steps * workers,
        costs.worker_compute_s(workers),
        t.compute_distribution,
        sigma=t.compute_sigma,
        push_s=float(costs.push_s),
        pull_s=float(costs.pull_s),
        ps_service_s=float(costs.ps_service_s),
        seed=t.seed,
        duplex=costs.duplex,
        ps_request_s=float(costs.ps_request_s),
    )


def _predict_async(scenario: Scenario, plan_: StrategyPlan) -> Result:
    t = scenario.training
    p = steady.model_params(scenario)
    kind = scenario.cluster.device.kind
    costs = async_costs(p, plan_, kind, t.shard_policy)
    footprint = memory.footprint(p, scenario.strategy.name, costs.worker_batch)
    check_fits(footprint)
    workers = scenario.num_replicas
    fifo = _fifo_update_log(scenario, costs)
    log = _phased(scenario, costs, fifo)
    rate = log.updates_per_s
    batch = float(costs.worker_batch)
    throughput = rate * batch
    model = steady.step_model(scenario, p)
    speedup = throughput / float(model.baseline_throughput_samples_per_s)
    cycle = workers / rate
    summary = Summary(
        step_time_s=cycle,
        throughput_samples_per_s=throughput,
        speedup=speedup,
        efficiency=speedup / workers,
        comm_fraction=float(costs.push_s + costs.pull_s) / cycle,
        epoch_time_s=scenario.workload.num_examples / throughput,
        mean_staleness=float(log.staleness.mean()),
        strong_speedup=throughput / float(model.strong_baseline_throughput_samples_per_s),
        steps_per_epoch=int(_ceil(scenario.workload.num_examples, batch)),
        memory_bytes_per_replica=float(footprint.total_bytes),
    )
    return Result(
        source="predicted",
        strategy=scenario.strategy.name,
        num_replicas=workers,
        global_batch=t.global_batch,
        summary=summary,
        step_times_s=np.diff(np.concatenate([[0.0], log.apply_time_s])) * workers,
        trace=_async_trace(log, float(costs.push_s), float(costs.pull_s)),
        staleness=log.to_staleness(),
        scenario=scenario,
        meta=_meta(scenario, plan_) | ({"caveat": caveat} if (caveat := phase_caveat(scenario, costs, fifo)) else {}),
    )


def _async_trace(log: asyncps.UpdateLog, push_s: float, pull_s: float) -> Trace:
    """Per-worker pull, compute and push of every applied update (the pull
    is drawn from the PS snapshot, the push as ending at the apply)."""
    n = len(log)
    pull_end = log.read_time_s + pull_s
    push_start = np.maximum(log.apply_time_s - push_s, pull_end)
    starts = np.concatenate([log.read_time_s, pull_end, push_start])
    ends = np.concatenate([pull_end, push_start, log.apply_time_s])
    kinds = np.repeat(np.array([EVENT_KINDS.index(k) for k in ("comm", "compute", "comm")], dtype=np.int8), n)
    labels = np.repeat(np.array([0, 1, 2], dtype=np.int32), n)
    keep = ends > starts
    return Trace(
        devices=[f"w{w}" for w in range(log.num_workers)],
        labels=["pull variables", "compute gradient", "push gradient"],
        device=np.tile(log.worker, 3).astype(np.int32)[keep],
        kind=kinds[keep],
        start_s=starts[keep],
        end_s=ends[keep],
        step=np.tile(np.arange(n), 3)[keep],
        label=labels[keep],
    )
