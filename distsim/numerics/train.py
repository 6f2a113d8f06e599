"""Synchronous data-parallel training with virtual replicas, really computed.

The numerics half of the simulator: it trains a :mod:`distsim.numerics.models` model on
real MNIST the way ``MirroredStrategy`` / ``MultiWorkerMirroredStrategy`` do.

One step, for ``N`` replicas:

1. :func:`distsim.mechanics.sharding.step_assignments` says which examples each replica
   gets (uneven and empty shards included, exactly as ``tf.distribute``
   rebatches).
2. Each replica computes its per-example losses (reduction NONE) and the
   gradient of ``sum(losses) / global_batch`` (plus ``1/N`` of the
   regularization loss) on its own shard only.
3. The per-replica gradient vectors are summed by **executing the chosen
   collective's schedule** (:func:`distsim.mechanics.collectives.build_schedule`), chunk
   by chunk, through a :class:`~distsim.mechanics.reduceplan.ReducePlan`.
4. Every replica applies the same SGD update.

All replicas' forward/backward passes run in one vectorised call (one group per
replica, see :mod:`distsim.numerics.models`), so simulating 64 replicas costs about as
much as training on the global batch directly.

Training returns a :class:`TrainRun`: a :class:`distsim.results.result.Result`
(``source="simulated"``) with the loss/accuracy :class:`~distsim.results.result.Curve`,
plus the per-step records a learner inspects (per-replica gradient norms and
batch sizes, learning rates, the all-reduce schedule that was run).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass

import numpy as np

from distsim.mechanics import collectives, sharding
from distsim.numerics.models import Model
from distsim.mechanics.reduceplan import ReducePlan, compile_schedule
from distsim.results.result import Curve, Result, Summary
from distsim.scenario import ALGORITHMS, Cluster, Training, limits
from distsim.validation import (Boolean, InputError, InstanceOf, Integer, Number, OneOf, Optional, Text, check_fields,
                                checked, default_of)

#: How each replica turns its per-example losses into the loss it differentiates.
#: ``"global_batch"`` is the correct one (sum / global batch size); the others
#: are mistakes studied by :mod:`distsim.numerics.losslab`.
REDUCTIONS: tuple[str, ...] = ("global_batch", "mean_then_sum", "sum_over_batch_size")

#: Examples per forward pass in :func:`evaluate` (bounds memory for the CNN).
EVAL_CHUNK = 1000

#: A learning rate: any finite rate > 0 (a rate too large shows as :class:`TrainingDiverged`).
LEARNING_RATE = Number(0, low_open=True)
#: Replicas trained at once: the scenario's bound (one collective schedule over them).
REPLICAS = Integer(1, limits.MAX_SCHEDULE_RANKS)
_COUNT = Integer(1, limits.MAX_EXAMPLES)
_MODEL = InstanceOf(Model, "a distsim.numerics.models Model, e.g. make_model('mlp')")
#: Seeds of every random draw (as ``Training.seed``).
SEED = Integer(0, 2**63 - 1)
#: Float types the numerics train in.
DTYPES: tuple[str, ...] = ("float32", "float64")
FLAG = Boolean()
ALGORITHM = OneOf(ALGORITHMS)


def check_dtype(dtype) -> type:
    """``dtype`` (``np.float32``, ``"float64"``...) as its NumPy scalar type, if one of :data:`DTYPES`."""
    try:
        name = None if dtype is None or isinstance(dtype, bool) else np.dtype(dtype).name
    except (TypeError, ValueError):
        name = None
    if name not in DTYPES:
        raise InputError("dtype", name or dtype, "float32 or float64 (a NumPy float type, e.g. np.float32)")
    return np.dtype(name).type


class TrainingDiverged(RuntimeError):
    """The loss or a gradient became NaN or infinite; training stopped.

    Attributes:
        step: the 0-based step (or applied update) at which it happened.
        run: what was recorded up to that step (a :class:`TrainRun` or
            :class:`distsim.numerics.asynctrain.AsyncRun`), for plotting.
    """

    def __init__(self, message: str, step: int, run=None) -> None:
        super().__init__(message)
        self.step = step
        self.run = run


@dataclass(frozen=True)
class LRSchedule:
    """Learning rate per step: linear warmup, then constant.

    ``lr(t) = start_lr + (peak_lr - start_lr) * t / warmup_steps`` for
    ``t < warmup_steps``, then ``peak_lr`` (Goyal et al. 2017's gradual warmup
    when ``start_lr`` is the small-batch rate and ``peak_lr`` the scaled one).
    """

    peak_lr: float = checked(LEARNING_RATE)
    warmup_steps: int = checked(Integer(0), default=0)
    start_lr: float | None = checked(Optional(LEARNING_RATE, "peak_lr / warmup_steps"), default=None)

    def __post_init__(self) -> None:
        check_fields(self, "LRSchedule")

    def __call__(self, step: int) -> float:
        if step >= self.warmup_steps:
            return self.peak_lr
        start = self.start_lr if self.start_lr is not None else self.peak_lr / max(self.warmup_steps, 1)
        return start + (self.peak_lr - start) * step / self.warmup_steps


def as_schedule(learning_rate: float | LRSchedule) -> LRSchedule:
    """A constant rate becomes ``LRSchedule(rate)``; a schedule is returned as is."""
    if isinstance(learning_rate, LRSchedule):
        return learning_rate
    return LRSchedule(LEARNING_RATE("learning_rate", learning_rate))


@dataclass
class TrainRun:
    """A synchronous training run: the shared :class:`Result` plus per-step extras.

    Attributes:
        result: ``source="simulated"``; ``result.curve`` holds the training
            loss and accuracy of every step's global batch (computed before
            the update, like Keras' per-batch metrics).
        weights: final weights in Keras layer order.
        replica_grad_norms: ``(steps, N)`` L2 norm of each replica's gradient
            before the all-reduce (0 for a replica with an empty shard).
        replica_batch_sizes: ``(steps, N)`` examples per replica per step.
        learning_rate: ``(steps,)`` rate used at each step.
        schedule: the :class:`distsim.mechanics.collectives.Schedule` run every step.
        plan: its compiled form (depth, number of additions).
        eval_curve: loss/accuracy on the evaluation set, if one was given.
        worker_used: ``(steps, P)`` which workers' gradients were aggregated
            (sync with backup workers, :func:`distsim.numerics.asynctrain.train_backup_sync`);
            ``None`` when every replica always counts.
    """

    result: Result
    weights: list[np.ndarray]
    replica_grad_norms: np.ndarray
    replica_batch_sizes: np.ndarray
    learning_rate: np.ndarray
    schedule: object
    plan: ReducePlan
    eval_curve: Curve | None = None
    worker_used: np.ndarray | None = None

    @property
    def curve(self) -> Curve:
        return self.result.curve

    def eval_result(self) -> Result:
        """The result with the evaluation curve in place of the training one (for plots)."""
        return with_curve(self.result, self.eval_curve)


def with_curve(result: Result, curve: Curve | None) -> Result:
    """A copy of ``result`` whose ``curve`` is ``curve``."""
    if curve is None:
        raise InputError("curve", None, "a Curve; this run has no evaluation curve: pass eval_data when training")
    return dataclasses.replace(result, curve=curve)


@dataclass
class SyncStep:
    """Everything one synchronous step computed (see :func:`sync_step`).

    Attributes:
        loss: mean loss over the global batch plus regularization (before the update).
        accuracy: fraction of the global batch classified correctly (before the update).
        replica_batch_sizes: ``(N,)`` examples per replica.
        replica_grads: ``(N, P)`` each replica's flat gradient before the all-reduce.
        reduced_grad: ``(P,)`` the all-reduced gradient every replica applies.
        weights: weights after the update, Keras layer order.
    """

    loss: float
    accuracy: float
    replica_batch_sizes: np.ndarray
    replica_grads: np.ndarray
    reduced_grad: np.ndarray
    weights: list[np.ndarray]

    @property
    def replica_grad_norms(self) -> np.ndarray:
        return np.sqrt(np.einsum("rp,rp->r", self.replica_grads, self.replica_grads))


# ---------------------------------------------------------------------------
# The engine: N replicas on one flat weight vector
# ---------------------------------------------------------------------------


@dataclass
class _StepOut:
    loss: float
    correct: int
    replica_correct: np.ndarray
    sizes: np.ndarray
    replica_grads: np.ndarray
    reduced: np.ndarray


@dataclass
class _Replicas:
    """N virtual replicas of ``model`` that sum gradients with one collective."""

    model: Model
    num_replicas: int
    schedule: object
    plan: ReducePlan
    dtype: type
    _grads: np.ndarray | None = None  # reused every step: _StepOut.replica_grads is valid until the next step

    @classmethod
    def build(cls, model: Model, num_replicas: int, algorithm: str, dtype, collective_options: dict) -> "_Replicas":
        message_bytes = model.num_params * np.dtype(dtype).itemsize
        options = tuple(sorted((k, _hashable(v)) for k, v in collective_options.items()))
        schedule, plan = _compiled_schedule(algorithm, num_replicas, message_bytes, model.num_params, options)
        if not plan.ranks_agree:
            raise InputError("algorithm", algorithm, "an algorithm that leaves the same sum on every rank "
                             "(synchronous training applies one update on every replica)")
        return cls(model, num_replicas, schedule, plan, np.dtype(dtype).type)

    def step(
        self, flat: np.ndarray, x: np.ndarray, y: np.ndarray, shards: list[np.ndarray], reduction: str, reg_scale: float
    ) -> _StepOut:
        """Forward/backward on every replica's shard, then the all-reduce (no update)."""
        n = self.num_replicas
        sizes = np.array([len(s) for s in shards], dtype=np.int64)
        width = max(int(sizes.max()), 1)
        pos = np.zeros((n, width), dtype=np.int64)
        mask = np.zeros((n, width), dtype=bool)
        for r, s in enumerate(shards):
            pos[r, : len(s)] = s
            mask[r, : len(s)] = True
        total = int(sizes.sum())
        example_weight = _example_weights(reduction, mask, sizes, total, self.dtype)
        if self._grads is None:
            self._grads = self.plan.gradient_buffer(self.dtype)
        grads = self._grads
        fb = self.model.grouped_forward_backward(
            self.model.unflatten(flat), x[pos], y[pos], example_weight, out=self.model.unflatten(grads)
        )
        reg_loss = self.model.regularization_loss(self.model.unflatten(flat))
        if self.model.l2:
            grads += self.dtype(reg_scale) * self.model.regularization_grad_flat(flat)
        loss = float(np.sum(fb.loss, where=mask, dtype=np.float64)) / total + reg_loss
        replica_correct = np.sum((fb.logits.argmax(axis=-1) == y[pos]) & mask, axis=1)
        return _StepOut(loss, int(replica_correct.sum()), replica_correct, sizes, grads, self.plan.reduce(grads))


