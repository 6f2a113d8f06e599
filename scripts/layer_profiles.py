"""Per-tensor gradient sizes, ready times and activation bytes of the preset models.

    flock /work/cpu.lock .venv/bin/python scripts/layer_profiles.py           # print a summary
    flock /work/cpu.lock .venv/bin/python scripts/layer_profiles.py --write   # update the presets

Builds each preset model in Keras (``keras.applications`` with ``weights=None``
and 1000 classes; AlexNet as tf_cnn_benchmarks' ``alexnet_model.py`` defines
it, with a 1001-way head as that benchmark uses; the MNIST models as the Keras
twins of ``distsim.numerics.models``) and reads off, with no training:

* ``tensor_params``: every trainable variable's element count, in
  ``model.trainable_weights`` order (the order the layers create them, first
  layer first);
* ``tensor_ready``: for each variable, the share of the backward pass done when
  its gradient is ready. The backward pass runs the layers in reverse; a
  layer's backward costs are taken proportional to its forward multiply-adds
  (convolutions, depthwise convolutions, dense layers; batch norm, activations,
  pooling and adds count as 0), so layer ``l``'s gradients are ready after the
  share ``sum(flops of layers >= l) / sum(all flops)``;
* ``activation_bytes_per_sample``: the float32 bytes of the tensors one
  example must keep for the backward pass, each counted once: the input of
  every convolution, dense, batch-norm and max-pooling layer (their
  gradients read it) and the output of every activation (ReLU's gradient
  reads it); adds, concatenations, paddings, reshapes, average pooling and
  dropout keep nothing of their own. Frameworks keep at least these, so it
  is a lower bound, as the memory check of ``distsim.mechanics.memory`` needs
  (summing every layer's output would double-count and overshoot: ResNet-152
  at 64 images would not fit the 16 GB P100 it was benchmarked on);
* ``flops_per_sample`` (new presets): 3 x forward FLOPs (forward + backward),
  2 FLOPs per multiply-add, from the same count.

``--write`` puts these numbers into ``distsim/scenario/presets/workloads.json``
with this script named as their source.
"""

from __future__ import annotations

import argparse
import json
import math
import os
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import keras  # noqa: E402  (after the environment switches)

PRESETS = Path(__file__).resolve().parents[1] / "distsim" / "scenario" / "presets" / "workloads.json"
SOURCE = "scripts/layer_profiles.py ({what}) on keras {version}: {model}"


def alexnet() -> keras.Model:
    """tf_cnn_benchmarks' AlexNet (models/alexnet_model.py): 227x227 input
    (224 + 3 for VALID padding), five convolutions, two 4096 dense layers and
    the benchmark's 1001-class logits."""
    layers = keras.layers
    return keras.Sequential([
        keras.Input((227, 227, 3)),
        layers.Conv2D(64, 11, strides=4, padding="valid", activation="relu"),
        layers.MaxPooling2D(3, 2),
        layers.Conv2D(192, 5, padding="same", activation="relu"),
        layers.MaxPooling2D(3, 2),
        layers.Conv2D(384, 3, padding="same", activation="relu"),
        layers.Conv2D(384, 3, padding="same", activation="relu"),
        layers.Conv2D(256, 3, padding="same", activation="relu"),
        layers.MaxPooling2D(3, 2),
        layers.Flatten(),
        layers.Dense(4096, activation="relu"),
        layers.Dropout(0.5),
        layers.Dense(4096, activation="relu"),
        layers.Dropout(0.5),
        layers.Dense(1001),
    ], name="alexnet")


def mnist(kind: str) -> keras.Model:
    """The Keras twins of distsim.numerics.models (SoftmaxRegression, MLP(128), SmallCNN(8))."""
    layers = keras.layers
    body = {
        "softmax": [layers.Flatten(), layers.Dense(10)],
        "mlp": [layers.Flatten(), layers.Dense(128, activation="relu"), layers.Dense(10)],
        "small_cnn": [layers.Reshape((28, 28, 1)), layers.Conv2D(8, 3, padding="same", activation="relu"),
                      layers.Flatten(), layers.Dense(10)],
    }[kind]
    return keras.Sequential([keras.Input((28, 28)), *body], name=f"mnist_{kind}")


#: Preset name -> (builder, words for the source).
MODELS = {
    "mnist_softmax": (lambda: mnist("softmax"), "Flatten -> Dense(10)"),
    "mnist_mlp": (lambda: mnist("mlp"), "Flatten -> Dense(128, relu) -> Dense(10)"),
    "mnist_small_cnn": (lambda: mnist("small_cnn"), "Conv2D(8, 3x3, same) -> Flatten -> Dense(10)"),
    "mobilenet_v2_224": (lambda: keras.applications.MobileNetV2(weights=None), "keras.applications.MobileNetV2(weights=None)"),
    "mobilenet_v2_224_2class": (lambda: keras.applications.MobileNetV2(weights=None, classes=2),
                                "keras.applications.MobileNetV2(weights=None, classes=2)"),
    "resnet50_224": (lambda: keras.applications.ResNet50(weights=None), "keras.applications.ResNet50(weights=None)"),
    "resnet101_224": (lambda: keras.applications.ResNet101(weights=None), "keras.applications.ResNet101(weights=None)"),
    "resnet152_224": (lambda: keras.applications.ResNet152(weights=None), "keras.applications.ResNet152(weights=None)"),
    "vgg16_224": (lambda: keras.applications.VGG16(weights=None), "keras.applications.VGG16(weights=None)"),
    "inception_v3_299": (lambda: keras.applications.InceptionV3(weights=None),
                         "keras.applications.InceptionV3(weights=None)"),
    "alexnet_227": (alexnet, "tf_cnn_benchmarks models/alexnet_model.py as Keras layers, 1001 classes"),
}


