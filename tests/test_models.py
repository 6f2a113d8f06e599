"""distsim.numerics.models: exact gradients (finite differences), layout, validation."""

import math

import numpy as np
import pytest
from input_errors import raises_input

from distsim.datasets.mnist import mnist_subset
from distsim.numerics.models import MLP, MODELS, SmallCNN, SoftmaxRegression, make_model, softmax_cross_entropy

# Small shapes keep the finite-difference loops (2 loss evaluations per weight) fast.
SMALL_MODELS = [
    SoftmaxRegression(input_shape=(5, 4), num_classes=3, l2=0.01),
    MLP(input_shape=(5, 4), num_classes=3, hidden=6, l2=0.01),
    SmallCNN(input_shape=(5, 4), num_classes=3, filters=3, l2=0.01),
    SmallCNN(input_shape=(4, 4, 2), num_classes=3, filters=2, kernel_size=3),
]


def _perturbed_weights(model, seed):
    rng = np.random.default_rng(seed)
    # Non-zero biases so their gradients are exercised away from the zero init.
    return [w + 0.3 * rng.standard_normal(w.shape) for w in model.init(seed, np.float64)]


@pytest.mark.parametrize("model", SMALL_MODELS, ids=lambda m: f"{m.name}{m.input_shape}")
def test_gradient_matches_central_finite_differences(model):
    rng = np.random.default_rng(1)
    weights = _perturbed_weights(model, 2)
    x = rng.random((7,) + model.input_shape)
    y = rng.integers(0, model.num_classes, 7)
    _, grads = model.loss_and_grads(weights, x, y)
    flat = model.flatten(weights)
    eps = 1e-6
    numeric = np.empty_like(flat)
    for i in range(len(flat)):
        plus, minus = flat.copy(), flat.copy()
        plus[i] += eps
        minus[i] -= eps
        numeric[i] = (
            model.loss_and_grads(model.unflatten(plus), x, y)[0] - model.loss_and_grads(model.unflatten(minus), x, y)[0]
        ) / (2 * eps)
    analytic = model.flatten(grads)
    # Central differences in float64 with eps=1e-6 are accurate to ~eps^2 * f''' + 1e-16/eps ~ 1e-10
    # relative; 1e-6 leaves room for curvature while any wrong term (a missed factor, a transposed
    # kernel, a wrong ReLU mask) gives O(1) relative error.
    np.testing.assert_allclose(analytic, numeric, rtol=0, atol=1e-6 * np.abs(analytic).max())


@pytest.mark.parametrize("model", SMALL_MODELS[:3], ids=lambda m: m.name)
def test_grouped_gradients_are_per_group_sums(model):
    """Group r's gradient must use group r's examples only; padding (weight 0) adds nothing."""
    rng = np.random.default_rng(3)
    weights = _perturbed_weights(model, 4)
    x = rng.random((3, 4) + model.input_shape)
    y = rng.integers(0, model.num_classes, (3, 4))
    ew = rng.random((3, 4))
    ew[2, 1:] = 0.0  # group 2 has one real example and three padding slots
    fb = model.grouped_forward_backward(weights, x, y, ew)
    for r in range(3):
        real = ew[r] > 0
        alone = model.grouped_forward_backward(weights, x[r][real][None], y[r][real][None], ew[r][real][None])
        for g_group, g_alone in zip(fb.grads, alone.grads):
            # Same math on a subset; only BLAS summation order can differ (float64 eps level).
            np.testing.assert_allclose(g_group[r], g_alone[0], rtol=1e-12, atol=1e-15)


def test_softmax_cross_entropy_is_stable_for_huge_logits():
    logits = np.array([[1000.0, 0.0, -1000.0]])
    loss, probs = softmax_cross_entropy(logits, np.array([1]))
    assert np.isfinite(loss).all() and loss[0] == pytest.approx(1000.0)
    assert probs.sum() == pytest.approx(1.0)


def test_keras_layout_shapes_and_counts():
    cnn = SmallCNN()
    assert cnn.weight_shapes() == [(3, 3, 1, 8), (8,), (28 * 28 * 8, 10), (10,)]
    assert cnn.num_params == 3 * 3 * 8 + 8 + 6272 * 10 + 10
    assert MLP(hidden=128).weight_shapes() == [(784, 128), (128,), (128, 10), (10,)]
    assert SoftmaxRegression().num_params == 7850


