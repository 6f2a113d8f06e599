"""``distsim.predict``: a Scenario in, a predicted Result out.

:func:`predict` runs the timeline (sync, :mod:`distsim.engines.timeline`)
or the asynchronous parameter-server simulation (:mod:`distsim.engines.asyncps`)
and returns a :class:`~distsim.results.result.Result` with
``source="predicted"``: the same type real runs produce.

One time defines the summary: the run's *total simulated time*, from its
cold start (nothing read yet) until the last of its ``training.steps`` steps
ends, every epoch's shuffle fill and final (partial) step included
(:func:`distsim.engines.steady.run_time_s` is the same time in closed form,
which :func:`distsim.sweep` reports). Throughput is the examples the run's
steps aggregate over that time (with backup workers, the first ``N - b``
replicas' share: :func:`distsim.engines.steady.aggregated_share`); the mean
step (``Summary.step_time_s``) is that time over the steps, and the epoch
(``Summary.epoch_time_s``) ``steps_per_epoch`` mean steps, so throughput x
epoch time is the epoch's examples to within one global batch. Every cost
enters the total as a max-plus sum, so the mean step never shrinks when a
cost grows (a mean over the steps after the first would not be: the first
step can absorb more of a growth than the last). A run much shorter than an
epoch weighs its cold start and its one shuffle fill more than an epoch
does: simulate an epoch's steps for an epoch time that counts them once.
The median of the full steps after an epoch's first is reported apart
(``Summary.median_step_time_s``), the figure to hold against a measured
median step.

Two speedups, both throughput relative to one device of the same kind with
the same input pipeline: ``speedup`` (weak scaling) against that device
running one replica's batch, ``strong_speedup`` against it running the whole
global batch. The baseline is *simulated* like the scenario
(:func:`distsim.engines.timeline.one_device_run`): the same compute
distribution, seed and steps, and its throughput measured the same way. Not
the deterministic step, and not the distribution's analytic mean: a step is
not linear in its compute draw (prefetch takes ``max(input, compute)``, a
prefetched batch waits in a queue), so the mean step under noise differs
from the step at the mean compute; and a sample mean of ``steps`` draws
differs from the analytic one by sampling error. Simulated alike, a
one-device scenario is its own baseline draw for draw and has efficiency
exactly 1. Efficiency is the weak speedup divided by the number of
replicas. A scenario whose replica does not fit in device memory
(:mod:`distsim.mechanics.memory`) is an error.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from distsim.engines import asyncps, bottleneck, steady, timeline
from distsim.mechanics import memory
from distsim.mechanics.communication import link_Bps
from distsim.results.result import Result, Summary
from distsim.scenario import Scenario, require_scenario
from distsim.scenario.presets import load_preset
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
    total = float(np.sum(steps))
    mean = total / t.steps
    full = (run.global_examples == t.global_batch) & ~run.epoch_start
    # An epoch of one or two steps may have no full step outside an epoch's start: the median of all steps.
    median = float(np.median(steps[full] if full.any() else steps))
    throughput = float(np.sum(run.global_examples)) * steady.aggregated_share(scenario) / total
    weak, strong = baseline_throughputs(scenario)
    speedup = throughput / weak
    neck = bottleneck.of_sync(scenario, plan_, model.parts)
    summary = Summary(
        step_time_s=mean,
        median_step_time_s=median,
        throughput_samples_per_s=throughput,
        speedup=speedup,
        efficiency=speedup / scenario.num_replicas,
        comm_fraction=float(np.sum(run.exposed_comm_s)) / total,
        epoch_time_s=float(model.steps_per_epoch) * mean,
        strong_speedup=throughput / strong,
        steps_per_epoch=int(model.steps_per_epoch),
        memory_bytes_per_replica=float(footprint.total_bytes),
        bottleneck=neck.kind,
        bottleneck_share=neck.share,
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
        meta={**_meta(scenario, plan_), "trace_replicas": _shown_note(run), **neck.meta},
    )


def baseline_throughputs(scenario: Scenario) -> tuple[float, float]:
    """Examples/s of the weak (one replica's batch) and strong (the global
    batch) one-device baselines, each simulated with the scenario's compute
    distribution, seed and steps (:func:`distsim.engines.timeline.one_device_run`)."""
    replica_batch = int(-(-scenario.training.global_batch // scenario.num_replicas))
    weak = _simulated_throughput(scenario, replica_batch)
    if replica_batch == scenario.training.global_batch:
        return weak, weak
    return weak, _simulated_throughput(scenario, scenario.training.global_batch)


def _simulated_throughput(scenario: Scenario, batch: int) -> float:
    """The one-device run's examples over its total simulated time. Simulated
    under deterministic compute too, where it equals the closed form's
    (:func:`distsim.engines.steady.run_time_s`) but for rounding, so that a
    one-device scenario's efficiency is 1 exactly."""
    run = timeline.one_device_run(scenario, batch)
    return float(np.sum(run.global_examples)) / float(np.sum(run.step_times_s))


