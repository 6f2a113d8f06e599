"""distsim.numerics.train: N virtual replicas train exactly like one device on the global batch."""

import math

import numpy as np
import pytest
from input_errors import raises_input

from distsim.mechanics import sharding
from distsim.datasets.mnist import mnist_subset
from distsim.numerics.models import MLP, SmallCNN, SoftmaxRegression
from distsim.results.result import Result
from distsim.scenario.limits import MAX_SCHEDULE_RANKS as MAX_REPLICAS
from distsim.numerics.train import LRSchedule, TrainingDiverged, evaluate, sync_step, train_sync


@pytest.fixture(scope="module")
def mnist64():
    return mnist_subset(250, 100, dtype=np.float64)


@pytest.fixture(scope="module")
def mnist32():
    return mnist_subset(250, 100, dtype=np.float32)


def reference_sgd(model, weights, x, y, global_batch, lr, steps):
    """Plain single-device SGD on consecutive global batches (no sharding, no collectives)."""
    weights = [w.copy() for w in weights]
    losses = []
    for s in range(steps):
        lo = (s * global_batch) % len(x)
        xb, yb = x[lo : lo + global_batch], y[lo : lo + global_batch]
        loss, grads = model.loss_and_grads(weights, xb, yb)
        losses.append(loss)
        weights = [w - lr * g for w, g in zip(weights, grads)]
    return weights, np.array(losses)


def max_rel_diff(model, got, ref, start):
    """Largest weight difference relative to the largest weight change of the reference."""
    got, ref, start = model.flatten(got), model.flatten(ref), model.flatten(start)
    return np.abs(got - ref).max() / np.abs(ref - start).max()


MODELS = [SoftmaxRegression(l2=1e-3), MLP(hidden=32), SmallCNN(filters=4)]


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.name)
@pytest.mark.parametrize("num_replicas", [1, 2, 3, 4, 8, 64])
def test_n_replicas_equal_single_device_float64(mnist64, model, num_replicas):
    # 250 examples, global batch 100: steps of 100, 100 and a partial 50. For 3 replicas 100 splits
    # [34, 34, 32]; for 64 replicas [2]*50 + [0]*14, and the partial batch leaves 14 replicas empty.
    d = mnist64
    w0 = model.init(7, np.float64)
    run = train_sync(
        model, d.x_train, d.y_train, num_replicas=num_replicas, global_batch=100, learning_rate=0.5,
        epochs=1, shuffle=False, initial_weights=w0, dtype=np.float64,
    )
    ref_w, ref_loss = reference_sgd(model, w0, d.x_train, d.y_train, 100, 0.5, 3)
    # float64: the only difference is the order of the additions (per-replica partial sums, then the
    # ring/tree order), worth a few ulps (1e-16 relative) per step. 1e-10 relative to the size of the
    # update leaves a 10^5 margin and still catches any weighting error (e.g. 1/b instead of 1/G is O(1)).
    assert max_rel_diff(model, run.weights, ref_w, w0) < 1e-10
    np.testing.assert_allclose(run.curve.loss, ref_loss, rtol=1e-10)
    assert run.replica_batch_sizes.sum(axis=1).tolist() == [100, 100, 50]
    assert run.replica_batch_sizes[0].tolist() == sharding.replica_batch_sizes(100, num_replicas)


@pytest.mark.parametrize("num_replicas", [2, 3, 8, 64])
def test_n_replicas_equal_single_device_float32(mnist32, num_replicas):
    # float32 (what TensorFlow uses): summation order changes results at eps32 = 6e-8 relative per
    # addition. With gradients summed over up to 100 examples and 64 replicas, and 3 steps, we measured
    # at most 5.3e-7 relative to the update here. The documented float32 tolerance is 1e-5 (20x margin);
    # a real mistake (wrong shard weighting, a dropped replica) gives O(1e-2..1).
    model = MLP(hidden=32)
    d = mnist32
    w0 = model.init(3, np.float32)
    run = train_sync(
        model, d.x_train, d.y_train, num_replicas=num_replicas, global_batch=100, learning_rate=0.5,
        shuffle=False, initial_weights=w0,
    )
    single = train_sync(
        model, d.x_train, d.y_train, num_replicas=1, global_batch=100, learning_rate=0.5,
        shuffle=False, initial_weights=w0,
    )
    assert run.weights[0].dtype == np.float32
    assert max_rel_diff(model, run.weights, single.weights, w0) < 1e-5


