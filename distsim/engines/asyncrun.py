"""An asynchronous parameter-server scenario run: its update log, its two rhythms and their caveat.

:func:`simulate_updates` runs the event engine (:mod:`~distsim.engines.asyncps`)
on a scenario's :class:`~distsim.engines.costs.AsyncCosts`, stretched to fair
sharing where transfers stream through the PS's NIC; :func:`rhythm_range_s`
gives the step time in turns and in lockstep, and :func:`phase_caveat` says so
with the prediction.
"""

from __future__ import annotations

import numpy as np

from distsim.engines import asyncps
from distsim.engines.costs import AsyncCosts, async_costs, fair_share_rate, lockstep_step_s
from distsim.mechanics.stepcosts import step_costs
from distsim.mechanics.strategies import StrategyPlan, plan
from distsim.scenario import Scenario, require_scenario
from distsim.validation import InputError


def simulate_updates(scenario: Scenario) -> tuple[asyncps.UpdateLog, AsyncCosts]:
    """The asynchronous update log of ``scenario`` (``training.steps`` updates
    per worker) and the costs behind it."""
    costs = _scenario_costs(scenario, plan(scenario))
    return _update_log(scenario, costs), costs


def _scenario_costs(scenario: Scenario, plan_: StrategyPlan) -> AsyncCosts:
    return async_costs(step_costs(scenario), plan_)


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
    queue at a full-duplex PS NIC, else ``""``. Where the run took longer than its lockstep (which
    :func:`rhythm_range_s` refuses) it says so with both numbers: a valid scenario's prediction never raises."""
    if not (costs.duplex and scenario.num_replicas >= 2):
        return ""
    turns, lockstep = _rhythm_pair(scenario, costs, fifo)
    head = f"{PHASE_CAVEAT}; {message_rule(scenario)}; "
    if _inverted(turns, lockstep):
        run = "this noisy run" if scenario.training.compute_distribution != "deterministic" else "this run"
        return (head + f"here a step takes about {_seconds(lockstep)} in lockstep, and {run} queued behind "
                f"other workers' longer requests and took {_seconds(turns)} a step in turns, longer than its lockstep")
    return head + f"here a step takes about {_seconds(turns)} in turns and {_seconds(lockstep)} in lockstep"


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
    its two rhythms: ``(turns, lockstep)``, turns <= lockstep.

    *Turns* is the event engine's FIFO lanes, where each NIC direction and
    the PS host serve one transfer at a time, so workers fall into a
    pipeline. *Lockstep* is every worker at every station at once: the
    ``n`` pulls share the PS's outgoing direction (``n`` transfers' bytes),
    its host serves ``2 n`` requests, the pushes share the incoming
    direction, and the slowest worker's own time (compute, latencies, its
    own link) comes on top (:func:`lockstep_step_s`). A prediction lies
    between them; real runs fall anywhere in between, and a little below
    turns where the model's per-transfer costs run high (``data/measurements/README.md``).

    Under noisy compute (``training.compute_distribution`` not
    ``"deterministic"``) both rhythms are of the run's own draws: turns is
    the engine's run of them, and lockstep takes each worker's mean own time
    over its first ``training.steps`` draws (:func:`asyncps.own_time_means_s`),
    the slowest of them with the stations' ``W (2 s + a)`` as at the mean
    (``W`` workers, ``s`` the PS time of a transfer, ``a`` the apply). At the
    mean compute the slowest worker may be luckier than its draws, and a noisy
    run can take longer than that lockstep (24 workers, 6 exponential updates
    each: 122.3 s against 120.2 s; 131.2 s over the draws).

    Why turns is at most about lockstep: a worker has one request at the
    PS at a time and every station is FIFO, so at each of its visits it
    waits behind at most one request of each other worker; where none of
    those is longer than its own there, its ``k``-th update lasts at most
    ``own_k + W (2 s + a)``, and the run, ``W steps`` updates, has ended
    once each worker has made ``steps`` (hence the first ``steps`` draws).

    That proviso can fail: on a PS that serves transfers and applies on
    one server (not full duplex) an apply can wait behind other workers'
    transfers or a transfer behind their applies; on a full-duplex PS a
    pull's host request behind another's push request with its apply. In
    20,000 random runs of the event engine (``benchmarks/bench_rhythm.py``)
    it failed only on one server under noise (12 runs, the worst 22 %
    over). What holds in every run is a bound, not a rhythm: turns exceed
    lockstep by at most ``(W - 1)(2 s + a) / steps``, the others' updates
    under way at the run's end (``tests/physical_invariants.py``,
    ``fifo_bound_s``, derived from the engine's stations). Where turns
    exceed lockstep this raises :class:`InputError` on
    ``training.compute_distribution`` rather than return an inverted range;
    :func:`distsim.predict` says it in its caveat instead (:func:`phase_caveat`).
    """
    plan_ = plan(require_scenario(scenario))
    if plan_.mode != "async":
        raise InputError("strategy.mode", plan_.mode, "an asynchronous parameter-server scenario (mode='async')")
    costs = _scenario_costs(scenario, plan_)
    turns, lockstep = _rhythm_pair(scenario, costs, fifo_update_log(scenario, costs))
    if _inverted(turns, lockstep):
        raise InputError("training.compute_distribution", scenario.training.compute_distribution,
                         f"a distribution whose run stays within its lockstep; this one's FIFO run took "
                         f"{turns:.6g} s a step, its lockstep {lockstep:.6g} s: a request waited behind other "
                         "workers' longer ones at the PS (distsim.rhythm_range_s)")
    return turns, lockstep


#: Relative slack of ``turns <= lockstep``: with one worker (nobody to queue behind) they are equal in exact
#: arithmetic, and the engine's float sums of the same durations differ from the closed form's in the last
#: bits (7e-16 relative seen); 1e-9 is far above that and far below any cost a scenario prices.
_RHYTHM_RTOL = 1e-9


def _rhythm_pair(scenario: Scenario, costs: AsyncCosts, fifo: asyncps.UpdateLog) -> tuple[float, float]:
    """``(turns, lockstep)`` seconds per step, turns from the event engine's log ``fifo``, lockstep over
    the run's own draws (:func:`rhythm_range_s`), in whichever order they fall."""
    t, workers = scenario.training, scenario.num_replicas
    outside = None if t.compute_distribution == "deterministic" else asyncps.own_time_means_s(
        np.full(workers, t.steps), distribution=t.compute_distribution, sigma=t.compute_sigma, seed=t.seed,
        **costs.worker_parts(workers))
    return workers / fifo.updates_per_s, lockstep_step_s(costs, workers, outside)


