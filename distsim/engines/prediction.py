"""``distsim.predict``: a Scenario in, a predicted Result out.

:func:`predict` runs the timeline (sync, :mod:`distsim.engines.timeline`)
or the asynchronous parameter-server simulation (:mod:`distsim.engines.asyncps`)
and returns a :class:`~distsim.results.result.Result` with
``source="predicted"``: the same type real runs produce.

One time defines the summary: the run's *total simulated time*, from the
start of the first of its ``training.steps`` steps to the start of the step
after its last (:func:`distsim.engines.timeline.run_time_s`; with prefetch a
step starts when its host takes the prefetched batch, so the first read,
which no step overlaps, is left out as from a warm pipeline), every epoch's
shuffle fill and final (partial) step included.
:func:`distsim.engines.steady.run_time_s` is the same time in closed form,
which :func:`distsim.sweep` reports. Throughput is the examples the run's
steps aggregate over that time (with backup workers, the first ``N - b``
replicas' share: :func:`distsim.engines.steady.aggregated_share`); the mean
step (``Summary.step_time_s``) is that time over the steps, and the epoch
(``Summary.epoch_time_s``) ``steps_per_epoch`` mean steps, so throughput x
epoch time is the epoch's examples to within one global batch, and a run of
whole epochs gives the steady epoch exactly. Every cost enters the total as
a max-plus sum from one start, so the mean step never shrinks when a cost
grows (a mean of step durations after the first would not be: the first
step can absorb more of a growth than the last). A run shorter than an
epoch holds no shuffle fill and no final step: simulate whole epochs for an
epoch time that counts them.
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

import numpy as np

from distsim.engines import asyncps, asyncrun, bottleneck, steady, timeline
from distsim.engines.costs import StepCosts, async_costs, step_costs
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
    total = run.run_time_s
    mean = total / t.steps
    full = (run.global_examples == t.global_batch) & ~run.epoch_start
    # An epoch of one or two steps may have no full step outside an epoch's start: the median of all steps.
    median = float(np.median(steps[full] if full.any() else steps))
    throughput = float(np.sum(run.global_examples)) * steady.aggregated_share(scenario) / total
    weak, strong = baseline_throughputs(scenario, p)
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


def baseline_throughputs(scenario: Scenario, costs: StepCosts | None = None) -> tuple[float, float]:
    """Examples/s of the weak (one replica's batch) and strong (the global
    batch) one-device baselines, each simulated with the scenario's compute
    distribution, seed and steps (:func:`distsim.engines.timeline.one_device_run`).
    ``costs``: the scenario's :class:`~distsim.mechanics.stepcosts.StepCosts`
    when the caller has them already; both baselines are priced from them."""
    costs = step_costs(scenario) if costs is None else costs
    replica_batch = int(-(-scenario.training.global_batch // scenario.num_replicas))
    weak = _simulated_throughput(scenario, replica_batch, costs)
    if replica_batch == scenario.training.global_batch:
        return weak, weak
    return weak, _simulated_throughput(scenario, scenario.training.global_batch, costs)


def _simulated_throughput(scenario: Scenario, batch: int, costs: StepCosts) -> float:
    """The one-device run's examples over its total simulated time. Simulated
    under deterministic compute too, where it equals the closed form's
    (:func:`distsim.engines.steady.run_time_s`) but for rounding, so that a
    one-device scenario's efficiency is 1 exactly. Remembered under the
    run's inputs (:func:`distsim.engines.timeline.one_device_throughput`)."""
    return timeline.one_device_throughput(scenario, batch, costs)


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
    weak, strong = baseline_throughputs(scenario, p)
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
