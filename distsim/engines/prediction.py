"""``distsim.predict``: a Scenario in, a predicted Result out.

:func:`predict` runs the timeline (sync, :mod:`distsim.engines.timeline`)
or the asynchronous parameter-server simulation (:mod:`distsim.engines.asyncps`)
and returns a :class:`~distsim.results.result.Result` with
``source="predicted"``: the same type real runs produce.

Throughput is examples over the simulated time they took: the steady
(full, not epoch-opening) steps' examples over their summed times, i.e. the
global batch over the *mean* step (``Summary.step_time_s``); the median step
is reported apart (``Summary.median_step_time_s``).

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

import numpy as np

from distsim.engines import asyncps, asyncrun, bottleneck, steady, timeline
from distsim.engines.costs import async_costs, step_costs
from distsim.mechanics import memory
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
    p = step_costs(scenario)
    footprint = memory.footprint(p, scenario.strategy.name, scenario.per_replica_batch)
    check_fits(footprint)
    run = timeline.simulate(scenario, p)
    model = steady.step_model(scenario, p)
    steps = run.step_times_s
    full = (run.global_examples == t.global_batch) & ~run.epoch_start
    mean_full = float(np.mean(steps[full])) if full.any() else float(model.step_time_s)
    # The epoch: the model's fill and final step, the simulated full steps (stragglers included).
    epoch = float(model.epoch_time_s) + float(model.steps_per_epoch - 1) * (mean_full - float(model.step_time_s))
    # An epoch of one or two steps may have no full step outside an epoch's start: use the model's.
    median = float(np.median(steps[full])) if full.any() else float(model.step_time_s)
    throughput = t.global_batch / mean_full
    weak, strong = baseline_throughputs(scenario, model)
    speedup = throughput / weak
    exposed = float(np.mean(run.exposed_comm_s[full])) if full.any() else float(model.exposed_comm_s)
    neck = bottleneck.of_sync(scenario, plan_, model.parts)
    summary = Summary(
        step_time_s=mean_full,
        median_step_time_s=median,
        throughput_samples_per_s=throughput,
        speedup=speedup,
        efficiency=speedup / scenario.num_replicas,
        comm_fraction=exposed / mean_full,
        epoch_time_s=epoch,
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


def baseline_throughputs(scenario: Scenario, model: steady.ModelOutput) -> tuple[float, float]:
    """Examples/s of the weak (one replica's batch) and strong (the global
    batch) one-device baselines, each simulated with the scenario's compute
    distribution and seed (:func:`distsim.engines.timeline.one_device_run`)."""
    replica_batch = int(-(-scenario.training.global_batch // scenario.num_replicas))
    weak = _simulated_throughput(scenario, replica_batch, float(model.baseline_throughput_samples_per_s))
    if replica_batch == scenario.training.global_batch:
        return weak, weak
    return weak, _simulated_throughput(scenario, scenario.training.global_batch,
                                       float(model.strong_baseline_throughput_samples_per_s))


def _simulated_throughput(scenario: Scenario, batch: int, closed_form: float) -> float:
    """``batch`` over the mean steady step of the one-device run; ``closed_form``
    when its few steps hold no full step outside an epoch's start. Simulated
    under deterministic compute too, where it equals ``closed_form`` but for
    rounding, so that a one-device scenario's efficiency is 1 exactly."""
    run = timeline.one_device_run(scenario, batch)
    full = (run.global_examples == batch) & ~run.epoch_start
    return batch / float(np.mean(run.step_times_s[full])) if full.any() else closed_form


def _predict_async(scenario: Scenario, plan_: StrategyPlan) -> Result:
    t = scenario.training
    p = step_costs(scenario)
    costs = async_costs(p, plan_)
    footprint = memory.footprint(p, scenario.strategy.name, costs.worker_batch)
    check_fits(footprint)
    workers = scenario.num_replicas
    fifo = asyncrun.fifo_update_log(scenario, costs)
    log = asyncrun.phased(scenario, costs, fifo)
    rate = log.updates_per_s
    batch = float(costs.worker_batch)
    throughput = rate * batch
    model = steady.step_model(scenario, p)
    weak, strong = baseline_throughputs(scenario, model)
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
        steps_per_epoch=int(steady.ceil_div(scenario.workload.num_examples, batch)),
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
        meta=_meta(scenario, plan_) | ({"caveat": caveat} if (caveat := asyncrun.phase_caveat(scenario, costs, fifo)) else {})
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
