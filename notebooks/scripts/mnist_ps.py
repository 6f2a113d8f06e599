"""Asynchronous parameter-server training of MNIST, with a ClusterCoordinator loop or ``model.fit``.

On a cluster every task runs this file with its own TF_CONFIG. Workers and
parameter servers only serve; the chief (the coordinator) trains::

    # on every worker and ps machine ("type": "worker" or "ps", its index)
    python mnist_ps.py
    # on the chief
    python mnist_ps.py --loop custom

with, for example, ``TF_CONFIG='{"cluster": {"chief": ["10.0.0.1:2222"],
"worker": ["10.0.0.2:2222", "10.0.0.3:2222"], "ps": ["10.0.0.4:2222"]},
"task": {"type": "chief", "index": 0}}'``. Without a TF_CONFIG the file starts
every worker and ps server inside its own process on localhost (``--workers``,
``--ps``), which is how the workbook runs it on one machine.

Every worker reads its own share of the data (:func:`worker_dataset_fn`): the
stream of batches is dealt out in turns by worker index, so no two workers
train on the same batch.

The workbook's measured runs (``distsim.real.run``) import this file and pass
``wrap``, which records on the parameter server which version of the
variables every update read, and so its staleness; nothing else differs.
"""

from __future__ import annotations

import argparse
import json
import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")  # tf_keras: Keras 3 cannot drive ParameterServerStrategy
os.environ.setdefault("GRPC_FAIL_FAST", "use_caller")  # a call to a dead task fails instead of waiting forever

import tensorflow as tf  # noqa: E402
from mnist_fit import build_model, make_dataset  # noqa: E402  the same model and data as the synchronous runs

from distsim.real import free_ports  # noqa: E402

SERVERS = []  # in-process servers must live as long as the strategy


def server_config(num_workers: int) -> tf.compat.v1.ConfigProto:
    """One inter-op thread per worker plus one: with fewer, a server on few cores can deadlock silently."""
    config = tf.compat.v1.ConfigProto()
    config.inter_op_parallelism_threads = num_workers + 1
    return config


def start_local_cluster(num_workers: int, num_ps: int) -> tf.distribute.cluster_resolver.ClusterResolver:
    """Every worker and ps server inside this process, talking gRPC over localhost."""
    ports = free_ports(num_workers + num_ps)
    spec = tf.train.ClusterSpec({"worker": [f"localhost:{p}" for p in ports[:num_workers]],
                                 "ps": [f"localhost:{p}" for p in ports[num_workers:]]})
    for job, count in (("worker", num_workers), ("ps", num_ps)):
        SERVERS.extend(tf.distribute.Server(spec, job_name=job, task_index=i, config=server_config(num_workers),
                                            protocol="grpc") for i in range(count))
    return tf.distribute.cluster_resolver.SimpleClusterResolver(spec, rpc_layer="grpc")


def serve() -> None:
    """A worker or ps task of a real cluster (from TF_CONFIG): serve until killed."""
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    num_workers = len(resolver.cluster_spec().as_dict().get("worker", []))
    tf.distribute.Server(resolver.cluster_spec(), job_name=resolver.task_type, task_index=resolver.task_id,
                         config=server_config(num_workers), protocol="grpc").join()


def make_strategy(args: argparse.Namespace) -> tf.distribute.ParameterServerStrategy:
    """The strategy over TF_CONFIG's cluster, or over servers started here."""
    if os.environ.get("TF_CONFIG"):
        resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    else:
        resolver = start_local_cluster(args.workers, args.ps)
    return tf.distribute.ParameterServerStrategy(resolver)


def count_workers(args: argparse.Namespace) -> int:
    """The cluster's worker tasks: TF_CONFIG's, or the ``--workers`` started here."""
    if os.environ.get("TF_CONFIG"):
        return tf.distribute.cluster_resolver.TFConfigClusterResolver().cluster_spec().num_tasks("worker")
    return args.workers


def update(model: tf.keras.Model, optimizer, x, y):
    """One worker step: forward, backward, apply on the parameter servers. Returns ``(logits, loss)``."""
    with tf.GradientTape() as tape:
        logits = model(x, training=True)
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
        loss += tf.add_n([tf.constant(0.0), *model.losses])  # regularization, if the model has any
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return logits, loss


def no_wrap(step, model):
    return step


