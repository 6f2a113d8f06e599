"""NumPy models with exact analytic gradients.

Three MNIST classifiers, each the NumPy twin of a small Keras model:

* :class:`SoftmaxRegression`: ``Flatten -> Dense(10)``;
* :class:`MLP`: ``Flatten -> Dense(hidden, relu) -> Dense(10)``;
* :class:`SmallCNN`: ``Conv2D(8, 3x3, same, relu) -> Flatten -> Dense(10)``,
  the small CNN of the source material.

All three output **logits** and use softmax cross-entropy, the same as Keras'
``SparseCategoricalCrossentropy(from_logits=True)`` (or a softmax output layer,
which Keras fuses into the same computation).

Weights are a plain ``list`` of arrays in **Keras layer order**
(``[kernel, bias, kernel, bias, ...]`` with Keras' shapes), so
``keras_model.set_weights(weights)`` loads them unchanged.

Every computation is *grouped*: inputs carry a leading group axis ``R`` and
each group gets its own gradient. The data-parallel trainer puts one replica's
shard in each group, so one vectorised call computes all replicas' gradients,
each summed over that replica's examples only. Single-device code uses
``R = 1``.
"""

from __future__ import annotations

import inspect
import math
from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

from distsim.validation import InputError, Integer, Number, OneOf

#: Floating dtypes the models compute in.
FLOAT_DTYPES = (np.float32, np.float64)

_SIZE = Integer(1, 65_536)  # a layer or image side; larger would not fit in memory as float32 weights


@dataclass(frozen=True)
class ForwardBackward:
    """What one grouped forward/backward pass returns.

    Attributes:
        loss: per-example cross-entropy, shape ``(R, b)`` (reduction NONE).
        logits: shape ``(R, b, num_classes)``.
        grads: one array per weight, shape ``(R, *weight.shape)``: group ``r``
            holds the gradient of ``sum_i example_weight[r, i] * loss[r, i]``.
    """

    loss: np.ndarray
    logits: np.ndarray
    grads: list[np.ndarray]