@dataclass
class AsyncCosts:
    """Per-update costs of an asynchronous PS worker (seconds).

    Attributes:
        worker_batch: examples per update.
        compute_s: a worker's time per update besides its transfers.
        straggler_compute_s: the same for the last worker (equal to
            ``compute_s`` unless ``cluster.straggler_cores`` is set).
        push_s, pull_s: a transfer to an idle PS (a push ends with its apply).
        ps_service_s: PS time each transfer holds (see :func:`async_costs`).
        ps_request_s: the part of it that is the PS host's own work.
        ps_apply_s: the PS host's time to apply one pushed gradient, held
            after the push's bytes are in, one apply at a time.
        duplex: pushes and pulls queue for their bytes separately.
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
            return 1.0 / (2 * service + self.ps_apply_s)
        # Each direction carries one transfer per update; the host handles both requests and the apply.
        host = 2 * self.ps_request_s + self.ps_apply_s
        return 1.0 / np.maximum(np.maximum(service - self.ps_request_s, host), 1e-300)


def _worker_compute_s(p: dict, plan_: StrategyPlan, device_kind: str, shard_policy: str) -> np.ndarray:
    parts = steady.step_parts(p, p["training.global_batch"], plan_, device_kind, shard_policy)
    # Each worker reads only its own batch (the PS coordinator hands out per-worker datasets)
    # and copies all of it to its device: the input of one device running that batch.
    batch = parts.replica_batch
    own_input = steady.input_s(steady.one_device_params(p, batch), batch, shard_policy, device_kind)
    device = parts.overhead_s + parts.dispatch_s + parts.forward_s + parts.backward_s
    return np.where(plan_.prefetch, np.maximum(own_input, device), own_input + device)


def startup_s(p: dict, plan_: StrategyPlan, device_kind: str, shard_policy: str) -> np.ndarray:
    """Seconds an asynchronous worker's run starts later than its update
    cycle counts: its first batch is read (and the shuffle buffer filled)
    before its first compute, with nothing yet to overlap. With prefetch the
    cycle counts ``max(input, device)`` per update, so the first update costs
    ``min(input, device)`` and the fill more (the synchronous run's cold
    start, :func:`distsim.engines.steady.run_time_s`); without it input and
    device work already alternate, and nothing is added. Later epochs' fills
    are not counted (the asynchronous log has no epochs)."""
    parts = steady.step_parts(p, p["training.global_batch"], plan_, device_kind, shard_policy)
    batch = parts.replica_batch
    own_input = steady.input_s(steady.one_device_params(p, batch), batch, shard_policy, device_kind)
    device = parts.overhead_s + parts.dispatch_s + parts.forward_s + parts.backward_s
    fill = steady.fill_s(p, plan_.prefetch, shard_policy)
    return np.where(plan_.prefetch, np.minimum(own_input, device) + fill, 0.0)


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
    computes with ``cluster.straggler_cores`` when that is set.

    Every push ends with the PS applying the gradient (:func:`ps_apply_s`):
    the apply is part of a push to an idle PS; it starts once the push's
    bytes are in (the worker's own path and the shard's service both done)
    and queues with the PS host's other work (with one server, its
    transfers), so each shard applies one gradient at a time."""
    compute = _worker_compute_s(p, plan_, device_kind, shard_policy)
    replicas = p["cluster.num_workers"] * p["cluster.devices_per_worker"]
    grad = p["workload.num_params"] * p["workload.bytes_per_param"]
    request = p["cluster.inter_link.request_s"]
    bandwidth = link_Bps(p, "inter_link")
    link = p["cluster.inter_link.latency_s"] + request + grad / bandwidth
    num_ps = float(plan_.options.get("num_shards", 1))
    in_process = plan_.ps_cluster == "in_process"
    apply = ps_apply_s(p, device_kind, num_ps) * np.ones_like(link)
    return AsyncCosts(
        worker_batch=np.broadcast_to(_ceil(p["training.global_batch"], replicas), np.shape(compute)),
        compute_s=compute,
        straggler_compute_s=_worker_compute_s(steady.straggler_params(p), plan_, device_kind, shard_policy),
        push_s=link + apply,
        pull_s=link,
        ps_service_s=link if in_process else request + grad / num_ps / bandwidth,
        ps_request_s=np.zeros_like(link) if in_process else request * np.ones_like(link),
        ps_apply_s=apply,
        duplex=not in_process and bool(np.all(p["cluster.inter_link.full_duplex"])),
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


def ps_apply_s(p: dict, device_kind: str, num_ps) -> np.ndarray:
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
    host_Bps = p["cluster.device.memory_bandwidth_Bps"] if device_kind == "cpu" else ps_host_memory_Bps()
    return p["workload.num_params"] * p["training.optimizer_bytes_per_param"] / host_Bps / num_ps


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
    "prediction does not follow which; single runs in the network lab took from 28 % less to 45 % more time "
    "than predicted, depending on the rate, the workers, the message size and the run "
    "(data/measurements/README.md)")