def _inverted(turns: float, lockstep: float) -> bool:
    """Whether a run's turns exceed its lockstep beyond :data:`_RHYTHM_RTOL`."""
    return turns > lockstep * (1 + _RHYTHM_RTOL)


def _update_log(scenario: Scenario, costs: AsyncCosts) -> asyncps.UpdateLog:
    return phased(scenario, costs, fifo_update_log(scenario, costs))


def phased(scenario: Scenario, costs: AsyncCosts, fifo: asyncps.UpdateLog) -> asyncps.UpdateLog:
    """The event engine's log ``fifo``; with a full-duplex PS (``ps_cluster="processes"``
    over a ``full_duplex`` link) whose transfers stream (:func:`streamed`) its times are
    stretched to the rate of fair sharing (:func:`fair_share_rate`): the event engine's FIFO
    lanes serve one transfer at a time, while streamed transfers share each
    direction of the PS's NIC."""
    if not costs.duplex or not streamed(scenario):
        return fifo
    workers = scenario.num_replicas
    if scenario.training.compute_distribution == "deterministic":
        return fifo.stretched(fifo.updates_per_s / fair_share_rate(costs, workers))
    # Fair sharing's throughput depends on the mean demands and each worker's mean time outside the
    # PS only (product form, asyncps.fair_share_updates_per_s), so a noisy log is stretched to the
    # fair-share rate of its own draws. Priced at the distribution's mean instead, 1 worker with 3
    # exponential steps gave efficiency 1.18; its ratio to the mean-compute FIFO lanes, applied to
    # a noisy log that queues less, compressed 7 workers' compute (efficiency 1.166 > async_bound).
    t = scenario.training
    own = asyncps.own_time_means_s(np.bincount(fifo.worker, minlength=workers), distribution=t.compute_distribution,
                                   sigma=t.compute_sigma, seed=t.seed, **costs.worker_parts(workers))
    # Workers of one mean (a straggler has its own) form one class with their draws' average, as at
    # the mean: a class per worker would make the exact analysis walk 2^workers populations.
    means = costs.worker_compute_s(workers)
    classes = np.array([own[means == m].mean() for m in means])
    return fifo.stretched(fifo.updates_per_s / fair_share_rate(costs, workers, classes))


def streamed(scenario: Scenario) -> bool:
    """Whether a PS shard's transfers stream through its NIC (longer than
    ``inter_link.whole_message_bytes``), so that concurrent ones share it;
    shorter transfers arrive whole and are served in turn."""
    window = scenario.cluster.inter_link.whole_message_bytes
    shard_bytes = scenario.workload.gradient_bytes / plan(scenario).options.get("num_shards", 1)
    return window is not None and shard_bytes > window


def fifo_update_log(scenario: Scenario, costs: AsyncCosts, distribution: str | None = None) -> asyncps.UpdateLog:
    """The event engine's log of ``scenario`` (its compute distribution unless ``distribution`` is given)."""
    t = scenario.training
    workers = scenario.num_replicas
    return asyncps.simulate_async(
        workers,
        t.steps * workers,
        distribution=distribution or t.compute_distribution,
        sigma=t.compute_sigma,
        push_s=float(costs.push_s),
        pull_s=float(costs.pull_s),
        ps_service_s=float(costs.ps_service_s),
        seed=t.seed,
        duplex=costs.duplex,
        ps_request_s=float(costs.ps_request_s),
        ps_apply_s=float(costs.ps_apply_s),
        compute_at_ps=bool(costs.compute_at_ps),
        **costs.worker_parts(workers),
    )