@functools.lru_cache(maxsize=32)
def _compiled_schedule(algorithm, num_replicas, message_bytes, num_params, options):
    """Build and compile a schedule once per process (a 64-rank ring has 8,064 transfers)."""
    schedule = collectives.build_schedule(algorithm, num_replicas, message_bytes, **dict(options))
    return schedule, compile_schedule(schedule, chunk_element_bounds(schedule, num_params))


def _hashable(value):
    return tuple(value) if isinstance(value, (list, tuple)) else value


def chunk_element_bounds(schedule, num_elements: int) -> np.ndarray:
    """Element offsets of the schedule's chunks within a flat vector of ``num_elements``."""
    return np.array([0] + [len(c) for c in np.array_split(np.zeros(num_elements), schedule.num_chunks)]).cumsum()


def _example_weights(reduction: str, mask: np.ndarray, sizes: np.ndarray, total: int, dtype) -> np.ndarray:
    """Weight of each example's loss in its replica's loss (0 for padding)."""
    if reduction == "global_batch":
        per_replica = np.full(len(sizes), 1.0 / total)
    elif reduction == "mean_then_sum":
        per_replica = 1.0 / np.maximum(sizes, 1)
    else:  # "sum_over_batch_size"
        per_replica = 1.0 / (np.maximum(sizes, 1) * len(sizes))
    return np.where(mask, per_replica[:, None], 0.0).astype(dtype)


