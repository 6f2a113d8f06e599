"""Train MNIST with Keras ``model.fit`` under a ``tf.distribute`` strategy.

One file for every synchronous strategy. On one machine::

    python mnist_fit.py --strategy mirrored      # every GPU, or every (logical) CPU device

On a cluster, copy the workbook (this file and its offline MNIST) to every
machine and start this file there with that machine's TF_CONFIG; only the
task index differs from machine to machine::

    export TF_CONFIG='{"cluster": {"worker": ["10.0.0.1:12345", "10.0.0.2:12345"]},
                       "task": {"type": "worker", "index": 0}}'
    python mnist_fit.py --strategy multi_worker_mirrored --backup-dir /shared/backup --model-dir /shared/model

The workbook's measured runs (``distsim.real.run``) import this file and call
:func:`make_strategy` and :func:`train`, adding one callback that times every
step; nothing else differs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
from pathlib import Path

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")  # tf_keras: model.fit under MultiWorkerMirrored needs Keras 2

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from distsim.datasets import mnist_subset  # noqa: E402  real MNIST, shipped with the workbook
from distsim.numerics import make_model  # noqa: E402  the simulator's NumPy twin of the model

STRATEGIES = ("default", "one_device", "mirrored", "central_storage", "multi_worker_mirrored", "tpu")
CROSS_DEVICE_OPS = ("auto", "reduction_to_one_device", "hierarchical_copy", "nccl")
COMMUNICATIONS = ("auto", "ring", "nccl")


def make_strategy(name: str, cross_device_op: str = "auto", communication: str = "auto") -> tf.distribute.Strategy:
    """The strategy. Create it first: MultiWorkerMirrored sets up collectives before any other op runs."""
    if name == "multi_worker_mirrored":  # the cluster comes from TF_CONFIG
        implementation = getattr(tf.distribute.experimental.CommunicationImplementation, communication.upper())
        options = tf.distribute.experimental.CommunicationOptions(implementation=implementation)
        return tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    gpus = [d.name for d in tf.config.list_logical_devices("GPU")]
    devices = gpus or [d.name for d in tf.config.list_logical_devices("CPU")]
    if name == "mirrored":  # cross_device_ops=None: TensorFlow's own choice
        op = {"auto": None, "reduction_to_one_device": tf.distribute.ReductionToOneDevice,
              "hierarchical_copy": tf.distribute.HierarchicalCopyAllReduce,
              "nccl": tf.distribute.NcclAllReduce}[cross_device_op]
        return tf.distribute.MirroredStrategy(devices, cross_device_ops=op() if op else None)
    if name == "central_storage":  # one copy of the variables, on the host CPU
        return tf.distribute.experimental.CentralStorageStrategy(compute_devices=devices, parameter_device="/cpu:0")
    if name == "one_device":
        return tf.distribute.OneDeviceStrategy(devices[0])
    if name == "tpu":  # a TPU attached to this machine (Colab, Kaggle): its name is "local"
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu="local")
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
        return tf.distribute.TPUStrategy(resolver)
    return tf.distribute.get_strategy()  # "default": no strategy at all


def make_dataset(global_batch: int, examples: int, seed: int = 0, shuffle: int = 0, prefetch: bool = False,
                 shard_policy: str = "DATA") -> tf.data.Dataset:
    """Repeating MNIST batches of the GLOBAL batch size; the strategy cuts each into per-replica pieces."""
    mnist = mnist_subset(examples, 1)
    ds = tf.data.Dataset.from_tensor_slices((mnist.x_train, mnist.y_train))
    if shuffle:  # before repeat: every epoch shows every example once
        ds = ds.shuffle(shuffle, seed=seed, reshuffle_each_iteration=True)
    ds = ds.batch(global_batch, drop_remainder=True).repeat()
    if prefetch:
        ds = ds.prefetch(1)
    options = tf.data.Options()  # say how workers split the data; in-memory data has no files to split
    options.experimental_distribute.auto_shard_policy = getattr(tf.data.experimental.AutoShardPolicy, shard_policy)
    options.deterministic = True
    return ds.with_options(options)


def build_model(name: str = "mlp", seed: int = 0, **sizes) -> tf.keras.Model:
    """A small MNIST model (``sizes``: ``hidden``, ``filters``, ``l2``), from distsim's seeded
    initial weights, so that the simulator's NumPy twin trains exactly the same numbers."""
    twin = make_model(name, **sizes)
    reg = tf.keras.regularizers.L2(twin.l2) if twin.l2 else None
    layers = [tf.keras.Input(twin.input_shape)]
    if name == "small_cnn":
        layers += [tf.keras.layers.Reshape((*twin.input_shape, 1)),
                   tf.keras.layers.Conv2D(twin.filters, twin.kernel_size, padding="same", activation="relu",
                                          kernel_regularizer=reg)]
    layers.append(tf.keras.layers.Flatten())
    if name == "mlp":
        layers.append(tf.keras.layers.Dense(twin.hidden, activation="relu", kernel_regularizer=reg))
    layers.append(tf.keras.layers.Dense(twin.num_classes, kernel_regularizer=reg))
    model = tf.keras.Sequential(layers)
    model.set_weights(twin.init(seed, np.float32))
    return model