@pytest.mark.parametrize("algorithm", ["ring", "tree", "halving_doubling", "hierarchical", "torus2d",
                                       "reduce_to_one", "parameter_server"])
def test_every_collective_gives_the_global_batch_gradient(mnist64, algorithm):
    model = SoftmaxRegression()
    d = mnist64
    w0 = model.init(1, np.float64)
    options = {"ranks_per_node": 4} if algorithm == "hierarchical" else {}
    step = sync_step(model, w0, d.x_train[:90], d.y_train[:90], 8, 0.1, algorithm=algorithm,
                     collective_options=options)
    _, ref_grads = model.loss_and_grads(w0, d.x_train[:90], d.y_train[:90])
    # float64, different addition order only: 1e-12 relative.
    np.testing.assert_allclose(step.reduced_grad, model.flatten(ref_grads), rtol=0,
                               atol=1e-12 * np.abs(model.flatten(ref_grads)).max())
    assert step.replica_batch_sizes.tolist() == [12] * 7 + [6]


def test_sync_step_replica_gradients_are_their_shards(mnist64):
    model = MLP(hidden=16)
    d = mnist64
    w0 = model.init(2, np.float64)
    x, y = d.x_train[:10], d.y_train[:10]
    step = sync_step(model, w0, x, y, num_replicas=4, learning_rate=0.1)
    assert step.replica_batch_sizes.tolist() == [3, 3, 3, 1]
    start = 0
    for r, size in enumerate([3, 3, 3, 1]):
        mean_loss, grads = model.loss_and_grads(w0, x[start : start + size], y[start : start + size])
        # Each replica differentiates sum(losses) / GLOBAL batch = local mean * size / 10.
        np.testing.assert_allclose(step.replica_grads[r], model.flatten(grads) * size / 10, rtol=1e-12, atol=1e-15)
        start += size
    np.testing.assert_allclose(step.replica_grad_norms, np.linalg.norm(step.replica_grads, axis=1))
    new = model.flatten(step.weights)
    np.testing.assert_allclose(new, model.flatten(w0) - 0.1 * step.reduced_grad, rtol=1e-15)


def test_multi_worker_data_policy_matches_single_device(mnist64):
    model = SoftmaxRegression()
    d = mnist64
    w0 = model.init(0, np.float64)
    multi = train_sync(model, d.x_train, d.y_train, num_replicas=6, num_workers=2, global_batch=50,
                       learning_rate=0.3, shuffle=False, initial_weights=w0, dtype=np.float64,
                       algorithm="hierarchical")
    ref_w, _ = reference_sgd(model, w0, d.x_train, d.y_train, 50, 0.3, 5)
    assert multi.result.strategy == "multi_worker_mirrored"
    assert max_rel_diff(model, multi.weights, ref_w, w0) < 1e-10  # same reasoning as the float64 test


def test_shuffled_runs_are_seeded_and_replica_count_independent(mnist64):
    model = SoftmaxRegression()
    d = mnist64
    kw = dict(global_batch=64, learning_rate=0.2, epochs=2, dtype=np.float64, seed=5)
    a = train_sync(model, d.x_train, d.y_train, num_replicas=4, **kw)
    b = train_sync(model, d.x_train, d.y_train, num_replicas=4, **kw)
    c = train_sync(model, d.x_train, d.y_train, num_replicas=1, **kw)
    other = train_sync(model, d.x_train, d.y_train, num_replicas=4, **{**kw, "seed": 6})
    np.testing.assert_array_equal(a.curve.loss, b.curve.loss)
    np.testing.assert_allclose(a.curve.loss, c.curve.loss, rtol=1e-12)
    assert not np.allclose(a.curve.loss, other.curve.loss)