# ---------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------


def check_dataset(model: Model, x: np.ndarray, y: np.ndarray, dtype, name: str | None = None):
    """Validate ``(x, y)`` once: non-empty, finite, labels in range; returns ``x`` cast to ``dtype``.

    ``name`` is the argument that held the pair (``"eval_data"``: errors at
    ``eval_data[0]`` and ``eval_data[1]``); ``None`` for arguments ``x`` and ``y``.
    """
    paths = ("x", "y") if name is None else (f"{name}[0]", f"{name}[1]")
    x = np.asarray(x)
    if x.ndim and not len(x):
        raise InputError(paths[0], None, "at least one example", problem="no examples")
    x, y = model.check_batch(x, y, paths)
    return x.astype(dtype, copy=False), y


class _Evals:
    """Evaluation-set loss and accuracy recorded during training: ``(step, loss, accuracy)``."""

    def __init__(self, model: Model, eval_data, dtype) -> None:
        self.model = model
        self.data = None if eval_data is None else check_dataset(model, eval_data[0], eval_data[1], dtype, "eval_data")
        self.records: list[tuple[int, float, float]] = []

    def record(self, step: int, flat: np.ndarray) -> None:
        if self.data is not None:
            self.records.append((step, *evaluate(self.model, self.model.unflatten(flat), *self.data)))

    def curve(self, time_of_step) -> Curve | None:
        """The records as a :class:`Curve`; ``time_of_step`` maps 1-based steps to seconds."""
        if not self.records:
            return None
        step, loss, accuracy = (np.array(c) for c in zip(*self.records))
        return Curve(step=step, time_s=time_of_step(step), loss=loss, accuracy=accuracy)