def softmax_cross_entropy(logits: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-example cross-entropy and softmax probabilities, computed stably.

    Args:
        logits: ``(..., num_classes)``.
        labels: integer class ids, shape ``logits.shape[:-1]``.
    Returns:
        ``(loss, probs)`` with shapes ``logits.shape[:-1]`` and ``logits.shape``.
    """
    shifted = logits - logits.max(axis=-1, keepdims=True)
    log_norm = np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    log_probs = shifted - log_norm
    loss = -np.take_along_axis(log_probs, labels[..., None], axis=-1)[..., 0]
    return loss, np.exp(log_probs)


def glorot_uniform(rng: np.random.Generator, shape: tuple[int, ...], fan_in: int, fan_out: int, dtype) -> np.ndarray:
    """Keras' default kernel initializer: U(-l, l) with l = sqrt(6 / (fan_in + fan_out))."""
    limit = math.sqrt(6.0 / (fan_in + fan_out))
    return rng.uniform(-limit, limit, size=shape).astype(dtype)


def _dense(inputs: np.ndarray, kernel: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """``inputs @ kernel + bias`` for ``(R, b, n)`` inputs, as one 2-D product (weights are shared)."""
    out = inputs.reshape(-1, inputs.shape[-1]) @ kernel
    out += bias
    return out.reshape(inputs.shape[:-1] + (kernel.shape[1],))


def _back(d_out: np.ndarray, kernel: np.ndarray) -> np.ndarray:
    """Gradient w.r.t. the inputs of a dense layer: ``d_out @ kernel.T``, as one 2-D product."""
    return (d_out.reshape(-1, d_out.shape[-1]) @ kernel.T).reshape(d_out.shape[:-1] + (kernel.shape[0],))


def _dense_grads(inputs: np.ndarray, d_out: np.ndarray, out=None) -> tuple[np.ndarray, np.ndarray]:
    """Per-group kernel and bias gradients of ``inputs @ W + b``; inputs ``(R, b, n)``.

    ``out``: optional ``(kernel, bias)`` arrays of shapes ``(R, n, k)`` and ``(R, k)`` to write into.
    """
    if out is None:
        return np.matmul(inputs.swapaxes(-1, -2), d_out), d_out.sum(axis=-2)
    np.matmul(inputs.swapaxes(-1, -2), d_out, out=out[0])
    np.sum(d_out, axis=-2, out=out[1])
    return out


class Model(ABC):
    """A classifier over fixed-size inputs with exact gradients.

    Subclasses define the weight layout and the grouped forward/backward pass.
    The model object holds only the architecture; weights are passed in, so the
    same model can evaluate stale copies (async workers) or many replicas.

    Attributes:
        input_shape: shape of one example, e.g. ``(28, 28)``.
        num_classes: number of output classes.
        l2: Keras-style L2 penalty on kernels (not biases): the regularization
            loss is ``l2 * sum(kernel ** 2)`` summed over kernels.
    """

    name: str = "model"

    def __init__(self, input_shape: tuple[int, ...], num_classes: int, l2: float) -> None:
        if isinstance(input_shape, (str, bytes)) or not np.iterable(input_shape) or not len(input_shape):
            raise InputError("input_shape", input_shape, "a tuple of sizes, e.g. (28, 28)")
        self.input_shape = tuple(_SIZE(f"input_shape[{i}]", n) for i, n in enumerate(input_shape))
        self.num_classes = Integer(2)("num_classes", num_classes)
        self.l2 = float(Number(0)("l2", l2))

    # ---- layout -------------------------------------------------------------
    @abstractmethod
    def weight_specs(self) -> list[tuple[str, tuple[int, ...], int, int]]:
        """``(name, shape, fan_in, fan_out)`` per weight in Keras order; fans are 0 for biases."""

    def weight_shapes(self) -> list[tuple[int, ...]]:
        return [shape for _, shape, _, _ in self.weight_specs()]

    def weight_names(self) -> list[str]:
        return [name for name, _, _, _ in self.weight_specs()]

    @property
    def num_params(self) -> int:
        return sum(math.prod(shape) for shape in self.weight_shapes())

    def is_kernel(self) -> list[bool]:
        """Which weights are kernels (regularized), in Keras order."""
        return [fan_in > 0 for _, _, fan_in, _ in self.weight_specs()]

    # ---- weights ------------------------------------------------------------
    def init(self, seed: int, dtype=np.float32) -> list[np.ndarray]:
        """Seeded Keras-style initial weights: Glorot-uniform kernels, zero biases."""
        dtype = _check_dtype(dtype)
        rng = np.random.default_rng(seed)
        weights = []
        for _, shape, fan_in, fan_out in self.weight_specs():
            if fan_in:
                weights.append(glorot_uniform(rng, shape, fan_in, fan_out, dtype))
            else:
                weights.append(np.zeros(shape, dtype=dtype))
        return weights

    def export_weights(self, weights: list[np.ndarray]) -> list[np.ndarray]:
        """Copies of ``weights`` in Keras layer order, ready for ``keras_model.set_weights``."""
        return [np.array(w, copy=True) for w in self.import_weights(weights)]

    def import_weights(self, weights: list[np.ndarray], dtype=None) -> list[np.ndarray]:
        """Check a Keras-ordered weight list (e.g. ``keras_model.get_weights()``) and return it as arrays.

        Raises:
            InputError: wrong number of arrays, a wrong shape, a non-float
                dtype or a non-finite value (at ``weights['<name>']``).
        """
        weights = list(weights)
        specs = self.weight_specs()
        if len(weights) != len(specs):
            raise InputError("weights", [np.shape(w) for w in weights], f"{len(specs)} arrays in Keras order "
                             f"{self.weight_names()} with shapes {self.weight_shapes()} ({self.name})")
        dtype = _check_dtype(dtype if dtype is not None else np.asarray(weights[0]).dtype)
        out = []
        for w, (name, shape, _, _) in zip(weights, specs):
            w = np.asarray(w)
            if w.shape != shape:
                raise InputError(f"weights[{name!r}].shape", w.shape, f"{shape} ({self.name})")
            _all_finite(f"weights[{name!r}]", w)
            out.append(w.astype(dtype, copy=False))
        return out

    def flatten(self, weights: list[np.ndarray]) -> np.ndarray:
        """All weights as one 1-D vector (Keras order, each array C-ordered)."""
        return np.concatenate([np.ravel(w) for w in weights])

    def unflatten(self, flat: np.ndarray) -> list[np.ndarray]:
        """Views into ``flat`` (last axis ``num_params``) shaped like the weights.

        A leading group axis is kept: ``(R, P)`` gives arrays ``(R, *shape)``.
        """
        if np.ndim(flat) == 0 or flat.shape[-1] != self.num_params:
            raise InputError("flat.shape", np.shape(flat),
                             f"a last axis of {self.num_params:,} values, one per parameter of {self.name}")
        lead = flat.shape[:-1]
        out, start = [], 0
        for shape in self.weight_shapes():
            size = math.prod(shape)
            out.append(flat[..., start : start + size].reshape(lead + shape))
            start += size
        return out

    # ---- regularization -----------------------------------------------------
    def regularization_loss(self, weights: list[np.ndarray]) -> float:
        """``l2 * sum(kernel ** 2)`` over kernels; 0 when ``l2 == 0``."""
        if self.l2 == 0.0:
            return 0.0
        return self.l2 * float(sum(np.sum(w * w) for w, k in zip(weights, self.is_kernel()) if k))

    def regularization_grad_flat(self, flat_weights: np.ndarray) -> np.ndarray:
        """Gradient of :meth:`regularization_loss` as a flat vector (``2 * l2 * kernel``)."""
        grad = np.zeros_like(flat_weights)
        for g, w, k in zip(self.unflatten(grad), self.unflatten(flat_weights), self.is_kernel()):
            if k:
                np.multiply(w, 2.0 * self.l2, out=g)
        return grad

    # ---- numerics -----------------------------------------------------------
    @abstractmethod
    def grouped_logits(self, weights: list[np.ndarray], x: np.ndarray) -> np.ndarray:
        """Logits ``(R, b, num_classes)`` for inputs ``(R, b, *input_shape)``; no checks."""

    @abstractmethod
    def grouped_forward_backward(
        self, weights: list[np.ndarray], x: np.ndarray, y: np.ndarray, example_weight: np.ndarray, out=None
    ) -> ForwardBackward:
        """Per-group gradients of ``sum_i example_weight[r, i] * loss[r, i]``; no checks.

        ``x`` is ``(R, b, *input_shape)``, ``y`` and ``example_weight`` are
        ``(R, b)``. Padding examples with weight 0 add exact zeros.
        Regularization is not included (see :meth:`regularization_grad_flat`).
        ``out``: optional arrays shaped like the grads (e.g. views of one
        ``(R, num_params)`` buffer via :meth:`unflatten`) to write them into.
        """

    def logits(self, weights: list[np.ndarray], x: np.ndarray) -> np.ndarray:
        """Logits ``(B, num_classes)`` for a validated batch ``x`` of shape ``(B, *input_shape)``."""
        x = self.check_inputs(x)
        return self.grouped_logits(weights, x.astype(weights[0].dtype, copy=False)[None])[0]

    def loss_and_grads(
        self, weights: list[np.ndarray], x: np.ndarray, y: np.ndarray
    ) -> tuple[float, list[np.ndarray]]:
        """Mean cross-entropy plus regularization on one batch, and its exact gradient.

        This is plain single-device training math (Keras ``SUM_OVER_BATCH_SIZE``).
        """
        x, y = self.check_batch(x, y)
        if len(x) == 0:
            raise InputError("x", None, "at least one example", problem="an empty batch")
        x = x.astype(weights[0].dtype, copy=False)
        w = np.full((1, len(x)), 1.0 / len(x), dtype=weights[0].dtype)
        fb = self.grouped_forward_backward(weights, x[None], y[None], w)
        grads = [g[0] for g in fb.grads]
        if self.l2:
            reg = self.unflatten(self.regularization_grad_flat(self.flatten(weights)))
            grads = [g + r for g, r in zip(grads, reg)]
        return float(fb.loss.mean()) + self.regularization_loss(weights), grads

    # ---- validation ---------------------------------------------------------
    def check_inputs(self, x: np.ndarray, path: str = "x") -> np.ndarray:
        """Validate a batch of inputs ``(B, *input_shape)``: float, finite, right shape.

        A flat ``(B, prod(input_shape))`` batch is reshaped; any other shape is
        an error. ``path`` names the argument in errors.
        """
        x = np.asarray(x)
        if not np.issubdtype(x.dtype, np.floating):
            raise InputError(f"{path}.dtype", x.dtype.name, "float32 or float64 (MNIST pixels as uint8 / 255)")
        if x.ndim == 0:
            raise InputError(path, x.item(), f"an array of examples, (batch, *{self.input_shape})")
        if x.shape[1:] != self.input_shape:
            if x.ndim == 2 and x.shape[1] == math.prod(self.input_shape):
                x = x.reshape((len(x),) + self.input_shape)
            else:
                raise InputError(f"{path}.shape", x.shape, f"(batch, *{self.input_shape}) or "
                                 f"(batch, {math.prod(self.input_shape)}) for {self.name}")
        _all_finite(path, x)
        return x

    def check_labels(self, y: np.ndarray, path: str = "y") -> np.ndarray:
        """Validate integer labels in ``0 .. num_classes-1``; returns int64.
        ``path`` names the argument in errors."""
        y = np.asarray(y)
        if y.ndim != 1:
            raise InputError(f"{path}.shape", y.shape, "(batch,): one integer label per example")
        allowed = f"an integer class from 0 to {self.num_classes - 1}"
        if len(y) and not np.issubdtype(y.dtype, np.integer):
            whole = np.mod(y, 1) == 0 if np.issubdtype(y.dtype, np.number) else np.zeros(len(y), dtype=bool)
            if not np.all(whole):
                bad = int(np.argmin(whole))
                raise InputError(f"{path}[{bad}]", y[bad].item(), allowed)
        if len(y) and (y.min() < 0 or y.max() >= self.num_classes):
            bad = int(np.argmax((y < 0) | (y >= self.num_classes)))
            raise InputError(f"{path}[{bad}]", y[bad].item(), allowed)
        return y.astype(np.int64, copy=False)

    def check_batch(self, x: np.ndarray, y: np.ndarray, paths: tuple[str, str] = ("x", "y")
                    ) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`check_inputs` and :meth:`check_labels`, and one label per
        example; ``paths`` name the two arguments in errors."""
        x, y = self.check_inputs(x, paths[0]), self.check_labels(y, paths[1])
        if len(x) != len(y):
            raise InputError(f"len({paths[1]})", len(y), f"len({paths[0]})={len(x)}: one label per example")
        return x, y


def _all_finite(path: str, values: np.ndarray) -> None:
    """An :class:`InputError` at ``path`` naming the first NaN or inf in ``values``, if any."""
    # One float64 sum is finite iff every value is (float32 data cannot overflow it); only a
    # non-finite sum pays for the elementwise check that finds the culprit.
    with np.errstate(over="ignore", invalid="ignore"):
        total = np.sum(values, dtype=np.float64)
    if not np.isfinite(total) and not np.all(np.isfinite(values)):
        bad = np.unravel_index(int(np.argmin(np.isfinite(values))), values.shape)
        raise InputError(path, None, "finite values",
                         problem=f"NaN or inf, first at index {tuple(int(i) for i in bad)}")


def _check_dtype(dtype) -> type:
    try:
        dtype = np.dtype(dtype).type
    except TypeError:
        raise InputError("dtype", dtype, "float32 or float64") from None
    if dtype not in FLOAT_DTYPES:
        raise InputError("dtype", np.dtype(dtype).name, "float32 or float64")
    return dtype


def _flat(x: np.ndarray) -> np.ndarray:
    """``(R, b, *shape) -> (R, b, prod(shape))`` (Keras Flatten, C order)."""
    return x.reshape(x.shape[0], x.shape[1], -1)


class SoftmaxRegression(Model):
    """``Flatten -> Dense(num_classes)``: multinomial logistic regression."""

    name = "softmax_regression"

    def __init__(self, input_shape=(28, 28), num_classes: int = 10, l2: float = 0.0) -> None:
        super().__init__(input_shape, num_classes, l2)

    def weight_specs(self):
        n = math.prod(self.input_shape)
        k = self.num_classes
        return [("dense/kernel", (n, k), n, k), ("dense/bias", (k,), 0, 0)]

    def grouped_logits(self, weights, x):
        kernel, bias = weights
        return _dense(_flat(x), kernel, bias)

    def grouped_forward_backward(self, weights, x, y, example_weight, out=None):
        inputs = _flat(x)
        logits = self.grouped_logits(weights, x)
        loss, probs = softmax_cross_entropy(logits, y)
        d_logits = _d_logits(probs, y, example_weight)
        return ForwardBackward(loss, logits, list(_dense_grads(inputs, d_logits, out)))


class MLP(Model):
    """``Flatten -> Dense(hidden, relu) -> Dense(num_classes)``."""

    name = "mlp"

    def __init__(self, input_shape=(28, 28), num_classes: int = 10, hidden: int = 128, l2: float = 0.0) -> None:
        self.hidden = _SIZE("hidden", hidden)
        super().__init__(input_shape, num_classes, l2)

    def weight_specs(self):
        n, h, k = math.prod(self.input_shape), self.hidden, self.num_classes
        return [
            ("dense/kernel", (n, h), n, h),
            ("dense/bias", (h,), 0, 0),
            ("dense_1/kernel", (h, k), h, k),
            ("dense_1/bias", (k,), 0, 0),
        ]

    def _hidden(self, weights, x):
        pre = _dense(_flat(x), weights[0], weights[1])
        return np.maximum(pre, 0, out=pre)

    def grouped_logits(self, weights, x):
        return _dense(self._hidden(weights, x), weights[2], weights[3])

    def grouped_forward_backward(self, weights, x, y, example_weight, out=None):
        out = out or [None] * 4
        inputs = _flat(x)
        hidden = self._hidden(weights, x)
        logits = _dense(hidden, weights[2], weights[3])
        loss, probs = softmax_cross_entropy(logits, y)
        d_logits = _d_logits(probs, y, example_weight)
        d_kernel2, d_bias2 = _dense_grads(hidden, d_logits, _pair(out, 2))
        d_hidden = _back(d_logits, weights[2])
        d_hidden *= hidden > 0
        d_kernel1, d_bias1 = _dense_grads(inputs, d_hidden, _pair(out, 0))
        return ForwardBackward(loss, logits, [d_kernel1, d_bias1, d_kernel2, d_bias2])


class SmallCNN(Model):
    """``Conv2D(filters, k x k, padding='same', relu) -> Flatten -> Dense(num_classes)``.

    Inputs are ``(H, W)`` (one channel) or ``(H, W, C)``, channels last as in Keras.
    The convolution is a cross-correlation like Keras' ``Conv2D``, done as an
    im2col matrix product.
    """

    name = "small_cnn"

    def __init__(
        self, input_shape=(28, 28), num_classes: int = 10, filters: int = 8, kernel_size: int = 3, l2: float = 0.0
    ) -> None:
        if not np.iterable(input_shape) or len(input_shape) not in (2, 3):
            raise InputError("input_shape", input_shape, "(H, W) or (H, W, C)")
        self.filters = _SIZE("filters", filters)
        self.kernel_size = _SIZE("kernel_size", kernel_size)
        if self.kernel_size % 2 == 0:
            raise InputError("kernel_size", kernel_size, "an odd integer >= 1 ('same' padding)")
        super().__init__(input_shape, num_classes, l2)

    @property
    def _hwc(self) -> tuple[int, int, int]:
        h, w = self.input_shape[:2]
        c = self.input_shape[2] if len(self.input_shape) == 3 else 1
        return h, w, c

    def weight_specs(self):
        h, w, c = self._hwc
        ks, f, k = self.kernel_size, self.filters, self.num_classes
        flat = h * w * f
        return [
            ("conv2d/kernel", (ks, ks, c, f), ks * ks * c, ks * ks * f),
            ("conv2d/bias", (f,), 0, 0),
            ("dense/kernel", (flat, k), flat, k),
            ("dense/bias", (k,), 0, 0),
        ]

    def _patches(self, x: np.ndarray) -> np.ndarray:
        """im2col: ``(R, b, H, W[, C]) -> (R, b*H*W, k*k*C)`` in the kernel's (kh, kw, c) order."""
        h, w, c = self._hwc
        r, b = x.shape[:2]
        x = x.reshape(r, b, h, w, c)
        ks, pad = self.kernel_size, self.kernel_size // 2
        padded = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad), (0, 0)))
        taps = [padded[:, :, i : i + h, j : j + w, :] for i in range(ks) for j in range(ks)]
        return np.stack(taps, axis=4).reshape(r, b * h * w, ks * ks * c)

    def _conv(self, weights, patches):
        """ReLU(conv), ``(R, b*H*W, F)``; all groups share the kernel, so one 2-D product."""
        kernel, bias = weights[0], weights[1]
        rows = patches.reshape(-1, patches.shape[-1])
        out = rows @ kernel.reshape(-1, self.filters)
        out += bias
        return np.maximum(out, 0, out=out).reshape(patches.shape[:2] + (self.filters,))

    def grouped_logits(self, weights, x):
        r, b = x.shape[:2]
        conv = self._conv(weights, self._patches(x))
        return _dense(conv.reshape(r, b, -1), weights[2], weights[3])

    def grouped_forward_backward(self, weights, x, y, example_weight, out=None):
        out = out or [None] * 4
        r, b = x.shape[:2]
        patches = self._patches(x)
        conv = self._conv(weights, patches)  # (R, b*H*W, F), post-ReLU
        flat = conv.reshape(r, b, -1)
        logits = _dense(flat, weights[2], weights[3])
        loss, probs = softmax_cross_entropy(logits, y)
        d_logits = _d_logits(probs, y, example_weight)
        d_kernel2, d_bias2 = _dense_grads(flat, d_logits, _pair(out, 2))
        d_conv = _back(d_logits, weights[2]).reshape(conv.shape)
        d_conv *= conv > 0
        d_kernel1, d_bias1 = _dense_grads(patches, d_conv)
        d_kernel1 = d_kernel1.reshape((r,) + weights[0].shape)
        if out[0] is not None:  # the conv kernel is tiny: copying it is cheaper than a strided GEMM output
            out[0][...] = d_kernel1
            out[1][...] = d_bias1
            d_kernel1, d_bias1 = out[0], out[1]
        return ForwardBackward(loss, logits, [d_kernel1, d_bias1, d_kernel2, d_bias2])


