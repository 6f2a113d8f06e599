"""Large global batches: linear learning-rate scaling and gradual warmup (Goyal et al. 2017).

More replicas usually means a larger global batch, hence fewer steps per epoch.
Goyal et al. ("Accurate, Large Minibatch SGD", 2017) keep accuracy by

* the **linear scaling rule**: multiply the learning rate by ``k`` when the
  batch grows ``k``-fold (``lr = base_lr * global_batch / base_batch``);
* **gradual warmup**: ramp the rate linearly from ``base_lr`` to the scaled
  rate over the first epochs, because the scaled rate is too large while the
  weights still change fast.

:func:`large_batch_experiment` trains MNIST at global batches 32 ... 8192 with
no scaling, with linear scaling, and with linear scaling plus warmup, for a
fixed number of epochs, and reports test accuracy. Runs that diverge are
reported with the step at which they did, not hidden.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from distsim.mechanics import sharding
from distsim.datasets.mnist import mnist_subset
from distsim.numerics.models import MODELS, make_model
from distsim.numerics.train import SEED, LEARNING_RATE, LRSchedule, TrainingDiverged, check_dtype, train_sync
from distsim.scenario import limits
from distsim.validation import InputError, Integer, Number, OneOf, Optional

#: Learning-rate recipes compared by :func:`large_batch_experiment`.
VARIANTS: tuple[str, ...] = ("constant", "linear", "linear_warmup")

DEFAULT_BATCHES: tuple[int, ...] = (32, 64, 128, 256, 512, 1024, 2048, 4096, 8192)

_COUNT = Integer(1, limits.MAX_EXAMPLES)


def goyal_schedule(
    base_lr: float, global_batch: int, base_batch: int = 32, *, scale: bool = True, warmup_steps: int = 0
) -> LRSchedule:
    """Learning rate for ``global_batch``: linearly scaled from ``base_lr`` at
    ``base_batch``, optionally warmed up from ``base_lr`` over ``warmup_steps``."""
    base_lr = LEARNING_RATE("base_lr", base_lr)
    global_batch = _COUNT("global_batch", global_batch)
    base_batch = _COUNT("base_batch", base_batch)
    warmup_steps = Integer(0)("warmup_steps", warmup_steps)
    peak = base_lr * global_batch / base_batch if scale else base_lr
    return LRSchedule(peak, warmup_steps=warmup_steps, start_lr=base_lr if warmup_steps else None)


@dataclass
class LargeBatchRow:
    """One training run of the experiment.

    Attributes:
        global_batch: examples per step.
        variant: one of :data:`VARIANTS`.
        peak_lr: learning rate after warmup.
        warmup_steps: steps of linear warmup (0 for none).
        steps: steps trained (fewer if it diverged).
        test_accuracy: accuracy on the test set after training (NaN if diverged).
        test_loss: mean test cross-entropy after training (NaN if diverged).
        final_train_loss: training loss of the last step.
        diverged_at_step: step at which the loss became NaN/inf, else None.
    """

    global_batch: int
    variant: str
    peak_lr: float
    warmup_steps: int
    steps: int
    test_accuracy: float
    test_loss: float
    final_train_loss: float
    diverged_at_step: int | None


@dataclass
class LargeBatchReport:
    """Accuracy after a fixed number of epochs for each batch size and recipe.

    Attributes:
        model: model name.
        epochs: epochs per run.
        base_lr: learning rate at ``base_batch``.
        base_batch: batch size where ``base_lr`` is right.
        warmup_epochs: epochs of warmup in the ``linear_warmup`` variant.
        num_train: training examples.
        rows: one per (batch, variant), batch-major.
    """

    model: str
    epochs: int
    base_lr: float
    base_batch: int
    warmup_epochs: float
    num_train: int
    rows: list[LargeBatchRow]

    def batches(self) -> np.ndarray:
        return np.array(sorted({r.global_batch for r in self.rows}))

    def accuracy(self, variant: str) -> np.ndarray:
        """Test accuracy per batch size (in :meth:`batches` order) for one recipe."""
        OneOf(tuple(sorted({r.variant for r in self.rows})))("variant", variant)  # the variants this report ran
        by_batch = {r.global_batch: r.test_accuracy for r in self.rows if r.variant == variant}
        return np.array([by_batch[b] for b in self.batches()])


def large_batch_experiment(
    model_name: str = "softmax_regression",
    batch_sizes=DEFAULT_BATCHES,
    *,
    epochs: int = 2,
    base_lr: float = 0.05,
    base_batch: int = 32,
    warmup_epochs: float = 1.0,
    variants=VARIANTS,
    num_train: int | None = None,
    num_test: int | None = None,
    num_replicas: int = 1,
    seed: int = 0,
    dtype=np.float32,
) -> LargeBatchReport:
    """Train MNIST at each global batch with each learning-rate recipe; report test accuracy.

    Every run starts from the same seeded weights and sees the same number of
    epochs, so larger batches take fewer steps. ``num_replicas`` only changes
    how each step is computed, not the result (sync training with N replicas
    equals one device on the global batch, see ``tests/test_train.py``).

    Args:
        model_name: a :data:`distsim.numerics.models.MODELS` name.
        batch_sizes: global batch sizes.
        epochs: epochs per run.
        base_lr: learning rate that suits ``base_batch``.
        base_batch: reference batch of the linear scaling rule.
        warmup_epochs: length of the warmup in the ``linear_warmup`` recipe.
        variants: recipes from :data:`VARIANTS`.
        num_train, num_test: MNIST subset sizes (default: all 60,000 / 10,000).
        num_replicas: virtual replicas per step.
        seed: weights and shuffling.
        dtype: float32 or float64.
    """
    epochs = _COUNT("epochs", epochs)
    LEARNING_RATE("base_lr", base_lr)
    OneOf(tuple(sorted(MODELS)))("model_name", model_name)
    base_batch = _COUNT("base_batch", base_batch)
    num_train = Optional(Integer(1, 60_000), "all 60,000")("num_train", num_train)
    num_test = Optional(Integer(1, 10_000), "all 10,000")("num_test", num_test)
    seed, dtype = SEED("seed", seed), check_dtype(dtype)
    for name, value in (("variants", variants), ("batch_sizes", batch_sizes)):
        if not isinstance(value, (list, tuple)):
            raise InputError(name, value, "a list (or tuple)")
    variants = [OneOf(VARIANTS)(f"variants[{i}]", v) for i, v in enumerate(variants)]
    if not variants:
        raise InputError("variants", variants, f"a non-empty selection of {VARIANTS}")
    warmup_epochs = Number(0, unit="epochs")("warmup_epochs", warmup_epochs)
    batch_sizes = [_COUNT(f"batch_sizes[{i}]", b) for i, b in enumerate(batch_sizes)]
    if not batch_sizes:
        raise InputError("batch_sizes", batch_sizes, "at least one global batch size")
    data = mnist_subset(num_train, num_test, dtype=dtype)
    model = make_model(model_name)
    weights = model.init(seed, dtype)
    rows = []
    for batch in batch_sizes:
        steps_per_epoch = sharding.steps_per_epoch(len(data.x_train), batch)
        warmup = int(round(warmup_epochs * steps_per_epoch))
        done: dict[tuple[float, float], LargeBatchRow] = {}
        for variant in variants:
            lr = goyal_schedule(
                base_lr, batch, base_batch, scale=variant != "constant",
                warmup_steps=warmup if variant == "linear_warmup" else 0,
            )
            # At base_batch all recipes give the same rates at every step: train once.
            rates = tuple(lr(t) for t in range(warmup + 1))
            if rates not in done:
                done[rates] = _run_one(model, data, weights, batch, variant, lr, epochs, num_replicas, seed)
            rows.append(dataclasses.replace(done[rates], variant=variant, warmup_steps=lr.warmup_steps))
    return LargeBatchReport(
        model=model_name, epochs=epochs, base_lr=base_lr, base_batch=base_batch,
        warmup_epochs=warmup_epochs, num_train=len(data.x_train), rows=rows,
    )


def _run_one(model, data, weights, batch, variant, lr, epochs, num_replicas, seed) -> LargeBatchRow:
    try:
        run = train_sync(
            model, data.x_train, data.y_train, num_replicas=num_replicas, global_batch=batch,
            learning_rate=lr, epochs=epochs, seed=seed, initial_weights=weights,
            eval_data=(data.x_test, data.y_test), eval_every=10**9,
        )
    except TrainingDiverged as err:
        return LargeBatchRow(
            global_batch=batch, variant=variant, peak_lr=lr.peak_lr, warmup_steps=lr.warmup_steps,
            steps=err.step + 1, test_accuracy=math.nan, test_loss=math.nan,
            final_train_loss=float(err.run.curve.loss[-1]), diverged_at_step=err.step,
        )
    return LargeBatchRow(
        global_batch=batch, variant=variant, peak_lr=lr.peak_lr, warmup_steps=lr.warmup_steps,
        steps=len(run.curve.loss), test_accuracy=float(run.eval_curve.accuracy[-1]),
        test_loss=float(run.eval_curve.loss[-1]), final_train_loss=float(run.curve.loss[-1]),
        diverged_at_step=None,
    )