def worker_dataset_fn(args: argparse.Namespace):
    """The ``dataset_fn`` every worker runs: its own share of the batches.

    ``input_context`` cannot tell the workers apart here: under
    ParameterServerStrategy it always says input pipeline 0 of 1
    (``_distribute_datasets_from_function``, TensorFlow 2.21's
    ``python/distribute/parameter_server_strategy_v2.py`` lines 985-995), so
    sharding by ``input_context.input_pipeline_id`` would change nothing. The
    coordinator traces this function once and every worker runs that one graph,
    so a seed fixed here is the same on every worker too. The worker's index is
    filled in when the function runs on a worker: TensorFlow's own example of
    ``experimental_get_current_worker_index`` shards a dataset by it
    (``python/distribute/coordinator/coordinator_context.py`` lines 81-111).
    """
    num_workers = count_workers(args)
    examples = args.examples or min(60_000, args.batch * args.steps)

    def dataset_fn(input_context=None):
        worker = tf.distribute.coordinator.experimental_get_current_worker_index()
        # Worker w takes batches w, w + W, w + 2W, ... of the one repeating stream of batches.
        return make_dataset(args.batch, examples, args.seed, args.shuffle).shard(num_workers, worker)

    return dataset_fn


def train_custom(strategy, args, callbacks=(), wrap=no_wrap) -> dict:
    """A ClusterCoordinator loop: schedule steps on whichever worker is free, join, fetch."""
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    with strategy.scope():  # the variables go to the parameter servers
        model = build_model(args.model, args.seed, **args.sizes)
        optimizer = tf.keras.optimizers.SGD(args.lr)
        step = wrap(lambda x, y: update(model, optimizer, x, y), model)
    # Every worker builds its own input pipeline, and keeps its own share of the batches.
    per_worker = coordinator.create_per_worker_dataset(worker_dataset_fn(args))
    iterator = iter(per_worker)

    @tf.function
    def train_steps(iterator):  # runs on a worker: steps_per_execution updates
        loss = tf.constant(0.0)
        for _ in tf.range(args.steps_per_execution):
            x, y = next(iterator)
            loss = strategy.run(lambda x, y: step(x, y)[1], args=(x, y))
        return loss

    history = {"loss": []}
    for epoch in range(args.epochs):
        losses = [coordinator.schedule(train_steps, args=(iterator,))
                  for _ in range(args.steps // args.steps_per_execution)]
        coordinator.join()  # every scheduled step has run
        history["loss"].append(float(losses[-1].fetch()))
        for callback in callbacks:
            callback.on_epoch_end(epoch, {"loss": history["loss"][-1]})
    return history


class StepModel(tf.keras.Model):
    """``model.fit`` with our own training step, so that fit and the custom loop run the same update."""

    def __init__(self, net: tf.keras.Model) -> None:
        super().__init__()
        self.net = net
        self.step = None

    def call(self, x, training=False):
        return self.net(x, training=training)

    def train_step(self, data):
        x, y = data
        logits, loss = self.step(x, y)
        self.compiled_metrics.update_state(y, logits)
        return {"loss": loss, **{m.name: m.result() for m in self.metrics}}


def train_fit(strategy, args, callbacks=(), wrap=no_wrap) -> dict:
    """``model.fit``, which creates the ClusterCoordinator and schedules the steps itself."""
    with strategy.scope():
        net = build_model(args.model, args.seed, **args.sizes)
        model = StepModel(net)
        model.compile(optimizer=tf.keras.optimizers.SGD(args.lr), metrics=["accuracy"],
                      steps_per_execution=args.steps_per_execution)
        model.step = wrap(lambda x, y: update(net, model.optimizer, x, y), net)
    creator = tf.keras.utils.experimental.DatasetCreator(worker_dataset_fn(args))  # run on every worker
    return model.fit(creator, epochs=args.epochs, steps_per_epoch=args.steps, verbose=0,
                     callbacks=list(callbacks)).history


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--loop", choices=("custom", "fit"), default="custom")
    p.add_argument("--workers", type=int, default=2, help="in-process workers (without a TF_CONFIG)")
    p.add_argument("--ps", type=int, default=1, help="in-process parameter servers (without a TF_CONFIG)")
    p.add_argument("--batch", type=int, default=64, help="examples per update")
    p.add_argument("--steps", type=int, default=40, help="updates per epoch, over all workers")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--model", choices=("softmax_regression", "mlp", "small_cnn"), default="mlp")
    p.add_argument("--sizes", type=json.loads, default={}, help='JSON, e.g. \'{"hidden": 128}\'')
    p.add_argument("--lr", type=float, default=0.1, help="SGD learning rate")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--examples", type=int, help="MNIST examples (default: one epoch's worth)")
    p.add_argument("--shuffle", type=int, default=0, help="shuffle buffer (0: the same order every epoch)")
    p.add_argument("--steps-per-execution", type=int, default=1, help="updates per scheduled function")
    return p.parse_args(argv)


if __name__ == "__main__":
    task = json.loads(os.environ.get("TF_CONFIG") or "{}").get("task", {})
    if task.get("type") in ("worker", "ps"):
        serve()
    else:
        args = parse_args()
        print(json.dumps((train_custom if args.loop == "custom" else train_fit)(make_strategy(args), args)))