def compile_model(model: tf.keras.Model, learning_rate: float, steps_per_execution: int = 1) -> None:
    """Plain SGD on softmax cross-entropy, reporting loss and accuracy."""
    # tf_keras' default ("auto" -> "sum") adds up the already synchronised loss of
    # every MultiWorkerMirrored worker: W times the true value. "first" reports it once.
    model.distribute_reduction_method = "first"
    model.compile(optimizer=tf.keras.optimizers.SGD(learning_rate),
                  loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"], steps_per_execution=steps_per_execution)


def is_chief() -> bool:
    """Whether this task writes: the "chief" task, or worker 0 when there is none (TensorFlow's rule)."""
    config = json.loads(os.environ.get("TF_CONFIG") or "{}")
    task = config.get("task")
    if not task:
        return True
    return task["type"] == "chief" or (task["type"] == "worker" and task["index"] == 0
                                       and "chief" not in config["cluster"])


def save_final_model(model: tf.keras.Model, model_dir: str) -> None:
    """Every worker saves (saving runs collectives); only the chief keeps its copy."""
    model_dir = Path(model_dir)
    target = model_dir / "model" if is_chief() else model_dir / f"tmp_{os.getpid()}"
    model.save(str(target))
    if is_chief():
        np.savez(model_dir / "final_weights.npz", *model.get_weights())  # readable without TensorFlow
    else:
        shutil.rmtree(target, ignore_errors=True)


def train(args: argparse.Namespace, callbacks=(), strategy: tf.distribute.Strategy | None = None):
    """Train as ``args`` say; returns ``(model, history)``."""
    strategy = strategy or make_strategy(args.strategy, args.cross_device_op, args.communication)
    tf.keras.utils.set_random_seed(args.seed)
    global_batch = args.batch * strategy.num_replicas_in_sync  # batch with the GLOBAL size
    examples = args.examples or min(60_000, global_batch * args.steps)
    with strategy.scope():  # variables created here are mirrored (or placed) by the strategy
        model = build_model(args.model, args.seed, **args.sizes)
        compile_model(model, args.lr, args.steps_per_execution)
    if args.backup_dir:  # checkpoint every epoch; a relaunch resumes from the last one
        callbacks = [tf.keras.callbacks.BackupAndRestore(args.backup_dir, save_freq="epoch"), *callbacks]
    history = model.fit(make_dataset(global_batch, examples, args.seed, args.shuffle, args.prefetch, args.shard_policy),
                        epochs=args.epochs, steps_per_epoch=args.steps, verbose=0, callbacks=list(callbacks))
    if args.model_dir:
        save_final_model(model, args.model_dir)
    return model, history


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--strategy", choices=STRATEGIES, default="mirrored")
    p.add_argument("--cross-device-op", choices=CROSS_DEVICE_OPS, default="auto", help="mirrored only")
    p.add_argument("--communication", choices=COMMUNICATIONS, default="auto", help="multi_worker_mirrored only")
    p.add_argument("--batch", type=int, default=64, help="examples per replica per step")
    p.add_argument("--steps", type=int, default=20, help="steps per epoch")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--model", choices=("softmax_regression", "mlp", "small_cnn"), default="mlp")
    p.add_argument("--sizes", type=json.loads, default={}, help='JSON, e.g. \'{"hidden": 128}\'')
    p.add_argument("--lr", type=float, default=0.1, help="SGD learning rate")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--examples", type=int, help="MNIST examples (default: one epoch's worth)")
    p.add_argument("--shuffle", type=int, default=0, help="shuffle buffer (0: the same order every epoch)")
    p.add_argument("--prefetch", action="store_true")
    p.add_argument("--shard-policy", choices=("DATA", "OFF"), default="DATA")
    p.add_argument("--steps-per-execution", type=int, default=1)
    p.add_argument("--backup-dir", help="BackupAndRestore folder, the same path on every worker")
    p.add_argument("--model-dir", help="save the trained model here (the chief keeps it)")
    return p.parse_args(argv)


if __name__ == "__main__":
    _, history = train(parse_args())
    print(json.dumps({key: [round(v, 4) for v in values] for key, values in history.history.items()}))
