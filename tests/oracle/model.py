"""The step as SimPy processes and resources (seconds).

Synchronous training (:func:`sync_step_times`), per steady.py's docstring:

* each worker's **input**: with prefetch a producer process reads and copies
  batches into a ``Store`` of capacity 1 while the devices compute, one
  batch ahead ("the host prepares step s+1 while the devices compute step
  s"): like tf.data's prefetch buffer of one element, it reads the next
  batch once the buffer has room (a ``Container`` of one slot, given back
  when the host takes a batch); without prefetch the host reads the step's
  batch inside the step;
* the worker's **host** then spends ``step_overhead_s`` and dispatches its
  replicas one after another, ``replica_dispatch_s`` each (both slower on
  less than one core); a replica starts computing when its own dispatch is
  done. On shared CPU cores (a resource per worker) the dispatch needs the
  cores too: the host takes them for a replica's dispatch and hands them to
  that replica's compute, then waits for them to dispatch the next;
* each **replica** computes forward (1/3) and backward (2/3) of its own
  batch (sharding.py's split of the global batch) times a random factor per (step, replica) with mean 1 (stragglers.py),
  and no less than the host's launches of the worker's other replicas' kernels (RULES.md rule 16);
  gradient bucket k is ready once (k+1)/K of its backward pass is done;
* one **communication resource** (capacity 1) serves the buckets' collectives
  one at a time, in order, each once every replica has produced that bucket,
  so they overlap the rest of the backward pass; a synchronous PS then pulls
  the variables;
* each replica **updates** after its backward pass and the last collective;
  across worker processes (multi_worker_mirrored) the metric all-reduces
  follow on the communication resource; the step ends when all of that is
  done, and the next step's host work starts.

Asynchronous parameter servers (:func:`async_step_time`), per asyncps.py:
``num_ps`` shard resources, each FIFO (capacity 1); every worker loops pull,
compute, push. Only the device's compute is random (input and host time are
not), as in the synchronous step. A transfer asks every shard for its piece at once (the
snapshot of a pull is taken when a shard starts serving it), while the
worker's own part of the transfer runs. A push's gradient is applied once
its bytes are in (its own part and every shard's piece done): each shard is
then asked again, for its share of the apply, so a shard applies one
gradient at a time, queued with its transfers. An ``in_process`` cluster is
one FIFO resource holding each whole transfer and every apply; on shared CPU
cores a worker also holds it for its own time (input, host, compute) after
its pull (prediction.py ``async_costs``).
"""

from __future__ import annotations

import itertools

import numpy as np
import simpy
from simpy.events import Condition

from distsim.scenario import Scenario

from . import costs


def factors(rng: np.random.Generator, s: Scenario, size) -> np.ndarray:
    """Compute-time factors with mean 1 (stragglers.py docstring): 1, Exp(1), or exp(N(-sigma^2/2, sigma^2))."""
    t = s.training
    if t.compute_distribution == "deterministic":
        return np.ones(size)
    if t.compute_distribution == "exponential":
        return rng.exponential(1.0, size)
    return rng.lognormal(-t.compute_sigma**2 / 2, t.compute_sigma, size)