def _elements(shape) -> int:
    return math.prod(int(d) for d in shape[1:])


def layer_flops(layer) -> int:
    """Forward FLOPs per example (2 per multiply-add) of the layers that do matrix work."""
    if isinstance(layer, keras.layers.DepthwiseConv2D):
        kh, kw = layer.kernel_size
        return 2 * _elements(layer.output.shape) * kh * kw
    if isinstance(layer, keras.layers.Conv2D):
        kh, kw = layer.kernel_size
        cin = int(layer.input.shape[-1])
        return 2 * _elements(layer.output.shape) * kh * kw * cin // layer.groups
    if isinstance(layer, keras.layers.Dense):
        return 2 * int(layer.input.shape[-1]) * int(layer.units)
    return 0


#: Layers whose backward pass reads their input, and those that read their output.
_READS_INPUT = (keras.layers.Conv2D, keras.layers.DepthwiseConv2D, keras.layers.Dense, keras.layers.BatchNormalization,
                keras.layers.MaxPooling2D)
_READS_OUTPUT = (keras.layers.ReLU, keras.layers.Activation)


def kept_bytes(layers) -> int:
    """Float32 bytes of the tensors the backward pass needs (see the module docstring)."""
    kept = {}
    for layer in layers:
        if isinstance(layer, _READS_INPUT):
            kept[id(layer.input)] = _elements(layer.input.shape)
        if isinstance(layer, _READS_OUTPUT) or getattr(layer, "activation", None) not in (None, keras.activations.linear):
            kept[id(layer.output)] = _elements(layer.output.shape)
    return 4 * sum(kept.values())


def profile(model: keras.Model) -> dict:
    layers = [layer for layer in model.layers if not isinstance(layer, keras.layers.InputLayer)]
    flops = [layer_flops(layer) for layer in layers]
    total = sum(flops)
    # Share of the backward pass done once layer i (and every later layer) is through.
    done_after = {}
    remaining = 0
    for layer, f in zip(reversed(layers), reversed(flops)):
        remaining += f
        done_after[id(layer)] = remaining / total
    owner = {id(w): layer for layer in layers for w in layer.trainable_weights}
    weights = model.trainable_weights
    params = [int(math.prod(w.shape)) for w in weights]
    ready = [round(done_after[id(owner[id(w)])], 6) for w in weights]
    ready = [min(max(r, 1e-6), 1.0) for r in ready]  # a ready share is > 0
    for i in range(len(ready) - 2, -1, -1):  # rounding must not break the order
        ready[i] = max(ready[i], ready[i + 1])
    activation = kept_bytes(layers)
    return {"num_params": sum(params), "num_gradient_tensors": len(params), "tensor_params": params,
            "tensor_ready": ready, "activation_bytes_per_sample": activation, "forward_flops": total}


def _field(value, source: str) -> dict:
    return {"value": value, "source": source}


def update_presets(profiles: dict) -> None:
    data = json.loads(PRESETS.read_text())
    version = keras.__version__
    for name, prof in profiles.items():
        words = MODELS[name][1]
        entry = data["presets"].setdefault(name, {})
        src = lambda what: SOURCE.format(what=what, version=version, model=words)  # noqa: E731
        entry["num_params"] = _field(prof["num_params"], src("sum of tensor_params: trainable parameters"))
        entry["num_gradient_tensors"] = _field(prof["num_gradient_tensors"], src("trainable variables"))
        entry["tensor_params"] = _field(prof["tensor_params"], src("elements of each trainable variable, creation order"))
        entry["tensor_ready"] = _field(prof["tensor_ready"], src(
            "share of the backward pass done when each variable's gradient is ready, layer FLOPs as backward cost"))
        entry["activation_bytes_per_sample"] = _field(prof["activation_bytes_per_sample"], src(
            "float32 bytes of the tensors the backward pass reads: inputs of convolution, dense, batch-norm and "
            "max-pooling layers, outputs of activations, each once"))
        if "flops_per_sample" not in entry:
            entry["flops_per_sample"] = _field(3 * prof["forward_flops"], src(
                "3 x forward FLOPs (2 per multiply-add) of the convolution and dense layers"))
    PRESETS.write_text(_format(data))


def _format(data: dict) -> str:
    """The presets file with one line per field (long lists stay on their line)."""
    head = {k: v for k, v in data.items() if k != "presets"}
    lines = ["{"] + [f"  {json.dumps(k)}: {json.dumps(v)}," for k, v in head.items()] + ['  "presets": {']
    names = list(data["presets"])
    for i, name in enumerate(names):
        fields = data["presets"][name]
        lines.append(f"    {json.dumps(name)}: {{")
        keys = list(fields)
        for j, key in enumerate(keys):
            lines.append(f"      {json.dumps(key)}: {json.dumps(fields[key])}{',' if j < len(keys) - 1 else ''}")
        lines.append("    }" + ("," if i < len(names) - 1 else ""))
    lines += ["  }", "}"]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="update distsim/scenario/presets/workloads.json")
    parser.add_argument("models", nargs="*", default=list(MODELS), help="preset names (default: all)")
    args = parser.parse_args()
    profiles = {}
    for name in args.models:
        model = MODELS[name][0]()
        profiles[name] = profile(model)
        p = profiles[name]
        print(f"{name:26s} {p['num_params']:>12,} params in {p['num_gradient_tensors']:>4} tensors, "
              f"{p['forward_flops'] / 1e9:8.3f} GFLOP forward, {p['activation_bytes_per_sample'] / 1e6:8.2f} MB "
              f"activations per example, first ready {p['tensor_ready'][-1]:.3f}")
        keras.backend.clear_session()
    if args.write:
        update_presets(profiles)


if __name__ == "__main__":
    main()