def prepare(model: Model, x, y, initial_weights, seed: int, dtype, eval_data=None):
    """Initial weights (given or seeded), validated training data cast to their dtype, and the eval set.

    Returns ``(weights, x, y, evals)``.
    """
    _MODEL("model", model)
    seed, dtype = SEED("seed", seed), check_dtype(dtype)
    weights = model.import_weights(initial_weights, dtype) if initial_weights is not None else model.init(seed, dtype)
    dtype = weights[0].dtype.type
    x, y = check_dataset(model, x, y, dtype)
    return weights, x, y, _Evals(model, eval_data, dtype)


def sync_step(
    model: Model,
    weights: list[np.ndarray],
    x: np.ndarray,
    y: np.ndarray,
    num_replicas: int,
    learning_rate: float,
    *,
    algorithm: str = "ring",
    reduction: str = "global_batch",
    scale_regularization: bool = True,
    collective_options: dict | None = None,
) -> SyncStep:
    """One synchronous SGD step on the global batch ``(x, y)`` with ``num_replicas`` replicas.

    The batch is split like ``tf.distribute`` splits one global batch
    (:func:`distsim.mechanics.sharding.replica_batch_sizes`). ``reduction`` and
    ``scale_regularization=False`` reproduce loss-scaling mistakes (see
    :mod:`distsim.numerics.losslab`). The input ``weights`` are not modified.
    """
    _MODEL("model", model)
    lr = LEARNING_RATE("learning_rate", learning_rate)
    num_replicas = REPLICAS("num_replicas", num_replicas)
    OneOf(REDUCTIONS)("reduction", reduction)
    weights = model.import_weights(weights)
    x, y = check_dataset(model, x, y, weights[0].dtype)
    engine = _Replicas.build(model, num_replicas, algorithm, weights[0].dtype, collective_options or {})
    bounds = np.concatenate([[0], np.cumsum(sharding.replica_batch_sizes(len(x), num_replicas))])
    shards = [np.arange(lo, hi) for lo, hi in zip(bounds[:-1], bounds[1:])]
    flat = model.flatten(weights)
    out = engine.step(flat, x, y, shards, reduction, 1.0 / num_replicas if scale_regularization else 1.0)
    new_flat = flat - engine.dtype(lr) * out.reduced
    return SyncStep(
        loss=out.loss,
        accuracy=out.correct / len(x),
        replica_batch_sizes=out.sizes,
        replica_grads=out.replica_grads,
        reduced_grad=out.reduced,
        weights=[w.copy() for w in model.unflatten(new_flat)],
    )