def phase_caveat(scenario: Scenario, costs: AsyncCosts, fifo: asyncps.UpdateLog) -> str:
    """:data:`PHASE_CAVEAT`, the message rule of this scenario's own link (:func:`message_rule`) and its
    two rhythms (:func:`rhythm_range_s`; ``fifo`` is its event-engine log) where two or more workers
    queue at a full-duplex PS NIC, else ``""``."""
    if not (costs.duplex and scenario.num_replicas >= 2):
        return ""
    turns, lockstep = _rhythms(scenario, costs, fifo)
    return (f"{PHASE_CAVEAT}; {message_rule(scenario)}; here a step takes about {_seconds(turns)} in turns "
            f"and {_seconds(lockstep)} in lockstep")


def message_rule(scenario: Scenario) -> str:
    """How this prediction serves a PS shard's transfers, from ``inter_link.whole_message_bytes``
    and the shard's bytes (:func:`streamed`)."""
    window = scenario.cluster.inter_link.whole_message_bytes
    shard = _mib(scenario.workload.gradient_bytes / plan(scenario).options.get("num_shards", 1))
    if window is None:
        return (f"inter_link.whole_message_bytes is not set, so this prediction serves every {shard} transfer "
                "whole, one after another")
    how = "streams and shares the NIC at random phases" if streamed(scenario) else "arrives whole and is served in turn"
    return (f"this link passes messages up to {_mib(window)} whole (inter_link.whole_message_bytes), so each "
            f"{shard} transfer {how}")


def _mib(n: float) -> str:
    return f"{n / 2**20:.3g} MiB"


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
    host's two requests and the apply: two PS services and an apply), and the slowest worker's own time is added."""
    return float(np.max(_own_s(costs, workers))) + workers * float(2 * costs.ps_service_s + costs.ps_apply_s)


def _own_s(costs: AsyncCosts, workers: int) -> np.ndarray:
    """Each worker's time per update outside the PS's stations: compute, latencies, its own link."""
    return costs.worker_compute_s(workers) + float(costs.push_s + costs.pull_s - 2 * costs.ps_service_s
                                                   - costs.ps_apply_s)


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
    its host serves both requests and the apply, and the rest of a worker's cycle (compute,
    latencies) is its own (:func:`asyncps.fair_share_updates_per_s`)."""
    nic_s = float(costs.ps_service_s - costs.ps_request_s)
    host_s = float(2 * costs.ps_request_s + costs.ps_apply_s)
    return asyncps.fair_share_updates_per_s(_own_s(costs, workers), [nic_s, nic_s, host_s])


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
        ps_apply_s=float(costs.ps_apply_s),
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
    # The run's total time: the workers' cold start, then the log (its times count from the first pull).
    rate = len(log) / (float(log.apply_time_s[-1]) + float(startup_s(p, plan_, kind, t.shard_policy)))
    batch = float(costs.worker_batch)
    throughput = rate * batch
    weak, strong = baseline_throughputs(scenario)
    speedup = throughput / weak
    cycle = workers / rate
    step_times = np.diff(np.concatenate([[0.0], log.apply_time_s])) * workers
    neck = bottleneck.of_async(scenario, plan_, p, costs)
    summary = Summary(
        step_time_s=cycle,
        median_step_time_s=float(np.median(step_times)),
        throughput_samples_per_s=throughput,
        speedup=speedup,
        efficiency=speedup / workers,
        comm_fraction=float(costs.push_s + costs.pull_s) / cycle,
        epoch_time_s=scenario.workload.num_examples / throughput,
        mean_staleness=float(log.staleness.mean()),
        strong_speedup=throughput / strong,
        steps_per_epoch=int(_ceil(scenario.workload.num_examples, batch)),
        memory_bytes_per_replica=float(footprint.total_bytes),
        bottleneck=neck.kind,
        bottleneck_share=neck.share,
    )
    return Result(
        source="predicted",
        strategy=scenario.strategy.name,
        num_replicas=workers,
        global_batch=t.global_batch,
        summary=summary,
        step_times_s=step_times,
        trace=_async_trace(log, float(costs.push_s), float(costs.pull_s)),
        staleness=log.to_staleness(),
        scenario=scenario,
        meta=_meta(scenario, plan_) | ({"caveat": caveat} if (caveat := phase_caveat(scenario, costs, fifo)) else {})
        | neck.meta,
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
