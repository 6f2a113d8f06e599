"""Loss-scaling lab: run the same synchronous step the wrong way and measure the damage.

In a custom training loop under ``tf.distribute`` each replica computes a loss
on its shard and the gradients are **summed** across replicas. The loss must
therefore be ``sum(per-example losses) / global_batch`` (plus
``regularization / num_replicas``). This lab trains the correct way and, on the
very same batches, each common mistake:

``mean_then_sum``
    Each replica averages over its *own* batch (``reduce_mean``); the sum
    across replicas makes the gradient ``N`` times too large (exactly ``N``
    with equal shards).
``sum_over_batch_size``
    Keras' ``SUM_OVER_BATCH_SIZE`` per replica followed by Keras' division by
    ``num_replicas`` (also what ``tf.nn.compute_average_loss`` does without
    ``global_batch_size``: it divides by the local batch size times ``N``).
    Exact with equal shards, biased on uneven ones: an example on a small shard
    weighs more than one on a large shard.
``unscaled_regularization``
    The regularization loss added in full on every replica instead of
    ``tf.nn.scale_regularization_loss``: its gradient is ``N`` times too large.
``metric_mean_of_replicas``
    The update is right, but a metric (here accuracy) is averaged per replica
    and then across replicas (``strategy.reduce(MEAN, per_replica_mean)``):
    wrong on uneven shards, and NaN when a replica's shard is empty.

:func:`loss_scaling_lab` returns numbers (update-norm ratios, divergence after
``k`` steps, metric errors); notebooks plot them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from distsim.mechanics import sharding
from distsim.numerics.models import Model
from distsim.numerics.train import ALGORITHM, FLAG, LEARNING_RATE, REPLICAS, _Replicas, prepare
from distsim.scenario import limits
from distsim.validation import InputError, Integer, OneOf

#: Mistake name -> (replica loss reduction, whether regularization is scaled by
#: 1/N, one-line description).
MISTAKES: dict[str, tuple[str, bool, str]] = {
    "mean_then_sum": ("mean_then_sum", True, "mean over the local batch, then summed across replicas"),
    "sum_over_batch_size": (
        "sum_over_batch_size", True,
        "SUM_OVER_BATCH_SIZE per replica, divided by num_replicas (compute_average_loss without global_batch_size)",
    ),
    "unscaled_regularization": ("global_batch", False, "regularization loss not scaled by 1/num_replicas"),
    "metric_mean_of_replicas": ("global_batch", True, "accuracy averaged per replica, then across replicas"),
}


@dataclass
class MistakeReport:
    """How far one mistake moves training away from the correct run.

    Attributes:
        name: a key of :data:`MISTAKES`.
        description: what was done wrong.
        update_norm_ratio: ``|update_wrong| / |update_correct|`` at the first
            step (same starting weights, same batch). 1 means harmless.
        update_cosine: cosine between the two first-step updates (1 = same direction).
        divergence: ``(k,)`` after each step t, ``|w_wrong - w_correct| / |w_correct - w_0|``.
        loss_correct: ``(k,)`` training loss of the correct run at each step.
        loss_wrong: ``(k,)`` the same for the wrong run.
        metric_correct: ``(k,)`` global accuracy per step (metric mistake only).
        metric_wrong: ``(k,)`` mean of per-replica accuracies; NaN at steps
            where a replica had no examples (metric mistake only).
    """

    name: str
    description: str
    update_norm_ratio: float
    update_cosine: float
    divergence: np.ndarray
    loss_correct: np.ndarray
    loss_wrong: np.ndarray
    metric_correct: np.ndarray | None = None
    metric_wrong: np.ndarray | None = None

    @property
    def final_divergence(self) -> float:
        return float(self.divergence[-1])

    @property
    def max_metric_error(self) -> float | None:
        """Largest ``|metric_wrong - metric_correct|`` over steps where it is defined."""
        if self.metric_wrong is None:
            return None
        err = np.abs(self.metric_wrong - self.metric_correct)
        return float(np.nanmax(err)) if np.isfinite(err).any() else float("nan")


@dataclass
class LossLabReport:
    """All mistakes measured on one configuration.

    Attributes:
        num_replicas: N.
        global_batch: examples per step.
        replica_batch_sizes: ``(k, N)`` shard sizes per step.
        learning_rate: SGD rate.
        l2: the model's L2 coefficient (the regularization mistake needs > 0).
        mistakes: one :class:`MistakeReport` per mistake, in request order.
    """

    num_replicas: int
    global_batch: int
    replica_batch_sizes: np.ndarray
    learning_rate: float
    l2: float
    mistakes: list[MistakeReport]

    def __getitem__(self, name: str) -> MistakeReport:
        for m in self.mistakes:
            if m.name == name:
                return m
        raise KeyError(f"no mistake {name!r} in this report; have {[m.name for m in self.mistakes]}")


def loss_scaling_lab(
    model: Model,
    x: np.ndarray,
    y: np.ndarray,
    *,
    num_replicas: int,
    global_batch: int,
    learning_rate: float = 0.1,
    steps: int = 10,
    mistakes=tuple(MISTAKES),
    algorithm: str = "ring",
    shuffle: bool = False,
    seed: int = 0,
    initial_weights: list[np.ndarray] | None = None,
    dtype=np.float64,
) -> LossLabReport:
    """Train ``steps`` synchronous steps correctly and with each mistake, on the same batches.

    Args:
        model: a :mod:`distsim.numerics.models` model; give it ``l2 > 0`` to see the
            regularization mistake (with ``l2 = 0`` it is harmless by construction).
        x, y: training data; steps take consecutive global batches (or a seeded
            shuffle with ``shuffle=True``), split like ``tf.distribute`` does.
        num_replicas, global_batch: N and the global batch size; a global batch
            that N does not divide gives uneven shards.
        learning_rate: SGD rate (> 0).
        steps: k, the number of steps compared.
        mistakes: names from :data:`MISTAKES`.
        algorithm: collective used for the gradient sum.
        dtype: float64 by default so that ratios are exact to ~1e-15.

    Raises:
        InputError: unknown mistake, bad configuration or bad data.
    """
    lr = LEARNING_RATE("learning_rate", learning_rate)
    num_replicas = REPLICAS("num_replicas", num_replicas)
    global_batch = Integer(1, limits.MAX_EXAMPLES)("global_batch", global_batch)
    steps = Integer(1, limits.MAX_STEPS)("steps", steps)
    ALGORITHM("algorithm", algorithm)
    shuffle = FLAG("shuffle", shuffle)
    if not isinstance(mistakes, (list, tuple)):
        raise InputError("mistakes", mistakes, f"a list of names from {tuple(MISTAKES)}")
    mistakes = [OneOf(tuple(MISTAKES))(f"mistakes[{i}]", m) for i, m in enumerate(mistakes)]
    if not mistakes:
        raise InputError("mistakes", mistakes, f"a non-empty selection of {tuple(MISTAKES)}")
    w0, x, y, _ = prepare(model, x, y, initial_weights, seed, dtype)
    dtype = w0[0].dtype.type
    epoch = sharding.step_assignments(len(x), global_batch, 1, num_replicas)
    rng = np.random.default_rng(seed)
    shards_per_step = []
    for t in range(steps):
        if t % len(epoch) == 0:
            order = rng.permutation(len(x)) if shuffle else np.arange(len(x))
        shards_per_step.append([order[s] for s in epoch[t % len(epoch)]])
    engine = _Replicas.build(model, num_replicas, algorithm, dtype, {})
    start = model.flatten(w0)
    correct = _run(engine, start, x, y, shards_per_step, "global_batch", 1.0 / num_replicas, lr)
    reports = []
    for name in mistakes:
        reduction, scale_reg, description = MISTAKES[name]
        wrong = _run(engine, start, x, y, shards_per_step, reduction, 1.0 / num_replicas if scale_reg else 1.0, lr)
        d_right, d_wrong = correct.weights[1] - start, wrong.weights[1] - start
        moved = np.linalg.norm(correct.weights[1:] - start, axis=1)
        report = MistakeReport(
            name=name,
            description=description,
            update_norm_ratio=float(np.linalg.norm(d_wrong) / np.linalg.norm(d_right)),
            update_cosine=float(d_wrong @ d_right / (np.linalg.norm(d_wrong) * np.linalg.norm(d_right))),
            divergence=np.linalg.norm(wrong.weights[1:] - correct.weights[1:], axis=1) / moved,
            loss_correct=correct.loss,
            loss_wrong=wrong.loss,
        )
        if name == "metric_mean_of_replicas":
            report.metric_correct = correct.accuracy
            report.metric_wrong = correct.replica_mean_accuracy
        reports.append(report)
    return LossLabReport(
        num_replicas=num_replicas,
        global_batch=global_batch,
        replica_batch_sizes=np.array([[len(s) for s in shards] for shards in shards_per_step]),
        learning_rate=lr,
        l2=model.l2,
        mistakes=reports,
    )


@dataclass
class _Trajectory:
    weights: np.ndarray  # (k + 1, P): start, then after each step
    loss: np.ndarray
    accuracy: np.ndarray
    replica_mean_accuracy: np.ndarray


def _run(engine, start, x, y, shards_per_step, reduction, reg_scale, lr) -> _Trajectory:
    k = len(shards_per_step)
    weights = np.empty((k + 1, len(start)), dtype=start.dtype)
    weights[0] = start
    loss, accuracy, replica_mean = np.empty(k), np.empty(k), np.empty(k)
    for t, shards in enumerate(shards_per_step):
        out = engine.step(weights[t], x, y, shards, reduction, reg_scale)
        weights[t + 1] = weights[t] - start.dtype.type(lr) * out.reduced
        loss[t] = out.loss
        accuracy[t] = out.correct / out.sizes.sum()
        with np.errstate(invalid="ignore", divide="ignore"):
            replica_mean[t] = np.mean(out.replica_correct / out.sizes)
    return _Trajectory(weights, loss, accuracy, replica_mean)