def test_train_run_records_and_result(mnist32, tmp_path):
    d = mnist32
    model = MLP(hidden=16)
    run = train_sync(model, d.x_train, d.y_train, num_replicas=4, global_batch=32, epochs=2,
                     learning_rate=0.2, eval_data=(d.x_test, d.y_test), eval_every=4, step_time_s=0.05)
    steps = 2 * math.ceil(250 / 32)
    assert run.replica_grad_norms.shape == (steps, 4) and (run.replica_grad_norms > 0).all()
    assert run.schedule.algorithm == "ring" and run.plan.depth == 3
    r = run.result
    assert isinstance(r, Result) and r.source == "simulated" and r.strategy == "mirrored"
    np.testing.assert_allclose(r.curve.time_s, 0.05 * np.arange(1, steps + 1))
    assert r.summary.throughput_samples_per_s == pytest.approx(32 / 0.05)
    assert run.eval_curve.step.tolist() == [4, 8, 12, 16]
    assert run.curve.loss[-4:].mean() < run.curve.loss[:4].mean()  # it learns
    assert run.eval_curve.accuracy[-1] > 0.5  # 16 steps of SGD on MNIST beat chance (0.1) easily
    back = Result.load(r.save(tmp_path / "r.json"))
    np.testing.assert_array_equal(back.curve.loss, r.curve.loss)
    loss, acc = evaluate(model, run.weights, d.x_test, d.y_test)
    assert loss == pytest.approx(run.eval_curve.loss[-1]) and acc == run.eval_curve.accuracy[-1]


def test_warmup_schedule():
    s = LRSchedule(peak_lr=1.0, warmup_steps=4, start_lr=0.2)
    assert [s(t) for t in range(6)] == pytest.approx([0.2, 0.4, 0.6, 0.8, 1.0, 1.0])
    assert LRSchedule(0.5)(0) == 0.5


@pytest.mark.parametrize(
    "kwargs, path, value, allowed",
    [
        (dict(peak_lr=0.0), "peak_lr", "0.0", "a finite number > 0"),
        (dict(peak_lr="0.1"), "peak_lr", "'0.1'", "a finite number > 0"),
        (dict(peak_lr=1.0, warmup_steps=-1), "warmup_steps", "-1", "an integer >= 0"),
        (dict(peak_lr=1.0, warmup_steps=2.0), "warmup_steps", "2.0", "an integer >= 0"),
        (dict(peak_lr=1.0, start_lr=math.inf), "start_lr", "inf", "a finite number > 0, or null (peak_lr / warmup_steps)"),
    ],
)
def test_bad_schedule_raises(kwargs, path, value, allowed):
    with raises_input(f"LRSchedule.{path}", value, allowed):
        LRSchedule(**kwargs)


def test_divergence_stops_with_step_number(mnist32):
    d = mnist32
    with pytest.raises(TrainingDiverged, match="diverged at step") as info:
        train_sync(SoftmaxRegression(), d.x_train * 1e4, d.y_train, num_replicas=2, global_batch=50,
                   learning_rate=1e30, epochs=3)
    err = info.value
    assert 0 < err.step < 15
    assert len(err.run.curve.loss) == err.step + 1  # everything up to and including the bad step
    assert not np.isfinite(err.run.curve.loss[-1]) or not np.isfinite(err.run.replica_grad_norms[-1]).all()
    assert np.isfinite(err.run.curve.loss[:-1]).all()


LR = "a finite number > 0"


@pytest.mark.parametrize(
    "kwargs, path, value, allowed",
    [
        (dict(learning_rate=0.0), "learning_rate", "0.0", LR),
        (dict(learning_rate=-1), "learning_rate", "-1", LR),
        (dict(learning_rate=float("nan")), "learning_rate", "nan", LR),
        (dict(num_replicas=0), "num_replicas", "0", f"an integer >= 1 and <= {MAX_REPLICAS:,}"),
        (dict(num_replicas=10**6), "num_replicas", "1000000", f"an integer >= 1 and <= {MAX_REPLICAS:,}"),
        (dict(global_batch=0), "global_batch", "0", "an integer >= 1"),
        (dict(num_replicas=3, num_workers=2), "num_replicas", "3",
         "a multiple of num_workers=2 (every worker holds as many replicas)"),
        (dict(num_workers=4), "num_workers", "4", "an integer >= 1 and <= 2 (at most num_replicas)"),
        (dict(epochs=0), "epochs", "0", "an integer >= 1"),
        (dict(max_steps=0), "max_steps", "0", "an integer >= 1 and <= 1,000,000,000,000, or null (all epochs)"),
        (dict(eval_every=0), "eval_every", "0", "an integer >= 1 and <= 1,000,000,000,000, or null (once per epoch)"),
        (dict(step_time_s=-1.0), "step_time_s", "-1.0", "a finite number > 0 (seconds), or null (no time axis)"),
        (dict(policy="FOO"), "policy", "'FOO'", "one of ('DATA', 'FILE', 'OFF')"),
        (dict(dtype=np.int32), "dtype", "'int32'", "float32 or float64"),
        (dict(global_batch=1000, drop_remainder=True), "global_batch", "1000",
         "at most the 250 training examples with drop_remainder=True (else no step is left)"),
    ],
)
def test_bad_configuration_raises(mnist32, kwargs, path, value, allowed):
    d = mnist32
    base = dict(num_replicas=2, global_batch=10, learning_rate=0.1)
    with raises_input(path, value, allowed):
        train_sync(SoftmaxRegression(), d.x_train, d.y_train, **{**base, **kwargs})


