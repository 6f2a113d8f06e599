"""Where do a model's variables go with several parameter servers? Then four steps of ``model.fit``.

Starts 2 workers and ``--ps`` parameter servers inside this process (localhost),
builds the MNIST MLP under a ``ParameterServerStrategy`` with a variable
partitioner, prints every variable's parts and the task each sits on, and
trains 4 steps with ``model.fit``. ``--partitioner-file`` names a Python file
whose ``make_partitioner(num_ps)`` returns the partitioner (default:
``MinSizePartitioner``, at least 64 KiB per shard).
"""

from __future__ import annotations

import argparse
import os
import runpy

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")  # set it to 0 to see Keras 3 fail

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from mnist_ps import start_local_cluster  # noqa: E402


def default_partitioner(num_ps: int):
    return tf.distribute.experimental.partitioners.MinSizePartitioner(min_shard_bytes=64 * 1024, max_shards=num_ps)


def where(variable) -> str:
    """``"(392, 128) on /job:ps/task:0, ..."``: the parts of a (possibly sharded) variable."""
    variable = variable if isinstance(variable, tf.Variable) else getattr(variable, "value", variable)  # Keras 3
    parts = getattr(variable, "variables", [variable])
    return ", ".join(f"{tuple(p.shape)} on {p.device.split('/device')[0].replace('/replica:0', '')}" for p in parts)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ps", type=int, default=2)
    p.add_argument("--partitioner-file", help="a .py file defining make_partitioner(num_ps)")
    args = p.parse_args()
    make = runpy.run_path(args.partitioner_file)["make_partitioner"] if args.partitioner_file else default_partitioner
    print("tf.keras is", tf.keras.__name__.split(".")[0])
    strategy = tf.distribute.ParameterServerStrategy(start_local_cluster(2, args.ps),
                                                     variable_partitioner=make(args.ps))
    with strategy.scope():
        model = tf.keras.Sequential([tf.keras.Input((784,)), tf.keras.layers.Dense(128, activation="relu"),
                                     tf.keras.layers.Dense(10)])
        model.compile(tf.keras.optimizers.SGD(0.1), loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    for layer in model.layers:
        for name in ("kernel", "bias"):
            print(f"{layer.name + '/' + name:<15} {where(getattr(layer, name))}")
    x = np.random.default_rng(0).random((256, 784), dtype=np.float32)
    y = np.random.default_rng(1).integers(0, 10, 256)
    try:
        creator = getattr(getattr(tf.keras.utils, "experimental", None), "DatasetCreator", None)
        dataset_fn = lambda context=None: tf.data.Dataset.from_tensor_slices((x, y)).batch(32).repeat()  # noqa: E731
        model.fit(creator(dataset_fn) if creator else dataset_fn(), epochs=1, steps_per_epoch=4, verbose=0)
        print("model.fit: 4 steps ran on the workers")
    except Exception as exc:  # the Keras 3 failure is the point of one of the runs
        print(f"model.fit failed: {type(exc).__name__}: {exc}")