def test_init_is_seeded_glorot_uniform_with_zero_biases():
    m = MLP()
    a, b, c = m.init(0), m.init(0), m.init(1)
    assert all(np.array_equal(u, v) for u, v in zip(a, b))
    assert not np.array_equal(a[0], c[0])
    assert a[0].dtype == np.float32 and m.init(0, np.float64)[0].dtype == np.float64
    limit = math.sqrt(6 / (784 + 128))
    assert np.abs(a[0]).max() <= limit and np.abs(a[0]).max() > 0.99 * limit
    assert not a[1].any() and not a[3].any()


def test_flatten_unflatten_round_trip_and_views():
    m = SmallCNN(input_shape=(6, 6))
    w = m.init(5, np.float64)
    flat = m.flatten(w)
    back = m.unflatten(flat)
    assert all(np.array_equal(u, v) for u, v in zip(w, back))
    back[2][0, 0] = 123.0  # views: writing through them changes the flat vector
    assert 123.0 in flat
    stacked = m.unflatten(np.stack([flat, 2 * flat]))
    assert stacked[0].shape == (2, 3, 3, 1, 8)


def test_logits_accept_flat_and_image_inputs():
    data = mnist_subset(16, 1)
    m = SmallCNN()
    w = m.init(0)
    a = m.logits(w, data.x_train)
    b = m.logits(w, data.x_train.reshape(16, 784))
    np.testing.assert_array_equal(a, b)
    assert a.shape == (16, 10)


def test_mnist_loss_at_init_is_near_log10_and_sgd_lowers_it():
    data = mnist_subset(128, 1, dtype=np.float64)
    for name in MODELS:
        m = make_model(name)
        w = m.init(0, np.float64)
        loss0, g = m.loss_and_grads(w, data.x_train, data.y_train)
        # Glorot init gives small logits, so the loss starts close to ln(10) = 2.30.
        assert 1.5 < loss0 < 3.5, name
        for _ in range(5):
            _, g = m.loss_and_grads(w, data.x_train, data.y_train)
            w = [p - 0.1 * q for p, q in zip(w, g)]
        assert m.loss_and_grads(w, data.x_train, data.y_train)[0] < loss0, name


CLASS = "an integer class from 0 to 9"


@pytest.mark.parametrize(
    "x, y, path, value, allowed, problem",
    [
        (np.zeros((4, 28, 27)), np.zeros(4, int), "x.shape", "(4, 28, 27)",
         "(batch, *(28, 28)) or (batch, 784) for softmax_regression", None),
        (np.zeros((4, 28, 28)), np.zeros(3, int), "len(y)", "3", "len(x)=4: one label per example", None),
        (np.zeros((4, 28, 28)), np.array([0, 1, 10, 2]), "y[2]", "10", CLASS, None),
        (np.zeros((4, 28, 28)), np.array([0, 1, -1, 2]), "y[2]", "-1", CLASS, None),
        (np.zeros((4, 28, 28)), np.array([0, 1, 2, 3.5]), "y[3]", "3.5", CLASS, None),
        (np.zeros((4, 28, 28)), np.array([0, np.nan, 2, 3]), "y[1]", "nan", CLASS, None),
        (np.zeros((4, 28, 28)), np.array(["0", "1", "2", "3"]), "y[0]", "'0'", CLASS, None),
        (np.zeros((4, 28, 28)), np.zeros((4, 1), int), "y.shape", "(4, 1)", "(batch,): one integer label", None),
        (np.full((4, 28, 28), np.nan), np.zeros(4, int), "x", None, "finite values",
         "NaN or inf, first at index (0, 0, 0)"),
        (np.zeros((4, 28, 28), dtype=np.int64), np.zeros(4, int), "x.dtype", "'int64'", "float32 or float64", None),
        (np.float64(3.0), np.zeros(1, int), "x", "3.0", "an array of examples, (batch, *(28, 28))", None),
        (np.zeros((0, 28, 28)), np.zeros(0, int), "x", None, "at least one example", "an empty batch"),
    ],
)
def test_bad_batches_raise_clear_input_errors(x, y, path, value, allowed, problem):
    m = SoftmaxRegression()
    with raises_input(path, value, allowed, problem=problem):
        m.loss_and_grads(m.init(0), x, y)


