"""distsim.numerics.losslab: each loss-scaling mistake produces its expected factor."""

import numpy as np
import pytest
from input_errors import raises_input

from distsim.datasets.mnist import mnist_subset
from distsim.numerics.losslab import MISTAKES, loss_scaling_lab
from distsim.numerics.models import MLP, SoftmaxRegression


@pytest.fixture(scope="module")
def data():
    return mnist_subset(300, 1, dtype=np.float64)


@pytest.mark.parametrize("n", [2, 4, 8])
def test_mean_then_sum_is_exactly_n_times_with_equal_shards(data, n):
    report = loss_scaling_lab(MLP(hidden=16), data.x_train, data.y_train, num_replicas=n, global_batch=64,
                              learning_rate=0.05, steps=3, mistakes=["mean_then_sum"])
    m = report["mean_then_sum"]
    assert (report.replica_batch_sizes == 64 // n).all()
    # Each example weighs 1/b = N/G instead of 1/G: the update is N x the correct one. float64 and
    # the same summation order on both sides: equal to ~1e-15; 1e-12 leaves room for rounding of N/G.
    assert m.update_norm_ratio == pytest.approx(n, rel=1e-12)
    assert m.update_cosine == pytest.approx(1.0, abs=1e-12)
    # After one step |N d - d| / |d| = N - 1; later steps stay far from the correct run.
    assert m.divergence[0] == pytest.approx(n - 1, rel=1e-12)
    assert m.final_divergence > 0.5


def test_sum_over_batch_size_is_exact_on_equal_shards_and_biased_on_uneven(data):
    model = SoftmaxRegression()
    even = loss_scaling_lab(model, data.x_train, data.y_train, num_replicas=4, global_batch=64,
                            steps=3, mistakes=["sum_over_batch_size"])["sum_over_batch_size"]
    # 1/(b * N) == 1/G when every shard has b = G/N examples: the same update up to rounding.
    assert even.update_norm_ratio == pytest.approx(1.0, abs=1e-12)
    assert even.final_divergence < 1e-12
    uneven = loss_scaling_lab(model, data.x_train, data.y_train, num_replicas=8, global_batch=60,
                              steps=3, mistakes=["sum_over_batch_size"])
    assert uneven.replica_batch_sizes[0].tolist() == [8] * 7 + [4]
    m = uneven["sum_over_batch_size"]
    # The 4 examples of the last shard weigh 1/32 instead of 1/60: the direction changes.
    assert m.update_cosine < 0.9999 and m.final_divergence > 1e-3


def test_sum_over_batch_size_weights_match_hand_computation(data):
    """Update of the mistake = sum over replicas of (mean gradient on the shard) / N."""
    model = SoftmaxRegression()
    w0 = model.init(0, np.float64)
    report = loss_scaling_lab(model, data.x_train, data.y_train, num_replicas=3, global_batch=10,
                              learning_rate=1.0, steps=1, mistakes=["sum_over_batch_size"], initial_weights=w0)
    sizes = report.replica_batch_sizes[0]
    assert sizes.tolist() == [4, 4, 2]
    expected = np.zeros(model.num_params)
    start = 0
    for b in sizes:
        _, g = model.loss_and_grads(w0, data.x_train[start : start + b], data.y_train[start : start + b])
        expected += model.flatten(g) / 3
        start += b
    _, g_right = model.loss_and_grads(w0, data.x_train[:10], data.y_train[:10])
    ratio = np.linalg.norm(expected) / np.linalg.norm(model.flatten(g_right))
    assert report["sum_over_batch_size"].update_norm_ratio == pytest.approx(ratio, rel=1e-10)


def test_unscaled_regularization_multiplies_the_penalty_gradient_by_n(data):
    l2, n, lr = 0.05, 4, 0.1
    model = SoftmaxRegression(l2=l2)
    w0 = [w + 0.1 for w in model.init(0, np.float64)]  # non-zero kernel so the penalty matters
    report = loss_scaling_lab(model, data.x_train, data.y_train, num_replicas=n, global_batch=64,
                              learning_rate=lr, steps=1, initial_weights=w0,
                              mistakes=["unscaled_regularization"])
    _, g = model.loss_and_grads(w0, data.x_train[:64], data.y_train[:64])
    reg = model.regularization_grad_flat(model.flatten(w0))
    right = lr * model.flatten(g)
    wrong = right + (n - 1) * lr * reg  # N copies of the full penalty instead of one
    expected = np.linalg.norm(wrong) / np.linalg.norm(right)
    assert report.l2 == l2
    assert report["unscaled_regularization"].update_norm_ratio == pytest.approx(expected, rel=1e-10)
    assert expected > 1.01  # the check above is not vacuous


def test_metric_mean_of_replicas(data):
    model = SoftmaxRegression()
    # 300 examples, global batch 70 on 8 replicas: full steps split [9]*7 + [7]; the partial final
    # batch of 20 splits [3]*6 + [2, 0], leaving replica 7 empty -> the per-replica mean is NaN there.
    report = loss_scaling_lab(model, data.x_train, data.y_train, num_replicas=8, global_batch=70,
                              steps=5, mistakes=["metric_mean_of_replicas"])
    m = report["metric_mean_of_replicas"]
    assert m.update_norm_ratio == 1.0 and m.final_divergence == 0.0  # training itself is correct
    assert report.replica_batch_sizes[4].tolist() == [3] * 6 + [2, 0]
    assert np.isnan(m.metric_wrong[4]) and np.isfinite(m.metric_wrong[:4]).all()
    assert np.isfinite(m.metric_correct).all()
    assert m.max_metric_error > 0
    equal = loss_scaling_lab(model, data.x_train, data.y_train, num_replicas=4, global_batch=60, steps=5,
                             mistakes=["metric_mean_of_replicas"])["metric_mean_of_replicas"]
    np.testing.assert_allclose(equal.metric_wrong, equal.metric_correct, rtol=1e-12)


def test_report_lookup_and_bad_input(data):
    report = loss_scaling_lab(SoftmaxRegression(), data.x_train, data.y_train, num_replicas=2, global_batch=20,
                              steps=2)
    assert [m.name for m in report.mistakes] == list(MISTAKES)
    with pytest.raises(KeyError, match="no mistake"):
        report["typo"]
    with raises_input("mistakes[1]", "'typo'", f"one of {tuple(MISTAKES)}"):
        loss_scaling_lab(SoftmaxRegression(), data.x_train, data.y_train, num_replicas=2, global_batch=20,
                         mistakes=[next(iter(MISTAKES)), "typo"])
    with raises_input("mistakes", "[]", f"a non-empty selection of {tuple(MISTAKES)}"):
        loss_scaling_lab(SoftmaxRegression(), data.x_train, data.y_train, num_replicas=2, global_batch=20,
                         mistakes=[])
    with raises_input("learning_rate", "-0.1", "a finite number > 0"):
        loss_scaling_lab(SoftmaxRegression(), data.x_train, data.y_train, num_replicas=2, global_batch=20,
                         learning_rate=-0.1)
    with raises_input("steps", "0", "an integer >= 1"):
        loss_scaling_lab(SoftmaxRegression(), data.x_train, data.y_train, num_replicas=2, global_batch=20, steps=0)
    with raises_input("y[2]", "10", "an integer class from 0 to 9"):
        loss_scaling_lab(SoftmaxRegression(), data.x_train[:3], np.array([1, 2, 10]), num_replicas=2,
                         global_batch=2)