def test_unknown_algorithm_is_rejected(mnist32):
    # The collective's own check (distsim.mechanics.collectives, rewritten separately).
    with pytest.raises(ValueError, match="algorithm='butterfly'; allowed: "):
        train_sync(SoftmaxRegression(), mnist32.x_train, mnist32.y_train, num_replicas=2, global_batch=10,
                   algorithm="butterfly")


@pytest.mark.parametrize(
    "x, y, path, value, allowed, problem",
    [
        (np.zeros((0, 28, 28), np.float32), np.zeros(0, int), "x", None, "at least one example", "no examples"),
        (np.zeros((5, 28, 28), np.float32), np.zeros(4, int), "len(y)", "4", "len(x)=5: one label per example", None),
        (np.zeros((5, 28, 29), np.float32), np.zeros(5, int), "x.shape", "(5, 28, 29)", "(batch, *(28, 28))", None),
        (np.zeros((5, 28, 28), np.float32), np.array([0, 1, 2, 3, 12]), "y[4]", "12",
         "an integer class from 0 to 9", None),
        (np.full((5, 28, 28), np.nan, np.float32), np.zeros(5, int), "x", None, "finite values",
         "NaN or inf, first at index (0, 0, 0)"),
    ],
)
def test_bad_data_raises(x, y, path, value, allowed, problem):
    with raises_input(path, value, allowed, problem=problem):
        train_sync(SoftmaxRegression(), x, y, num_replicas=2, global_batch=4)
    if len(x):
        with raises_input(path, value, allowed, problem=problem):
            sync_step(SoftmaxRegression(), SoftmaxRegression().init(0), x, y, 2, 0.1)


def test_sync_step_checks_its_arguments(mnist32):
    d, m = mnist32, SoftmaxRegression()
    with raises_input("reduction", "'mean'", "one of ('global_batch', 'mean_then_sum', 'sum_over_batch_size')"):
        sync_step(m, m.init(0), d.x_train, d.y_train, 2, 0.1, reduction="mean")
    with raises_input("num_replicas", "0", "an integer >= 1"):
        sync_step(m, m.init(0), d.x_train, d.y_train, 0, 0.1)
    with raises_input("model", "'mlp'", "a distsim.numerics.models Model, e.g. make_model('mlp')"):
        sync_step("mlp", m.init(0), d.x_train, d.y_train, 2, 0.1)
    with raises_input("model", "'mlp'", "a distsim.numerics.models Model"):
        train_sync("mlp", d.x_train, d.y_train, num_replicas=2, global_batch=4)


def test_bad_eval_data_raises(mnist32):
    d = mnist32
    with raises_input("eval_data[0]", None, "at least one example", problem="no examples"):
        train_sync(SoftmaxRegression(), d.x_train, d.y_train, num_replicas=2, global_batch=50,
                   eval_data=(d.x_test[:0], d.y_test[:0]))
    with raises_input("eval_data[1][0]", "10", "an integer class from 0 to 9"):
        train_sync(SoftmaxRegression(), d.x_train, d.y_train, num_replicas=2, global_batch=50,
                   eval_data=(d.x_test[:3], np.array([10, 1, 2])))