def sync_step_times(s: Scenario, steps: int | None = None, seed: int = 12345, epochs: int = 0) -> np.ndarray:
    """Seconds of each step of a synchronous scenario: ``steps`` full steps
    (default ``training.steps``), or with ``epochs`` > 0 that many whole
    epochs (DATA sharding: their partial last steps, and the shuffle-buffer
    fill before the first batch of each)."""
    sizes, opens = [s.training.global_batch] * (s.training.steps if steps is None else steps), None
    if epochs:
        epoch = costs.epoch_steps(s)
        sizes, opens = epoch * epochs, set(range(0, len(epoch) * epochs, len(epoch)))
    steps = len(sizes)
    env = simpy.Environment()
    workers, local = s.cluster.num_workers, s.cluster.devices_per_worker
    replicas = workers * local
    per_example = np.repeat([costs.worker_seconds_per_example(s, w) for w in range(workers)], local)
    q = np.array([costs.replica_batches(s, g) for g in sizes], dtype=float) * per_example

    def input_s(step: int) -> float:
        # steady.py: the fill is exposed only with prefetch ("without it those
        # reads are part of the per-step input time").
        fill = costs.fill_s(s) if opens and step in opens and costs.prefetch(s) else 0.0
        return costs.sync_input_s(s, sizes[step]) + fill

    # On shared CPU cores the host's dispatch of a replica and that replica's compute take turns on them.
    cores = [simpy.Resource(env, capacity=1) if costs.worker_cores(s, w) is not None else None
             for w in range(workers)]
    f = factors(np.random.default_rng(seed), s, (steps, replicas))
    # Backup workers (stragglers.py, Training docstring): the step aggregates
    # the first N - b replicas' whole gradients in one collective and drops
    # the b others.
    kept = replicas - s.training.backup_workers
    if kept < replicas and any(c is not None for c in cores):
        raise ValueError("the oracle drops backup replicas on their own hardware only")
    k_buckets = 1 if kept < replicas else s.training.num_buckets
    has_comm = costs.algorithm(s) is not None
    bucket_s = costs.collective_s(s, costs.gradient_bytes(s) / k_buckets)
    comm = simpy.Resource(env, capacity=1)
    ready = [[[env.event() for _ in range(replicas)] for _ in range(k_buckets)] for _ in range(steps)]
    reduced = [env.event() for _ in range(steps)]
    ends = [env.event() for _ in range(steps)]

    def compute(step: int, r: int, turn):
        work = max(q[step, r] * f[step, r], costs.launch_s(s))
        yield env.timeout(work / 3)
        for k in range(k_buckets):
            yield env.timeout(work * 2 / 3 / k_buckets)
            ready[step][k][r].succeed()
        if turn is not None:
            cores[r // local].release(turn)

    def replica(step: int, r: int, turn):
        computing = env.process(compute(step, r, turn))
        # A dropped straggler stops when the kept replicas' gradients are summed.
        yield env.any_of([computing, reduced[step]]) if kept < replicas and has_comm else computing
        if has_comm:
            yield reduced[step]
        yield env.timeout(costs.update_s(s))
        updated[step][r].succeed()

    def collectives(step: int):
        for k in range(k_buckets):
            yield Condition(env, lambda events, count: count >= kept, ready[step][k])
            with comm.request() as turn:
                yield turn
                yield env.timeout(bucket_s)
        with comm.request() as turn:
            yield turn
            yield env.timeout(costs.pull_s(s))
        reduced[step].succeed()

    def step_end(step: int):
        yield env.all_of(updated[step])
        with comm.request() as turn:
            yield turn
            yield env.timeout(costs.metric_s(s))
        ends[step].succeed(env.now)

    def producer(store: simpy.Store, room: simpy.Container):
        for step in range(steps):
            yield room.get(1)  # tf.data's prefetch waits for room in its buffer before reading the next batch
            yield env.timeout(input_s(step))
            yield store.put(step)

    def host(w: int, store: simpy.Store | None, room: simpy.Container | None):
        for step in range(steps):
            if step:
                yield ends[step - 1]
            if store is None:
                yield env.timeout(input_s(step))
            else:
                yield store.get()
                yield room.put(1)
            overhead, dispatch = costs.host_costs_s(s, w)
            yield env.timeout(overhead)
            for j in range(local):
                turn = cores[w].request() if cores[w] is not None else None
                if turn is not None:
                    yield turn  # held through this replica's dispatch and compute
                yield env.timeout(dispatch)
                env.process(replica(step, w * local + j, turn))

    updated = [[env.event() for _ in range(replicas)] for _ in range(steps)]
    for step in range(steps):
        if has_comm:
            env.process(collectives(step))
        env.process(step_end(step))
    for w in range(workers):
        store = room = None
        if costs.prefetch(s):
            store, room = simpy.Store(env, capacity=1), simpy.Container(env, capacity=1, init=1)
            env.process(producer(store, room))
        env.process(host(w, store, room))
    env.run()
    times = np.array([e.value for e in ends])
    return np.diff(np.concatenate([[0.0], times]))


class FifoServer:
    """A PS shard: serves one transfer at a time, first asked first served;
    transfers asked at the same instant go in worker order (asyncps.py:
    "events at the same instant are ordered by (time, worker, kind)"). The
    choice waits until every event of the instant has run (an event of a
    priority below SimPy's NORMAL). An instant is :data:`TIE_S` wide: two
    asks that are one instant in exact arithmetic can differ in the last
    bits of their float sums (this oracle adds the same costs in another
    order than the engine), and a deterministic FIFO run then locks into
    another rhythm; the wait for the choice, ``TIE_S`` a grant, delays a run
    of thousands of transfers by nanoseconds."""

    LATE = 2
    #: Seconds within which two asks are the same instant: above float rounding of times up to
    #: about 1e3 s (1e-13 s), far below any service time the oracle's scenarios draw (microseconds).
    TIE_S = 1e-12

    def __init__(self, env: simpy.Environment) -> None:
        self.env = env
        self.queue: list[tuple[float, int, int, simpy.Event]] = []
        self.busy = False
        self.pending = False

    def ask(self, worker: int) -> simpy.Event:
        granted = self.env.event()
        self.queue.append((self.env.now, worker, id(granted), granted))
        self._kick()
        return granted

    def release(self) -> None:
        self.busy = False
        self._kick()

    def _kick(self) -> None:
        if self.busy or self.pending or not self.queue:
            return
        self.pending = True
        late = self.env.timeout(self.TIE_S)
        late.callbacks.append(self._grant)

    def _grant(self, _event) -> None:
        self.pending = False
        if not self.busy and self.queue:
            self.busy = True
            first = min(asked for asked, *_ in self.queue)
            chosen = min((q for q in self.queue if q[0] <= first + self.TIE_S), key=lambda q: (q[1], q[0], q[2]))
            self.queue.remove(chosen)
            chosen[3].succeed()


def async_step_time(s: Scenario, apply_at_ps: bool = True, seed: int = 12345) -> float:
    """Seconds per step of an asynchronous PS scenario as ``predict`` states
    it (``workers / updates_per_s``, the rate over the run of ``W x
    training.steps`` applied updates).

    Each worker loops pull, compute, push, forever (asyncps.py); the run
    ends at the ``W x training.steps``-th apply. The ``num_ps`` shards are FIFO
    resources; every transfer asks all of them for its piece at once, when
    it starts ("each server is FIFO and is asked for when a transfer reaches
    it", asyncps.py), and a shard is busy ``request_s`` + its piece's bytes.
    The transfer's own path (latency, the worker's bytes) runs meanwhile: it
    ends when both are done, so to an idle PS it takes ``latency + request_s
    + gradient / bandwidth`` (prediction.py ``async_costs``). A push's
    gradient is applied "once its bytes are in" (asyncps.py): then every
    shard is asked for its share of the apply (``apply_at_ps``), which
    "queues with the PS host's other work (with one server, its transfers)",
    one apply at a time per shard (prediction.py ``async_costs``); the
    update counts when the last shard has applied it."""
    workers, steps = s.num_replicas, s.training.steps
    per_worker = [costs.async_costs(s, apply_at_ps, w) for w in range(workers)]
    c = per_worker[0]
    env = simpy.Environment()
    shards = [FifoServer(env) for _ in range(1 if c.in_process else s.strategy.num_ps)]
    rng = np.random.default_rng(seed)
    f = factors(rng, s, (workers, 2 * steps))  # each worker's draws; drawn again if a worker runs further
    applied: list[float] = []
    finished = env.event()

    def piece(shard: FifoServer, w: int, service_s: float):
        yield shard.ask(w)
        yield env.timeout(service_s)
        shard.release()

    def transfer(w: int):
        pieces = [env.process(piece(shard, w, c.shard_s)) for shard in shards]
        return env.all_of([env.timeout(c.transfer_s), *pieces])

    def own(w: int, seconds: float):
        if per_worker[w].served:
            yield shards[0].ask(w)
        yield env.timeout(seconds)
        if per_worker[w].served:
            shards[0].release()

    def worker(w: int):
        for u in itertools.count():
            yield transfer(w)
            yield env.process(own(w, per_worker[w].own_s(f[w, u] if u < f.shape[1] else factors(rng, s, 1)[0])))
            yield transfer(w)
            if c.apply_s > 0:
                yield env.all_of([env.process(piece(shard, w, c.apply_s)) for shard in shards])
            applied.append(env.now)
            if len(applied) == workers * steps:
                finished.succeed()

    for w in range(workers):
        env.process(worker(w))
    env.run(until=finished)
    return workers * applied[-1] / len(applied)