@pytest.mark.parametrize(
    "build, path, value, allowed",
    [
        (lambda: make_model("resnet"), "model", "'resnet'", "one of ('mlp', 'small_cnn', 'softmax_regression')"),
        (lambda: make_model("mlp", hiden=64), "hiden", "64",
         "no such argument of mlp; its arguments are ['hidden', 'input_shape', 'l2', 'num_classes']"),
        (lambda: SmallCNN(kernel_size=2), "kernel_size", "2", "an odd integer >= 1 ('same' padding)"),
        (lambda: SmallCNN(kernel_size=0), "kernel_size", "0", "an integer >= 1"),
        (lambda: SmallCNN(filters=2.5), "filters", "2.5", "an integer >= 1"),
        (lambda: SmallCNN(input_shape=(784,)), "input_shape", "(784,)", "(H, W) or (H, W, C)"),
        (lambda: MLP(l2=-1), "l2", "-1", "a finite number >= 0"),
        (lambda: MLP(hidden=0), "hidden", "0", "an integer >= 1"),
        (lambda: MLP(hidden=1.5), "hidden", "1.5", "an integer >= 1"),
        (lambda: MLP(num_classes=1), "num_classes", "1", "an integer >= 2"),
        (lambda: SoftmaxRegression(input_shape=(28, 0)), "input_shape[1]", "0", "an integer >= 1"),
        (lambda: SoftmaxRegression(input_shape="28x28"), "input_shape", "'28x28'", "a tuple of sizes"),
        (lambda: SoftmaxRegression().init(0, np.int64), "dtype", "'int64'", "float32 or float64"),
        (lambda: SoftmaxRegression().init(0, "float128x"), "dtype", "'float128x'", "float32 or float64"),
    ],
)
def test_bad_constructor_arguments_raise(build, path, value, allowed):
    with raises_input(path, value, allowed):
        build()


def test_bad_weights_raise():
    m = SoftmaxRegression()
    w = m.init(0)
    with raises_input("weights", "[(784, 10)]", "2 arrays in Keras order ['dense/kernel', 'dense/bias'] "
                      "with shapes [(784, 10), (10,)] (softmax_regression)"):
        m.import_weights(w[:1])
    with raises_input("weights['dense/bias'].shape", "(9,)", "(10,) (softmax_regression)"):
        m.import_weights([w[0], np.zeros(9)])
    bad = w[0].copy()
    bad[3, 7] = np.nan
    with raises_input("weights['dense/kernel']", None, "finite values", problem="NaN or inf, first at index (3, 7)"):
        m.import_weights([bad, w[1]])
    with raises_input("flat.shape", "(5,)", "a last axis of 7,850 values, one per parameter of softmax_regression"):
        m.unflatten(np.zeros(5))


def test_regularization_loss_and_gradient():
    m = MLP(input_shape=(3,), hidden=2, num_classes=2, l2=0.5)
    w = [np.ones((3, 2)), np.ones(2), 2 * np.ones((2, 2)), np.ones(2)]
    # Only kernels count: 0.5 * (6 * 1 + 4 * 4) = 11
    assert m.regularization_loss(w) == pytest.approx(11.0)
    g = m.unflatten(m.regularization_grad_flat(m.flatten(w)))
    np.testing.assert_array_equal(g[0], np.ones((3, 2)))
    np.testing.assert_array_equal(g[2], 2 * np.ones((2, 2)))
    assert not g[1].any() and not g[3].any()


@pytest.mark.parametrize("model", SMALL_MODELS, ids=lambda m: f"{m.name}{m.input_shape}")
def test_gradients_written_in_place_equal_returned_ones(model):
    """``out=`` (views of one flat (R, P) buffer, as the trainer uses) gives the same numbers."""
    rng = np.random.default_rng(6)
    w = _perturbed_weights(model, 1)
    x = rng.random((3, 5) + model.input_shape)
    y = rng.integers(0, model.num_classes, (3, 5))
    ew = rng.random((3, 5))
    plain = model.grouped_forward_backward(w, x, y, ew)
    buffer = np.full((3, model.num_params), np.nan)
    model.grouped_forward_backward(w, x, y, ew, out=model.unflatten(buffer))
    np.testing.assert_array_equal(buffer, np.concatenate([g.reshape(3, -1) for g in plain.grads], axis=1))


def test_inf_and_huge_but_finite_inputs():
    m = SoftmaxRegression(input_shape=(2, 2))
    x = np.zeros((3, 2, 2))
    x[1, 0, 1] = np.inf
    with raises_input("x", None, "finite values", problem="NaN or inf, first at index (1, 0, 1)"):
        m.check_inputs(x)
    with raises_input("images", None, "finite values", problem="NaN or inf, first at index (1, 0, 1)"):
        m.check_inputs(x, "images")
    huge = np.full((3, 2, 2), 1e308)  # finite, though their sum overflows
    assert m.check_inputs(huge).shape == (3, 2, 2)
