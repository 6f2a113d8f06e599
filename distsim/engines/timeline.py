"""The synchronous step simulated step by step: stragglers, partial batches, the trace.

:func:`simulate` runs the model of :mod:`distsim.engines.steady` for
``training.steps`` steps, with a seeded random compute factor per (step,
replica), the epoch's partial last batch and the shuffle-buffer fill. Every
replica is simulated (vectorised over replicas), so 100,000 replicas cost
arrays of 100,000 numbers per step. The trace shows at most
:data:`TRACE_REPLICAS` of them (the first workers' replicas and the last
worker's): replicas with identical cost distributions differ only in their
random draws, and a learner reads a timeline of a few dozen rows, not of a
hundred thousand. Step times, waits and the straggler effects are computed
over all replicas.

A collective can start once every replica has produced its tensors: that is
the latest of the replicas' ``forward_end + ready x backward``. With many
collectives it is found among the replicas no other replica beats on both
terms (the upper Pareto front, a handful of replicas), so a step costs
O(replicas log replicas + collectives), not O(replicas x collectives).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, fields

import numpy as np

from distsim.engines import steady
from distsim.mechanics import sharding, stragglers
from distsim.mechanics.communication import Communication
from distsim.mechanics.gradients import serial_chain
from distsim.mechanics.stepcosts import StepCosts, step_costs
from distsim.mechanics.strategies import plan
from distsim.results.trace import EVENT_KINDS, Trace
from distsim.scenario import Scenario, limits

#: Replicas a trace shows at most.
TRACE_REPLICAS = limits.MAX_TRACE_REPLICAS
#: Collectives per step above which a replica's backward pass is one event,
#: not one piece per collective.
MAX_BACKWARD_PIECES = 16


@dataclass
class Timeline:
    """What :func:`simulate` produced.

    Attributes:
        trace: the events of the shown replicas (columnar).
        step_times_s: wall time of each step (last replica's update end minus
            the previous one's).
        exposed_comm_s: all-reduce time after the last backward pass of any
            replica ends, per step (:mod:`distsim.engines.steady`'s definition).
        global_examples: examples in each simulated step.
        epoch_start: whether each step starts an epoch.
        shown_replicas: global indices of the replicas in the trace.
        num_replicas: replicas simulated.
        run_time_s: the run's total simulated time, seconds: from the start
            of its first step to the start of the step after its last
            (:func:`run_time_s`).
    """

    trace: Trace
    step_times_s: np.ndarray
    exposed_comm_s: np.ndarray
    global_examples: np.ndarray
    epoch_start: np.ndarray
    shown_replicas: np.ndarray
    num_replicas: int
    run_time_s: float = 0.0


def step_sizes(scenario: Scenario, p: StepCosts, steps: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Global examples in each simulated step (the epoch's sequence: full
    steps, then its final step; cycled), and which steps open an epoch, for
    ``steps`` steps (default ``training.steps``).
    The global batch is ``p``'s (a one-device baseline runs another)."""
    shape = steady.epoch_plan(p)
    per_epoch, last = int(shape.steps), int(shape.last_examples)
    position = np.arange(scenario.training.steps if steps is None else steps) % per_epoch
    return np.where(position == per_epoch - 1, last, int(p.global_batch)), position == 0


def shown_replicas(workers: int, local: int) -> np.ndarray:
    """The replicas a trace shows: all, or the first workers' and the last
    worker's, at most :data:`TRACE_REPLICAS`."""
    if workers * local <= TRACE_REPLICAS:
        return np.arange(workers * local)
    first = max(TRACE_REPLICAS // local - 1, 1)
    shown_workers = list(range(first)) + [workers - 1]
    per_worker = min(local, TRACE_REPLICAS // len(shown_workers))
    return np.array([w * local + j for w in shown_workers for j in range(per_worker)])


def upper_front(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The pairs (a_r, b_r) no other pair beats on both: the only candidates
    for ``max_r (a_r + f b_r)`` at any f >= 0."""
    order = np.lexsort((-b, -a))
    b_sorted = b[order]
    best_before = np.maximum.accumulate(np.concatenate([[-np.inf], b_sorted[:-1]]))
    keep = order[b_sorted > best_before]
    return a[keep], b[keep]


def latest(a: np.ndarray, b: np.ndarray, fractions: np.ndarray) -> np.ndarray:
    """``max_r (a_r + f b_r)`` for each f: directly for a few f, over the
    upper front of the replicas for many."""
    if len(fractions) > 16:
        a, b = upper_front(a, b)
    return np.max(a[None, :] + np.asarray(fractions)[:, None] * b[None, :], axis=1)


@dataclass
class _Setup:
    """Everything a step needs that does not change between steps."""

    scenario: Scenario
    p: StepCosts
    prefetch: bool
    workers: int
    local: int
    replicas: int
    collectives: steady.Collectives | None
    per_example_s: np.ndarray  # per replica (the last worker's may be a straggler's)
    shared: bool
    overhead_s: np.ndarray  # per replica
    dispatch_s: np.ndarray  # per replica
    update_s: float
    launch_s: float  # a replica's shortest compute (:func:`distsim.engines.steady.launch_s`)
    metric_s: float
    fill_s: float
    aggregate: int
    static_ready: np.ndarray | None
    static_duration: np.ndarray | None
    pull_s: float
    worker_of: np.ndarray
    local_index: np.ndarray

    @classmethod
    def of(cls, scenario: Scenario, costs: StepCosts | None = None) -> "_Setup":
        plan_ = plan(scenario)
        if plan_.mode != "sync":
            raise ValueError(f"strategy mode={plan_.mode!r}; simulate() handles 'sync' (use distsim.predict for async)")
        c, t = scenario.cluster, scenario.training
        p = step_costs(scenario) if costs is None else costs
        # Per replica: the last worker's replicas may have a straggler's cores.
        worker_of = np.repeat(np.arange(c.num_workers), c.devices_per_worker)
        slow = worker_of == c.num_workers - 1
        per_worker = [(float(steady.seconds_per_example(q)), *(float(x) for x in steady.host_costs_s(q, plan_)))
                      for q in (p, steady.straggler_costs(p))]
        per_example, overhead, dispatch = (np.where(slow, per_worker[1][i], per_worker[0][i]) for i in range(3))
        collectives = steady.Collectives.of(scenario, plan_)
        ready = duration = None
        if collectives is not None and not collectives.fused:
            groups = collectives.static_groups()
            ready = groups.ready
            duration = np.asarray(collectives.duration_s(p, groups.share * float(scenario.workload.gradient_bytes)))
        return cls(
            scenario=scenario, p=p, prefetch=plan_.prefetch, workers=c.num_workers, local=c.devices_per_worker,
            replicas=scenario.num_replicas, collectives=collectives,
            per_example_s=per_example, shared=bool(steady.shares_cores(p)),
            overhead_s=overhead, dispatch_s=dispatch, update_s=float(steady.update_s(p)),
            launch_s=float(steady.launch_s(p)),
            metric_s=float(steady.metric_comm_s(p, Communication.of(scenario, plan_))),
            fill_s=float(steady.fill_s(p, plan_.prefetch)),
            aggregate=scenario.num_replicas - t.backup_workers,
            static_ready=ready, static_duration=duration,
            pull_s=0.0 if collectives is None else float(collectives.pull_s(p)),
            worker_of=worker_of,
            local_index=np.tile(np.arange(c.devices_per_worker), c.num_workers),
        )

    @classmethod
    def one_device(cls, scenario: Scenario, batch: int, costs: StepCosts | None = None) -> "_Setup":
        """One device of the scenario's kind on one of its (non-straggler)
        hosts running ``batch`` examples per step with the same strategy's
        host costs and prefetch, and nothing to sum: the baseline of speedup
        (:func:`one_device_run`)."""
        plan_ = plan(scenario)
        p = steady.one_device_costs(step_costs(scenario) if costs is None else costs, batch)
        overhead, dispatch = (np.array([float(x)]) for x in steady.host_costs_s(p, plan_))
        return cls(
            scenario=scenario, p=p, prefetch=plan_.prefetch, workers=1, local=1, replicas=1, collectives=None,
            per_example_s=np.array([float(steady.seconds_per_example(p))]),
            shared=bool(steady.shares_cores(p)), overhead_s=overhead, dispatch_s=dispatch,
            update_s=float(steady.update_s(p)), launch_s=float(steady.launch_s(p)), metric_s=0.0,
            fill_s=float(steady.fill_s(p, plan_.prefetch)), aggregate=1,
            static_ready=None, static_duration=None, pull_s=0.0,
            worker_of=np.zeros(1, dtype=int), local_index=np.zeros(1, dtype=int),
        )

    def input_s(self, global_examples: int) -> float:
        return float(steady.input_s(self.p, float(global_examples)))


@dataclass
class _Step:
    """One simulated step: per worker and per replica times (all replicas),
    and the step's collectives."""

    in_start: np.ndarray
    in_end: np.ndarray
    host_start: np.ndarray
    dispatch_end: np.ndarray  # its dispatch is done and its compute starts
    forward_end: np.ndarray
    ready_end: np.ndarray  # end of each replica's backward (cut at the aggregation for dropped stragglers)
    comm_start: np.ndarray
    comm_end: np.ndarray
    update_start: np.ndarray
    update_end: np.ndarray
    step_end: float
    exposed_comm_s: float

    def shown(self, replicas: np.ndarray, workers: np.ndarray) -> "_Step":
        """The step restricted to the replicas (and workers) a trace shows."""
        per_worker = ("in_start", "in_end", "host_start")
        sliced = {name: getattr(self, name)[workers if name in per_worker else replicas]
                  for name in ("in_start", "in_end", "host_start", "dispatch_end", "forward_end",
                               "ready_end", "update_start", "update_end")}
        return _Step(**sliced, comm_start=self.comm_start, comm_end=self.comm_end, step_end=self.step_end, exposed_comm_s=self.exposed_comm_s)


def _dispatch_ends(setup: _Setup, host_start: np.ndarray, work: np.ndarray) -> np.ndarray:
    """When the host has dispatched each replica, which then starts computing:
    after the overhead and the dispatches of the replicas before it; on
    shared cores the dispatch needs the cores, so each replica's comes after
    the previous replica's compute."""
    own = host_start[setup.worker_of] + setup.overhead_s + (setup.local_index + 1) * setup.dispatch_s
    if not setup.shared:
        return own
    turn = own.reshape(setup.workers, setup.local).copy()
    busy, dispatch = (x.reshape(setup.workers, setup.local) for x in (work, setup.dispatch_s))
    for j in range(1, setup.local):
        turn[:, j] = turn[:, j - 1] + busy[:, j - 1] + dispatch[:, j]
    return turn.ravel()


def _collectives(setup: _Setup, forward_end: np.ndarray, backward: np.ndarray):
    """(start, end) of the step's collectives, and each replica's backward
    end (cut at the aggregation for dropped stragglers)."""
    done = forward_end + backward
    coll = setup.collectives
    if coll is None:
        return np.zeros(0), np.zeros(0), done
    grad = float(setup.scenario.workload.gradient_bytes)
    if setup.aggregate < setup.replicas:  # backup workers: the first `aggregate` replicas' whole gradients
        gather = np.partition(done, setup.aggregate - 1)[setup.aggregate - 1]
        start, end = np.array([gather]), np.array([gather]) + setup.static_duration
        if setup.pull_s > 0:
            start, end = np.append(start, end[-1]), np.append(end, end[-1] + setup.pull_s)
        return start, end, np.minimum(done, gather)
    if coll.sharded:  # one push per variable to its PS task, then the pull
        launch = latest(forward_end, backward, coll.stream.ready)
        push_end, pull = (float(x) for x in coll.sharded_exchange_s(setup.p, list(launch)))
        return np.array([launch[0], push_end]), np.array([push_end, push_end + pull]), done
    if coll.fused:
        tensor_ready = latest(forward_end, backward, coll.stream.ready)
        first_tick = forward_end.max()  # the backward pass of the last replica starts
        launch, share = coll.fused_groups(tensor_ready - first_tick)
        launch = launch + first_tick
        duration = np.asarray(coll.duration_s(setup.p, share * grad))
    else:
        launch = latest(forward_end, backward, setup.static_ready)
        duration = setup.static_duration
    start, end = serial_chain(launch, duration)
    if setup.pull_s > 0:  # a parameter server's pull once every push is in
        start, end = np.append(start, end[-1]), np.append(end, end[-1] + setup.pull_s)
    return start, end, done


def _simulate_step(setup: _Setup, input_s: float, batches: np.ndarray, factor: np.ndarray, prev: _Step | None,
                   epoch_start: bool) -> _Step:
    """One step: ``input_s`` is the host's input time for its examples, ``batches`` each replica's."""
    if prev is None:
        in_start = np.zeros(setup.workers)
        dev_free = np.zeros(setup.replicas)
    else:
        gate = prev.host_start if setup.prefetch else np.full(setup.workers, prev.step_end)
        in_start = np.maximum(prev.in_end, gate)
        dev_free = np.full(setup.replicas, prev.step_end) if setup.metric_s > 0 else prev.update_end
    in_end = in_start + input_s + (setup.fill_s if epoch_start else 0.0)
    host_start = np.maximum(in_end, dev_free.reshape(setup.workers, setup.local).max(axis=1))
    work = np.maximum(batches * setup.per_example_s * factor, setup.launch_s)
    dispatch_end = _dispatch_ends(setup, host_start, work)
    forward_end = dispatch_end + work / 3
    start, end, done = _collectives(setup, forward_end, 2 * work / 3)
    last_backward = float(done.max())
    # A dropped backup replica that its host has not dispatched yet updates once dispatched.
    update_start = np.maximum(end[-1], dispatch_end) if len(end) else done
    update_end = update_start + setup.update_s
    step_end = float(update_end.max()) + setup.metric_s  # the metric all-reduces wait for every replica
    exposed = float(end[-1]) - last_backward if len(end) else 0.0
    return _Step(in_start, in_end, host_start, dispatch_end, forward_end, done, start, end,
                 update_start, update_end, step_end, exposed)


class _Columns:
    """Collects trace events as arrays (no per-event Python objects)."""

    def __init__(self) -> None:
        self.labels: list[str] = []
        self.parts: list[tuple[np.ndarray, ...]] = []

    def add(self, device, kind: str, start, end, step, label: str) -> None:
        device, start, end, step = (np.asarray(x).ravel() for x in np.broadcast_arrays(device, start, end, step))
        mask = end > start
        if label not in self.labels:
            self.labels.append(label)
        lab = self.labels.index(label)
        n = int(mask.sum())
        self.parts.append((device[mask], np.full(n, EVENT_KINDS.index(kind), np.int8), start[mask], end[mask],
                           step[mask], np.full(n, lab, np.int32)))

    def trace(self, devices: list[str]) -> Trace:
        cols = [np.concatenate(c) if self.parts else np.zeros(0) for c in zip(*self.parts)]
        return Trace(devices=devices, labels=self.labels, device=cols[0].astype(np.int32),
                     kind=cols[1].astype(np.int8), start_s=cols[2].astype(float), end_s=cols[3].astype(float),
                     step=cols[4].astype(np.int64), label=cols[5].astype(np.int32))


def _trace(setup: _Setup, steps: list[_Step], shown: np.ndarray) -> Trace:
    """The events of the shown replicas and their workers' input pipelines
    (``steps`` hold only their columns, see :meth:`_Step.shown`)."""
    local = setup.local
    workers_shown = np.unique(shown // local)
    worker_col = np.searchsorted(workers_shown, shown // local)
    devices = [f"w{w}/input" for w in workers_shown]
    devices += [f"w{r // local}/r{r % local}" for r in shown]
    devices += [f"w{r // local}/r{r % local}/comm" for r in shown]
    n_in, n_rep = len(workers_shown), len(shown)
    rep_dev = n_in + np.arange(n_rep)[None, :]
    comm_dev = n_in + n_rep + np.arange(n_rep)[None, :]
    step_col = np.arange(len(steps))[:, None]

    def rows(name: str, cols=slice(None)) -> np.ndarray:
        return np.stack([getattr(s, name)[cols] for s in steps])

    cols = _Columns()
    cols.add(np.arange(n_in)[None, :], "input", rows("in_start"), rows("in_end"), step_col, "input pipeline")
    host = rows("host_start", worker_col)
    free = np.stack([np.full(len(shown), s.step_end) if setup.metric_s > 0 else s.update_end for s in steps])
    prev_free = np.vstack([np.zeros((1, n_rep)), free[:-1]])
    dispatch_end = rows("dispatch_end")
    forward_end, done = rows("forward_end"), rows("ready_end")
    cols.add(rep_dev, "idle", prev_free, host, step_col, "wait for input")
    dispatch_start = dispatch_end - setup.dispatch_s[shown][None, :]
    waiting = "host overhead, then any replicas before it: " + ("their dispatch and compute (shared cores)"
                                                                 if setup.shared else "their dispatch")
    cols.add(rep_dev, "idle", host, dispatch_start, step_col, waiting)
    cols.add(rep_dev, "idle", dispatch_start, dispatch_end, step_col, "its dispatch")
    cols.add(rep_dev, "compute", dispatch_end, forward_end, step_col, "forward")
    _backward_events(cols, setup, rep_dev, step_col, forward_end, done)
    update_start, update_end = rows("update_start"), rows("update_end")
    cols.add(rep_dev, "idle", done, update_start, step_col, "wait for all-reduce")
    _comm_events(cols, setup, steps, comm_dev)
    cols.add(rep_dev, "update", update_start, update_end, step_col, "update")
    if setup.metric_s > 0:
        last = np.array([s.update_end.max() for s in steps])[:, None]
        cols.add(comm_dev, "comm", last, np.array([s.step_end for s in steps])[:, None], step_col, "metric all-reduces")
    return cols.trace(devices)


def _backward_events(cols: _Columns, setup: _Setup, rep_dev, step_col, forward_end, done) -> None:
    """One backward piece per collective (its tensors), or one event when
    there are many collectives or none."""
    ready = setup.static_ready
    if ready is None or len(ready) == 1 or len(ready) > MAX_BACKWARD_PIECES:
        cols.add(rep_dev, "compute", forward_end, done, step_col, "backward")
        return
    length = done - forward_end
    for k in range(len(ready)):
        lo = forward_end + (ready[k - 1] if k else 0.0) * length
        hi = np.minimum(forward_end + ready[k] * length, done)
        cols.add(rep_dev, "compute", lo, hi, step_col, f"backward {k}")


def _comm_events(cols: _Columns, setup: _Setup, steps: list[_Step], comm_dev) -> None:
    """Every collective of every step on every shown replica's comm row;
    with many collectives per step, runs of back-to-back ones are one event
    each (the row shows when the link is busy, not hundreds of slivers)."""
    counts = np.array([len(s.comm_start) for s in steps])
    if not counts.any():
        return
    names = _comm_labels(setup, int(counts.max()))
    if counts.max() <= MAX_BACKWARD_PIECES:
        for k in range(int(counts.max())):
            idx = np.flatnonzero(counts > k)
            start = np.array([steps[i].comm_start[k] for i in idx])[:, None]
            end = np.array([steps[i].comm_end[k] for i in idx])[:, None]
            cols.add(comm_dev, "comm", start, end, idx[:, None], names[k])
        return
    for i, s in enumerate(steps):
        gaps = np.flatnonzero(s.comm_start[1:] > s.comm_end[:-1])
        first = np.concatenate([[0], gaps + 1])
        last = np.concatenate([gaps, [len(s.comm_start) - 1]])
        cols.add(comm_dev, "comm", s.comm_start[first][:, None], s.comm_end[last][:, None], i,
                 f"collectives ({counts.max()} per step)")


def _comm_labels(setup: _Setup, count: int) -> list[str]:
    """Names of a step's collectives on the trace."""
    coll = setup.collectives
    if coll is not None and coll.sharded:
        return ["push gradients", "pull variables"]
    names = [f"all-reduce {k}" if count > 1 else "all-reduce" for k in range(count)]
    if setup.pull_s > 0:
        names[-1] = "pull variables"
    return names


def simulate(scenario: Scenario, costs: StepCosts | None = None) -> Timeline:
    """Simulate ``training.steps`` synchronous steps.

    Returns the trace (tracks ``w<i>/input`` for each shown worker's host,
    ``w<i>/r<j>`` for each shown replica's compute and ``w<i>/r<j>/comm``
    for its collectives) and the per-step times of all replicas. ``costs``:
    the scenario's :class:`~distsim.mechanics.stepcosts.StepCosts` when the
    caller has them already.
    """
    return _run(_Setup.of(scenario, costs), trace=True)


def one_device_run(scenario: Scenario, batch: int, costs: StepCosts | None = None) -> Timeline:
    """The one-device baseline of ``scenario`` (see :meth:`_Setup.one_device`)
    with ``batch`` examples per step, simulated for ``training.steps`` steps
    of its own epoch with the scenario's compute distribution and seed (no trace).

    Common random numbers: the baseline's k-th compute factor is replica 0's
    k-th draw in :func:`simulate` (sync), or worker 0's k-th draw in the
    asynchronous engine (:class:`distsim.engines.asyncps._ComputeTimes`), so
    that sampling noise cannot make N replicas beat one device (efficiency
    above 1). A scenario of one device is its own baseline, draw for draw.

    ``costs``: the scenario's :class:`~distsim.mechanics.stepcosts.StepCosts`
    when the caller has them already (the baseline's own are derived from
    them by :func:`distsim.engines.steady.one_device_costs`), so that a
    prediction prices its run and both baselines from one StepCosts."""
    return _run(_Setup.one_device(scenario, batch, costs), trace=False, **_one_device_stream(scenario))


def _one_device_stream(scenario: Scenario) -> dict:
    """The random stream of the one-device baseline: ``rng`` and ``draws`` for :func:`_run`."""
    t = scenario.training
    if plan(scenario).mode == "sync":
        return {"rng": np.random.default_rng(t.seed), "draws": scenario.num_replicas}
    child = np.random.SeedSequence(t.seed).spawn(scenario.num_replicas)[0]
    return {"rng": np.random.Generator(np.random.PCG64(child)), "draws": 1}


#: One-device baselines :func:`one_device_throughput` remembers, least recently used dropped first: the
#: last few predictions' (a what-if change and its undo), not a whole session's.
BASELINE_MEMO_SIZE = 8
_baseline_memo: OrderedDict[tuple, float] = OrderedDict()


def one_device_throughput(scenario: Scenario, batch: int, costs: StepCosts | None = None) -> float:
    """Examples/s of :func:`one_device_run`: its examples over its total
    simulated time. Remembered under everything the run reads
    (:func:`one_device_inputs`), so a what-if change that leaves the
    baseline's inputs alone (a link, the all-reduce algorithm, the gradient
    grouping) does not simulate it again, and a change of any input is
    another key: the memo cannot return a stale baseline."""
    setup = _Setup.one_device(scenario, batch, costs)
    key = one_device_inputs(setup)
    if key in _baseline_memo:
        _baseline_memo.move_to_end(key)
        return _baseline_memo[key]
    run = _run(setup, trace=False, **_one_device_stream(scenario))
    value = float(np.sum(run.global_examples)) / run.run_time_s
    _baseline_memo[key] = value
    if len(_baseline_memo) > BASELINE_MEMO_SIZE:
        _baseline_memo.popitem(last=False)
    return value


def one_device_inputs(setup: _Setup) -> tuple:
    """Everything :func:`_run` without a trace reads, as a hashable key: every
    field of ``setup`` (every field of its StepCosts; numbers by their
    bytes, so that NaN equals NaN and nothing is rounded), of its scenario
    only ``training.steps``, the compute distribution and, when the
    distribution draws random numbers, the stream (:func:`_one_device_stream`:
    the mode, seed and replica count) and ``compute_sigma``."""
    t = setup.scenario.training
    random = t.compute_distribution != "deterministic"
    stream = (plan(setup.scenario).mode, t.seed, setup.scenario.num_replicas, t.compute_sigma) if random else None
    return (t.steps, t.compute_distribution, stream,
            *(_key_part(getattr(setup, f.name)) for f in fields(setup) if f.name != "scenario"))


def _key_part(value) -> object:
    if isinstance(value, StepCosts):
        return tuple(_key_part(getattr(value, f.name)) for f in fields(value))
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, (bool, int, float, np.ndarray, np.number, np.bool_)):
        array = np.asarray(value)
        return array.dtype.str, array.shape, array.tobytes()
    raise TypeError(f"no memo key for {type(value).__name__}")  # a new kind of _Setup field: key it first


def _run(setup: _Setup, trace: bool, rng: np.random.Generator | None = None, draws: int | None = None) -> Timeline:
    """``draws`` factors per step from ``rng`` (default: the seed's stream, one
    per replica), of which the first ``setup.replicas`` are used."""
    t = setup.scenario.training
    sizes, epoch_start = step_sizes(setup.scenario, setup.p)
    rng = np.random.default_rng(t.seed) if rng is None else rng
    draws = setup.replicas if draws is None else draws
    batches = {g: np.asarray(sharding.replica_batch_sizes(int(g), setup.replicas), dtype=float) for g in set(sizes)}
    inputs = {g: setup.input_s(int(g)) for g in set(sizes)}  # two sizes at most: priced once, not every step
    shown = shown_replicas(setup.workers, setup.local)
    shown_workers = np.unique(shown // setup.local)
    steps: list[_Step] = []  # the shown replicas' columns only: memory O(replicas + steps)
    prev = None
    for s, g in enumerate(sizes):
        factor = stragglers.factors(rng, t.compute_distribution, draws, t.compute_sigma)[:setup.replicas]
        prev = _simulate_step(setup, inputs[g], batches[g], factor, prev, bool(epoch_start[s]))
        if s == 0:
            first_start = float(prev.host_start.max()) if setup.prefetch else 0.0
        steps.append(prev.shown(shown, shown_workers))
    ends = np.array([s.step_end for s in steps])
    return Timeline(trace=_trace(setup, steps, shown) if trace else Trace.from_events([]),
                    step_times_s=np.diff(np.concatenate([[0.0], ends])),
                    exposed_comm_s=np.array([s.exposed_comm_s for s in steps]), global_examples=sizes,
                    epoch_start=epoch_start, shown_replicas=shown, num_replicas=setup.replicas,
                    run_time_s=run_time_s(setup, prev, first_start))


def run_time_s(setup: _Setup, last: _Step, first_start: float) -> float:
    """The run's total simulated time, seconds: from the start of its first
    step until the start of the step after its last, so ``n`` steps are ``n``
    step-to-step intervals, each one step's share of the pipeline (the
    closed form: :func:`distsim.engines.steady.run_time_s`). A step starts
    with its input without prefetch (at 0 for the first step, at the
    previous step's end for the next); with prefetch, when its host takes
    the prefetched batch, so the first batch's read before the run's first
    step, which no step overlaps, is left out, as from a warm pipeline. The
    next step's read (and its epoch's shuffle fill) is simulated, not its
    devices' work."""
    if not setup.prefetch:
        return float(last.step_end)
    steps = setup.scenario.training.steps
    sizes, opens = step_sizes(setup.scenario, setup.p, steps + 1)
    in_end = np.maximum(last.in_end, last.host_start) + setup.input_s(int(sizes[-1])) + (
        setup.fill_s if opens[-1] else 0.0)
    free = np.full(setup.replicas, last.step_end) if setup.metric_s > 0 else last.update_end
    return float(np.maximum(in_end, free.reshape(setup.workers, setup.local).max(axis=1)).max()) - first_start
