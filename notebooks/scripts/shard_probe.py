"""Which examples does each worker of a MultiWorkerMirrored cluster get, per auto-shard policy?

Start one copy per worker, each with its TF_CONFIG. For every case
``<source>:<policy>`` it distributes a dataset and prints one line
``RESULT {json}`` with the case and, per step, the values this worker's
replica received (``"values"``), or the error (``"error"``). Sources:
``memory``, the example indices 0..n-1 in memory (no files), and ``tfds``,
MNIST's labels read from TensorFlow Datasets' one training file.
"""

from __future__ import annotations

import argparse
import json
import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import tensorflow as tf  # noqa: E402

strategy = tf.distribute.MultiWorkerMirroredStrategy()  # first: collectives are set up at start-up


def dataset(source: str, examples: int, batch: int) -> tf.data.Dataset:
    if source == "memory":
        return tf.data.Dataset.range(examples).batch(batch)
    import tensorflow_datasets as tfds
    from distsim.datasets import tfds_data_dir

    mnist = tfds.load("mnist", split=f"train[:{examples}]", data_dir=str(tfds_data_dir()), as_supervised=True)
    return mnist.map(lambda image, label: label).batch(batch)


def distribute(source: str, policy: str, examples: int, batch: int) -> list[list[int]]:
    """The values this worker's replica gets at every step (a fresh dataset per case)."""
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = getattr(tf.data.experimental.AutoShardPolicy, policy)
    dist = strategy.experimental_distribute_dataset(dataset(source, examples, batch).with_options(options))
    return [strategy.experimental_local_results(values)[0].numpy().tolist() for values in dist]


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--examples", type=int, default=10)
    p.add_argument("--batch", type=int, default=4, help="global batch")
    p.add_argument("--cases", nargs="+", default=["memory:AUTO", "memory:FILE"], help="<source>:<policy>")
    args = p.parse_args()
    for case in args.cases:
        source, policy = case.split(":")
        try:
            out = {"values": distribute(source, policy, args.examples, args.batch)}
        except tf.errors.OpError as exc:
            out = {"error": f"{type(exc).__name__}: {' '.join(str(exc).split())}"}
        print("RESULT", json.dumps({"case": case, **out}), flush=True)
