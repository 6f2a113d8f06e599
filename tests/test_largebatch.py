"""distsim.numerics.largebatch: Goyal et al.'s linear scaling and warmup, and the experiment helper."""

import math

import numpy as np
import pytest
from input_errors import raises_input

from distsim.numerics.largebatch import VARIANTS, goyal_schedule, large_batch_experiment


def test_linear_scaling_rule_and_warmup():
    s = goyal_schedule(0.1, 256, base_batch=32)
    assert s(0) == pytest.approx(0.8) and s(1000) == pytest.approx(0.8)  # k = 256 / 32 = 8
    w = goyal_schedule(0.1, 256, base_batch=32, warmup_steps=4)
    assert [w(t) for t in range(6)] == pytest.approx([0.1, 0.275, 0.45, 0.625, 0.8, 0.8])
    assert goyal_schedule(0.1, 256, scale=False)(0) == 0.1


def test_experiment_reports_every_batch_and_recipe():
    report = large_batch_experiment(
        "softmax_regression", batch_sizes=(32, 128, 512), epochs=1, base_lr=0.05, warmup_epochs=0.5,
        num_train=1024, num_test=500,
    )
    assert [(r.global_batch, r.variant) for r in report.rows] == [(b, v) for b in (32, 128, 512) for v in VARIANTS]
    assert report.batches().tolist() == [32, 128, 512]
    by = {(r.global_batch, r.variant): r for r in report.rows}
    assert by[(512, "linear")].peak_lr == pytest.approx(0.8) and by[(512, "constant")].peak_lr == 0.05
    assert by[(512, "linear_warmup")].warmup_steps == 1 and by[(128, "linear_warmup")].warmup_steps == 4
    assert by[(512, "constant")].steps == 2 and by[(32, "constant")].steps == 32  # fixed epochs, fewer steps
    # At the base batch the recipes coincide (identical rates at every step), hence identical results.
    assert by[(32, "constant")].test_accuracy == by[(32, "linear_warmup")].test_accuracy
    acc = report.accuracy("constant")
    # Same epochs, 16x fewer steps at the same rate: the big batch must learn less (the experiment's point).
    assert acc[0] > acc[-1]
    # The scaled rate recovers much of it at 512 (measured 0.48 vs 0.15 with this small subset).
    assert report.accuracy("linear")[-1] > acc[-1]
    assert all(0.0 < a <= 1.0 for a in np.concatenate([report.accuracy(v) for v in VARIANTS]))


def test_divergence_is_reported_not_hidden():
    report = large_batch_experiment(
        "softmax_regression", batch_sizes=(256,), epochs=1, base_lr=1e36, variants=("linear",),
        num_train=1024, num_test=100,
    )
    row = report.rows[0]
    assert row.diverged_at_step is not None and row.steps == row.diverged_at_step + 1
    assert math.isnan(row.test_accuracy)


@pytest.mark.parametrize(
    "kwargs, path, value, allowed",
    [
        (dict(variants=("sqrt",)), "variants[0]", "'sqrt'", f"one of {VARIANTS}"),
        (dict(variants=()), "variants", "[]", f"a non-empty selection of {VARIANTS}"),
        (dict(base_lr=0.0), "base_lr", "0.0", "a finite number > 0"),
        (dict(epochs=0), "epochs", "0", "an integer >= 1"),
        (dict(batch_sizes=()), "batch_sizes", "[]", "at least one global batch size"),
        (dict(batch_sizes=(32, 0)), "batch_sizes[1]", "0", "an integer >= 1"),
        (dict(model_name="vgg"), "model_name", "'vgg'", "one of ('mlp', 'small_cnn', 'softmax_regression')"),
        (dict(warmup_epochs=-1.0), "warmup_epochs", "-1.0", "a finite number >= 0 (epochs)"),
    ],
)
def test_bad_arguments(kwargs, path, value, allowed):
    with raises_input(path, value, allowed):
        large_batch_experiment(**{"num_train": 64, "num_test": 10, "epochs": 1, **kwargs})


def test_bad_schedule_arguments():
    with raises_input("base_lr", "-0.1", "a finite number > 0"):
        goyal_schedule(-0.1, 256)
    with raises_input("global_batch", "0", "an integer >= 1"):
        goyal_schedule(0.1, 0)
    with raises_input("warmup_steps", "-2", "an integer >= 0"):
        goyal_schedule(0.1, 256, warmup_steps=-2)