def evaluate(model: Model, weights: list[np.ndarray], x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Mean cross-entropy (without regularization) and accuracy on ``(x, y)``, in chunks."""
    total_loss, correct = 0.0, 0
    for lo in range(0, len(x), EVAL_CHUNK):
        xb, yb = x[lo : lo + EVAL_CHUNK], y[lo : lo + EVAL_CHUNK]
        logits = model.grouped_logits(weights, xb[None])[0]
        shifted = logits - logits.max(axis=-1, keepdims=True)
        log_norm = np.log(np.exp(shifted).sum(axis=-1))
        total_loss += float(np.sum(log_norm - shifted[np.arange(len(yb)), yb], dtype=np.float64))
        correct += int(np.sum(logits.argmax(axis=-1) == yb))
    return total_loss / len(x), correct / len(x)


def default_strategy_name(num_replicas: int, num_workers: int) -> str:
    """The ``tf.distribute`` strategy a sync run corresponds to."""
    if num_workers > 1:
        return "multi_worker_mirrored"
    return "one_device" if num_replicas == 1 else "mirrored"


def train_sync(
    model: Model,
    x: np.ndarray,
    y: np.ndarray,
    *,
    num_replicas: int,
    global_batch: int,
    learning_rate: float | LRSchedule = 0.1,
    epochs: int = default_of(Training, "epochs"),
    max_steps: int | None = None,
    algorithm: str = "ring",
    num_workers: int = default_of(Cluster, "num_workers"),
    policy: str = default_of(Training, "shard_policy"),
    num_files: int | None = default_of(Training, "num_files"),
    drop_remainder: bool = default_of(Training, "drop_remainder"),
    shuffle: bool = True,
    seed: int = default_of(Training, "seed"),
    initial_weights: list[np.ndarray] | None = None,
    dtype=np.float32,
    eval_data: tuple[np.ndarray, np.ndarray] | None = None,
    eval_every: int | None = None,
    step_time_s: float | None = None,
    collective_options: dict | None = None,
    strategy: str | None = None,
    scenario=None,
) -> TrainRun:
    """Train ``model`` with ``num_replicas`` synchronous virtual replicas.

    Args:
        model: a :class:`distsim.numerics.models.Model`.
        x, y: training examples ``(n, *model.input_shape)`` (or flat) and int labels.
        num_replicas: replicas in sync across all workers (``N``).
        global_batch: examples per step across all replicas.
        learning_rate: SGD rate (> 0) or an :class:`LRSchedule`.
        epochs: passes over the data; ``max_steps`` stops earlier.
        algorithm: collective for the gradient sum, see
            :func:`distsim.mechanics.collectives.build_schedule`.
        num_workers: hosts; ``num_replicas`` must be a multiple of it.
        policy, num_files, drop_remainder: sharding as in
            :func:`distsim.mechanics.sharding.step_assignments`.
        shuffle: reshuffle the examples every epoch (seeded).
        seed: seeds the initial weights (unless given) and the shuffling.
        initial_weights: Keras-ordered weights to start from.
        dtype: float32 (like TensorFlow) or float64.
        eval_data: ``(x_test, y_test)`` evaluated every ``eval_every`` steps
            (default: at the end of each epoch) and at the end.
        step_time_s: simulated seconds per step (e.g. the timing engine's
            prediction), to place the curve on a time axis; ``None`` leaves
            ``time_s`` as NaN.
        collective_options: extra options for ``build_schedule``.
        strategy: name stored in the result (default from the replica and worker counts).
        scenario: the :class:`distsim.scenario.Scenario` this run stands for,
            stored in the result (see :func:`distsim.numerics.scenario_training.train_scenario`).

    Raises:
        InputError: bad data or configuration (the message names the argument).
        TrainingDiverged: the loss or a gradient became NaN/inf; the partial
            run is attached.
    """
    schedule_lr = as_schedule(learning_rate)
    num_replicas = REPLICAS("num_replicas", num_replicas)
    global_batch = _COUNT("global_batch", global_batch)
    num_workers = Integer(1, num_replicas, "at most num_replicas")("num_workers", num_workers)
    epochs = _COUNT("epochs", epochs)
    if num_replicas % num_workers:
        raise InputError("num_replicas", num_replicas,
                         f"a multiple of num_workers={num_workers} (every worker holds as many replicas)")
    max_steps = Optional(_COUNT, "all epochs")("max_steps", max_steps)
    eval_every = Optional(_COUNT, "once per epoch")("eval_every", eval_every)
    step_time_s = Optional(Number(0, low_open=True, unit="seconds"), "no time axis")("step_time_s", step_time_s)
    ALGORITHM("algorithm", algorithm)
    drop_remainder, shuffle = FLAG("drop_remainder", drop_remainder), FLAG("shuffle", shuffle)
    strategy = Optional(Text(200), "from the replica and worker counts")("strategy", strategy)
    weights, x, y, evals = prepare(model, x, y, initial_weights, seed, dtype, eval_data)
    dtype = weights[0].dtype.type
    steps = sharding.step_assignments(
        len(x), global_batch, num_workers, num_replicas // num_workers, drop_remainder, policy, num_files
    )
    if not steps:
        raise InputError("global_batch", global_batch,
                         f"at most the {len(x)} training examples with drop_remainder=True (else no step is left)")
    options = dict(collective_options or {})
    if algorithm == "hierarchical":
        options.setdefault("ranks_per_node", num_replicas // num_workers)
    engine = _Replicas.build(model, num_replicas, algorithm, dtype, options)
    total_steps = min(max_steps or len(steps) * epochs, len(steps) * epochs)
    eval_every = eval_every or len(steps)

    flat = model.flatten(weights)
    rng = np.random.default_rng(seed)
    rec = _Recorder(total_steps, num_replicas)

    def finish() -> TrainRun:
        return _make_run(model, flat, rec, evals, engine, global_batch, num_workers, step_time_s, strategy, scenario)

    # Overflow on the way to divergence is expected: it is detected and reported below.
    with np.errstate(over="ignore", invalid="ignore"):
        for t in range(total_steps):
            if t % len(steps) == 0:
                order = rng.permutation(len(x)) if shuffle else np.arange(len(x))
            shards = [order[s] for s in steps[t % len(steps)]]
            out = engine.step(flat, x, y, shards, "global_batch", 1.0 / num_replicas)
            lr = schedule_lr(t)
            rec.add(t, out, lr)
            if not (math.isfinite(out.loss) and np.isfinite(rec.norms[t]).all()):
                rec.truncate(t + 1)
                raise TrainingDiverged(
                    f"training diverged at step {t} (epoch {t // len(steps)}): loss={out.loss}, "
                    f"learning rate {lr:g}; stopped",
                    step=t,
                    run=finish(),
                )
            flat -= dtype(lr) * out.reduced
            if (t + 1) % eval_every == 0 or t + 1 == total_steps:
                evals.record(t + 1, flat)
    return finish()


class _Recorder:
    """Per-step arrays, preallocated."""

    def __init__(self, steps: int, num_replicas: int) -> None:
        self.loss = np.full(steps, np.nan)
        self.accuracy = np.full(steps, np.nan)
        self.norms = np.zeros((steps, num_replicas))
        self.sizes = np.zeros((steps, num_replicas), dtype=np.int64)
        self.lr = np.zeros(steps)

    def add(self, t: int, out: _StepOut, lr: float) -> None:
        self.loss[t] = out.loss
        self.accuracy[t] = out.correct / max(int(out.sizes.sum()), 1)
        self.norms[t] = np.sqrt(np.einsum("rp,rp->r", out.replica_grads, out.replica_grads))
        self.sizes[t] = out.sizes
        self.lr[t] = lr

    def truncate(self, steps: int) -> None:
        for name in ("loss", "accuracy", "norms", "sizes", "lr"):
            setattr(self, name, getattr(self, name)[:steps])


def _make_run(model, flat, rec, evals, engine, global_batch, num_workers, step_time_s, strategy, scenario) -> TrainRun:
    steps = len(rec.loss)
    step_s = step_time_s if step_time_s is not None else math.nan
    curve = Curve(
        step=np.arange(1, steps + 1),
        time_s=np.arange(1, steps + 1) * step_s,
        loss=rec.loss,
        accuracy=rec.accuracy,
    )
    n = engine.num_replicas
    result = Result(
        source="simulated",
        strategy=strategy or default_strategy_name(n, num_workers),
        num_replicas=n,
        global_batch=global_batch,
        summary=Summary(step_time_s=step_s, throughput_samples_per_s=global_batch / step_s),
        step_times_s=np.full(steps, step_s),
        curve=curve,
        scenario=scenario,
        meta={"model": model.name, "algorithm": str(engine.schedule.algorithm), "dtype": np.dtype(engine.dtype).name},
    )
    return train_run(model, flat, rec, engine, result, evals.curve(lambda step: step * step_s))


def train_run(model, flat, rec, engine, result, eval_curve, worker_used=None) -> TrainRun:
    """Assemble a :class:`TrainRun` from the trainer's state and records."""
    return TrainRun(
        result=result,
        weights=[w.copy() for w in model.unflatten(flat)],
        replica_grad_norms=rec.norms,
        replica_batch_sizes=rec.sizes,
        learning_rate=rec.lr,
        schedule=engine.schedule,
        plan=engine.plan,
        eval_curve=eval_curve,
        worker_used=worker_used,
    )