def _pair(out: list, i: int):
    """``(out[i], out[i + 1])`` (a kernel and its bias), or None when not writing in place."""
    return None if out[i] is None else (out[i], out[i + 1])


def _d_logits(probs: np.ndarray, y: np.ndarray, example_weight: np.ndarray) -> np.ndarray:
    """Gradient of ``sum_i w_i * CE_i`` w.r.t. logits: ``w_i * (softmax_i - onehot_i)``."""
    d = probs.copy()
    np.put_along_axis(d, y[..., None], np.take_along_axis(d, y[..., None], axis=-1) - 1, axis=-1)
    d *= example_weight[..., None].astype(d.dtype, copy=False)
    return d


#: Model constructors by name, for configs and the CLI.
MODELS: dict[str, type[Model]] = {
    SoftmaxRegression.name: SoftmaxRegression,
    MLP.name: MLP,
    SmallCNN.name: SmallCNN,
}


def make_model(name: str, **kwargs) -> Model:
    """Build a model by name (see :data:`MODELS`)."""
    cls = MODELS[OneOf(tuple(sorted(MODELS)))("model", name)]
    parameters = sorted(inspect.signature(cls).parameters)
    for key, value in kwargs.items():
        if key not in parameters:
            raise InputError(key, value, f"no such argument of {name}; its arguments are {parameters}")
    return cls(**kwargs)
