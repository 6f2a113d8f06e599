"""Asynchronous parameter-server training, and sync with backup workers, really computed.

:func:`train_async` replays the timing engine's parameter-server simulation
(:func:`distsim.engines.asyncps.simulate_async`) with real gradients: the update log
says, for every applied update in apply order, which worker sent it, which
parameter version that worker had read and when the PS applied it. So

* each worker computes its gradient on the parameters it last pulled
  (a snapshot of the PS state ``read_version`` updates in);
* the PS applies updates as they arrive, each with staleness
  ``tau = updates applied between the read and this apply``.

Options: a staleness-aware learning rate ``alpha / max(tau, 1)`` (Zhang et al.
2016) and bounded staleness, where the PS drops an update whose staleness
exceeds the bound (the worker pulls fresh parameters and carries on; drops
change the version count, so staleness is recounted over applied updates only).

:func:`train_backup_sync` is the synchronous comparison: every step ``P``
workers compute on their own shards, the PS averages the first ``K = P - b``
gradients to arrive and drops the ``b`` slowest (backup workers), so a step
costs the K-th fastest compute time (:mod:`distsim.mechanics.stragglers`).

Both put loss and accuracy against **simulated wall-clock seconds**, so the
speed-versus-staleness trade-off can be plotted next to synchronous runs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from distsim.engines import asyncps
from distsim.mechanics import sharding, stragglers
from distsim.numerics.models import Model
from distsim.results.result import Curve, Result, Staleness, Summary
from distsim.scenario import Training, limits
from distsim.validation import InputError, InstanceOf, Integer, Number, OneOf, Optional, default_of
from distsim.numerics.train import (
    FLAG,
    REPLICAS,
    LRSchedule,
    TrainingDiverged,
    TrainRun,
    _Recorder,
    _Replicas,
    as_schedule,
    prepare,
    train_run,
    with_curve,
)

#: What the PS does with an update staler than ``max_staleness``.
BOUND_POLICIES: tuple[str, ...] = ("drop",)

_COUNT = Integer(1, limits.MAX_EXAMPLES)
_EVAL_EVERY = Optional(_COUNT, "every twentieth of the run")


@dataclass
class AsyncRun:
    """An asynchronous PS run: the shared :class:`Result` plus per-update extras.

    Attributes:
        result: ``source="simulated"``, ``strategy="parameter_server"``;
            ``result.curve`` has one entry per *applied* update at its apply
            time: the loss and accuracy the worker saw on its batch (with the
            parameters it had read). ``result.staleness`` holds the staleness
            of every applied update.
        weights: final PS weights, Keras layer order.
        log: the timing engine's :class:`~distsim.engines.asyncps.UpdateLog` replayed.
        applied: per log entry, False where bounded staleness dropped it.
        staleness: per log entry, updates *applied* between read and arrival.
        learning_rate: per log entry, the rate used (0 where dropped).
        grad_norms: per log entry, the L2 norm of the worker's gradient.
        eval_curve: evaluation loss/accuracy every ``eval_every`` log entries.
    """

    result: Result
    weights: list[np.ndarray]
    log: asyncps.UpdateLog
    applied: np.ndarray
    staleness: np.ndarray
    learning_rate: np.ndarray
    grad_norms: np.ndarray
    eval_curve: Curve | None = None

    @property
    def curve(self) -> Curve:
        return self.result.curve

    def eval_result(self) -> Result:
        """The result with the evaluation curve in place of the training one (for plots)."""
        return with_curve(self.result, self.eval_curve)


class _WorkerBatches:
    """Worker ``w``'s ``k``-th batch, from a seeded per-epoch shuffle shared by all workers.

    One epoch is ``sharding.step_assignments(n, W * b, W, 1, drop_remainder=True)``
    on the shuffled order: at every step each worker gets its own ``b`` examples.
    With one worker this is exactly the batch sequence of
    ``train_sync(num_replicas=1, global_batch=b, drop_remainder=True)``.
    """

    def __init__(self, num_examples: int, num_workers: int, batch_size: int, shuffle: bool, seed: int):
        self.steps = sharding.step_assignments(num_examples, num_workers * batch_size, num_workers, 1, True)
        if not self.steps:
            raise InputError("batch_size", batch_size, f"at most {num_examples // num_workers} (num_workers x "
                             f"batch_size <= the {num_examples} training examples, {num_workers} workers)")
        self.num_examples, self.shuffle = num_examples, shuffle
        self.rng = np.random.default_rng(seed)
        self.orders: list[np.ndarray] = []

    def __call__(self, worker: int, k: int) -> np.ndarray:
        epoch, step = divmod(k, len(self.steps))
        while len(self.orders) <= epoch:
            self.orders.append(
                self.rng.permutation(self.num_examples) if self.shuffle else np.arange(self.num_examples)
            )
        return self.orders[epoch][self.steps[step][worker]]


def train_async(
    model: Model,
    x: np.ndarray,
    y: np.ndarray,
    *,
    num_workers: int,
    batch_size: int,
    num_updates: int,
    learning_rate: float | LRSchedule = 0.1,
    compute_mean_s=1.0,
    distribution: str = "exponential",
    sigma: float = 0.5,
    push_s: float = 0.0,
    pull_s: float = 0.0,
    ps_service_s: float = 0.0,
    staleness_aware: bool = False,
    max_staleness: int | None = None,
    bound_policy: str = "drop",
    shuffle: bool = True,
    seed: int = default_of(Training, "seed"),
    initial_weights: list[np.ndarray] | None = None,
    dtype=np.float32,
    eval_data: tuple[np.ndarray, np.ndarray] | None = None,
    eval_every: int | None = None,
    log: asyncps.UpdateLog | None = None,
    scenario=None,
) -> AsyncRun:
    """Asynchronous PS training of ``model`` replaying the timing engine's update order.

    Args:
        model, x, y: as in :func:`distsim.numerics.train.train_sync`.
        num_workers: workers W.
        batch_size: examples per worker gradient.
        num_updates: updates the timing engine simulates (log entries).
        learning_rate: alpha, constant or an :class:`LRSchedule` over applied updates.
        compute_mean_s, distribution, sigma, push_s, pull_s, ps_service_s:
            passed to :func:`distsim.engines.asyncps.simulate_async` (seconds).
        staleness_aware: use ``alpha / max(tau, 1)`` for an update of staleness tau.
        max_staleness: drop updates staler than this (``None``: no bound).
        bound_policy: what to do beyond the bound; one of :data:`BOUND_POLICIES`.
        shuffle, seed, initial_weights, dtype: as in ``train_sync``; ``seed``
            also seeds the compute times.
        eval_data: ``(x_test, y_test)`` evaluated every ``eval_every`` log
            entries (default ``num_updates // 20``) and at the end.
        log: replay this :class:`~distsim.engines.asyncps.UpdateLog` instead of
            simulating one (its worker count must be ``num_workers``).
        scenario: the :class:`distsim.scenario.Scenario` this run stands for,
            stored in the result.

    Raises:
        InputError: bad data or configuration (the message names the argument).
        TrainingDiverged: a NaN/inf loss or gradient; the partial run is attached.
    """
    lr_of = as_schedule(learning_rate)
    num_workers = _COUNT("num_workers", num_workers)
    batch_size = _COUNT("batch_size", batch_size)
    num_updates = _COUNT("num_updates", num_updates)
    max_staleness = Optional(Integer(0, limits.MAX_EXAMPLES), "no bound")("max_staleness", max_staleness)
    staleness_aware, shuffle = FLAG("staleness_aware", staleness_aware), FLAG("shuffle", shuffle)
    OneOf(BOUND_POLICIES)("bound_policy", bound_policy)
    eval_every = _EVAL_EVERY("eval_every", eval_every)
    Optional(InstanceOf(asyncps.UpdateLog, "an UpdateLog"), "simulate one")("log", log)
    weights, x, y, evals = prepare(model, x, y, initial_weights, seed, dtype, eval_data)
    dtype = weights[0].dtype.type
    batches = _WorkerBatches(len(x), num_workers, batch_size, shuffle, seed)
    if log is None:
        log = asyncps.simulate_async(
            num_workers, num_updates, compute_mean_s, distribution, sigma=sigma, push_s=push_s,
            pull_s=pull_s, ps_service_s=ps_service_s, seed=seed,
        )
    elif log.num_workers != num_workers:
        raise InputError("log.num_workers", log.num_workers, f"num_workers={num_workers} (the log of this run's workers)")
    num_updates = len(log)
    eval_every = eval_every or max(num_updates // 20, 1)
    engine = _Replicas.build(model, 1, "ring", dtype, {})

    # Snapshots of the PS state that some worker reads: version v = after log entries 0..v-1.
    last_read = np.full(num_updates + 1, -1)
    np.maximum.at(last_read, log.read_version, np.arange(num_updates))
    flat = model.flatten(weights)
    snapshots: dict[int, np.ndarray] = {}
    batches_done = np.zeros(num_workers, dtype=np.int64)
    applied = np.zeros(num_updates, dtype=bool)
    applied_before = np.zeros(num_updates + 1, dtype=np.int64)  # applied updates among entries < j
    staleness = np.zeros(num_updates, dtype=np.int64)
    rec = _Recorder(num_updates, 1)

    def finish(upto: int) -> AsyncRun:
        return _make_async_run(model, flat, log, applied, staleness, rec, evals, upto, batch_size, scenario)

    with np.errstate(over="ignore", invalid="ignore"):
        for j in range(num_updates):
            if last_read[j] > j:
                snapshots[j] = flat.copy()
            w, v = int(log.worker[j]), int(log.read_version[j])
            params = flat if v == j else snapshots[v]
            shard = batches(w, int(batches_done[w]))
            batches_done[w] += 1
            out = engine.step(params, x, y, [shard], "global_batch", 1.0)
            if last_read[v] == j and v in snapshots:
                del snapshots[v]
            staleness[j] = applied_before[j] - applied_before[v]
            keep = max_staleness is None or staleness[j] <= max_staleness
            lr = lr_of(int(applied_before[j]))
            if staleness_aware and staleness[j] > 1:
                lr = lr / staleness[j]
            rec.add(j, out, lr if keep else 0.0)
            if not (math.isfinite(out.loss) and np.isfinite(rec.norms[j]).all()):
                rec.truncate(j + 1)
                raise TrainingDiverged(
                    f"asynchronous training diverged at update {j} (worker {w}, staleness {staleness[j]}): "
                    f"loss={out.loss}, learning rate {lr:g}; stopped",
                    step=j,
                    run=finish(j + 1),
                )
            if keep:
                flat -= dtype(lr) * out.reduced
                applied[j] = True
            applied_before[j + 1] = applied_before[j] + keep
            if (j + 1) % eval_every == 0 or j + 1 == num_updates:
                evals.record(j + 1, flat)
    return finish(num_updates)


def _make_async_run(model, flat, log, applied, staleness, rec, evals, upto, batch_size, scenario) -> AsyncRun:
    mask = applied[:upto]
    times = log.apply_time_s[:upto]
    curve = Curve(
        step=np.arange(1, int(mask.sum()) + 1),
        time_s=times[mask],
        loss=rec.loss[:upto][mask],
        accuracy=rec.accuracy[:upto][mask],
    )
    span_s = float(times[-1]) if upto else math.nan
    applied_stale = staleness[:upto][mask]
    result = Result(
        source="simulated",
        strategy="parameter_server",
        num_replicas=log.num_workers,
        global_batch=batch_size,
        summary=Summary(
            step_time_s=span_s / max(int(mask.sum()), 1) * log.num_workers,
            throughput_samples_per_s=int(mask.sum()) * batch_size / span_s,
            mean_staleness=float(applied_stale.mean()) if len(applied_stale) else None,
        ),
        curve=curve,
        staleness=Staleness(staleness=applied_stale.astype(np.int64), worker=log.worker[:upto][mask].astype(np.int64)),
        scenario=scenario,
        meta={"model": model.name, "dtype": np.dtype(flat.dtype).name},
    )
    return AsyncRun(
        result=result,
        weights=[w.copy() for w in model.unflatten(flat)],
        log=log,
        applied=applied[:upto].copy(),
        staleness=staleness[:upto].copy(),
        learning_rate=rec.lr[:upto],
        grad_norms=rec.norms[:upto, 0],
        eval_curve=evals.curve(lambda step: log.apply_time_s[step - 1]),
    )


def train_backup_sync(
    model: Model,
    x: np.ndarray,
    y: np.ndarray,
    *,
    num_workers: int,
    num_backup: int,
    batch_size: int,
    num_steps: int,
    learning_rate: float | LRSchedule = 0.1,
    compute_mean_s: float = 1.0,
    distribution: str = "exponential",
    sigma: float = 0.5,
    comm_s: float = 0.0,
    shuffle: bool = True,
    seed: int = 0,
    initial_weights: list[np.ndarray] | None = None,
    dtype=np.float32,
    eval_data: tuple[np.ndarray, np.ndarray] | None = None,
    eval_every: int | None = None,
) -> TrainRun:
    """Synchronous PS training with backup workers: average the first ``K = P - b`` gradients.

    Each step, the ``P = num_workers`` workers each draw a compute time
    (``compute_mean_s`` times a factor from :func:`distsim.mechanics.stragglers.factors`,
    the same draws as :func:`distsim.mechanics.stragglers.sync_step_times_s` with this
    seed) and compute a gradient on their own ``batch_size`` examples. The PS
    averages the ``K`` fastest (their gradients are summed with the
    ``parameter_server`` schedule, in worker order) and discards the rest. The
    step takes the K-th fastest time plus ``comm_s`` seconds. ``num_backup=0``
    is plain synchronous training that waits for the slowest worker.

    Returns a :class:`~distsim.numerics.train.TrainRun` whose curve is against simulated
    seconds; ``worker_used`` marks the aggregated workers per step and
    ``replica_grad_norms`` / ``replica_batch_sizes`` are those of the ``K`` used.
    """
    lr_of = as_schedule(learning_rate)
    num_workers = REPLICAS("num_workers", num_workers)
    num_steps = Integer(1, stragglers.MAX_DRAWS // num_workers,
                        f"steps x num_workers <= {stragglers.MAX_DRAWS:,} compute times")("num_steps", num_steps)
    batch_size = _COUNT("batch_size", batch_size)
    num_backup = Integer(0, num_workers - 1, "fewer than num_workers: at least one gradient counts")(
        "num_backup", num_backup)
    compute_mean_s = Number(0, low_open=True, unit="seconds")("compute_mean_s", compute_mean_s)
    comm_s = Number(0, unit="seconds")("comm_s", comm_s)
    eval_every = _EVAL_EVERY("eval_every", eval_every)
    shuffle = FLAG("shuffle", shuffle)
    k = num_workers - num_backup
    weights, x, y, evals = prepare(model, x, y, initial_weights, seed, dtype, eval_data)
    dtype = weights[0].dtype.type
    batches = _WorkerBatches(len(x), num_workers, batch_size, shuffle, seed)
    times = compute_mean_s * stragglers.factors(
        np.random.default_rng(seed), distribution, (num_steps, num_workers), sigma
    )
    used = np.zeros((num_steps, num_workers), dtype=bool)
    fastest = np.argsort(times, axis=1, kind="stable")[:, :k]
    np.put_along_axis(used, fastest, True, axis=1)
    step_s = np.partition(times, k - 1, axis=1)[:, k - 1] + comm_s
    engine = _Replicas.build(model, k, "parameter_server", dtype, {})
    eval_every = eval_every or max(num_steps // 20, 1)
    flat = model.flatten(weights)
    rec = _Recorder(num_steps, k)

    def finish(steps: int) -> TrainRun:
        return _make_backup_run(model, flat, rec, evals, engine, used[:steps], step_s[:steps], batch_size, num_workers)

    with np.errstate(over="ignore", invalid="ignore"):
        for t in range(num_steps):
            shards = [batches(w, t) for w in np.flatnonzero(used[t])]
            out = engine.step(flat, x, y, shards, "global_batch", 1.0 / k)
            lr = lr_of(t)
            rec.add(t, out, lr)
            if not (math.isfinite(out.loss) and np.isfinite(rec.norms[t]).all()):
                rec.truncate(t + 1)
                raise TrainingDiverged(
                    f"training diverged at step {t}: loss={out.loss}, learning rate {lr:g}; stopped",
                    step=t,
                    run=finish(t + 1),
                )
            flat -= dtype(lr) * out.reduced
            if (t + 1) % eval_every == 0 or t + 1 == num_steps:
                evals.record(t + 1, flat)
    return finish(num_steps)


def _make_backup_run(model, flat, rec, evals, engine, used, step_s, batch_size, num_workers) -> TrainRun:
    steps = len(rec.loss)
    clock = np.cumsum(step_s)
    curve = Curve(step=np.arange(1, steps + 1), time_s=clock, loss=rec.loss, accuracy=rec.accuracy)
    k = engine.num_replicas
    span_s = float(clock[-1])
    result = Result(
        source="simulated",
        strategy="parameter_server_sync",
        num_replicas=num_workers,
        global_batch=k * batch_size,
        summary=Summary(
            step_time_s=float(np.median(step_s)),
            throughput_samples_per_s=steps * k * batch_size / span_s,
        ),
        step_times_s=np.asarray(step_s, dtype=float),
        curve=curve,
        meta={"model": model.name, "backup_workers": str(num_workers - k), "dtype": np.dtype(engine.dtype).name},
    )
    return train_run(model, flat, rec, engine, result, evals.curve(lambda step: clock[step - 1]), worker_used=used)
