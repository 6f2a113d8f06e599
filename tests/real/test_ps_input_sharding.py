"""The parameter-server script gives every worker its own batches, in its custom loop and in fit (a real cluster).

Two workers and one PS inside one subprocess, over localhost gRPC. A function
scheduled with the ClusterCoordinator reads one batch from the worker's own
iterator and returns it with ``experimental_get_current_worker_index()``;
every image is mapped back to its MNIST index by its bytes. TensorFlow says
which worker ran each batch, and the MNIST file says which example it was:
neither comes from the script under test.
"""

from __future__ import annotations

import json

import pytest

from distsim.real import run_python

pytestmark = pytest.mark.tf

BATCH, STEPS = 4, 12  # 12 batches a pass: even, so worker w's batches keep their parity when the stream repeats

PROBE = f'''
import json
from distsim.datasets import mnist_subset
from distsim.real.scripts import load_script

ps = load_script("mnist_ps")
tf = ps.tf
args = ps.parse_args(["--workers", "2", "--ps", "1", "--batch", "{BATCH}", "--steps", "{STEPS}"])
strategy = ps.make_strategy(args)
coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
index_of = {{x.tobytes(): i for i, x in enumerate(mnist_subset(args.batch * args.steps, 1).x_train)}}
assert len(index_of) == args.batch * args.steps  # no two images alike: bytes identify an example


@tf.function
def next_batch(iterator):
    x, _ = next(iterator)
    return tf.distribute.coordinator.experimental_get_current_worker_index(), x


def examples_by_worker(dataset_fn):
    """MNIST indices each worker trained on, scheduling until both have read at least two batches."""
    iterator = iter(coordinator.create_per_worker_dataset(dataset_fn))
    seen = {{0: set(), 1: set()}}
    for _ in range(25):
        batches = [coordinator.schedule(next_batch, args=(iterator,)) for _ in range(4)]
        coordinator.join()
        for remote in batches:
            worker, x = remote.fetch()
            seen[int(worker)].update(index_of[image.tobytes()] for image in x)
        if min(len(s) for s in seen.values()) >= 2 * args.batch:
            break
    return {{w: sorted(s) for w, s in seen.items()}}


def one_stream():
    """The script's old dataset_fn: every worker the same pipeline, from the first batch."""
    return ps.make_dataset(args.batch, args.batch * args.steps, args.seed, args.shuffle)


def as_fit_builds_it():
    """The same dataset_fn as tf_keras' model.fit wraps a DatasetCreator under this strategy
    (tf_keras/src/engine/data_adapter.py, _ClusterCoordinatorDataHandler)."""
    return strategy.distribute_datasets_from_function(ps.worker_dataset_fn(args))


def by_input_context():
    """Sharded by the input context, as TensorFlow's parameter-server tutorial does."""
    return strategy.distribute_datasets_from_function(
        lambda ctx: one_stream().shard(ctx.num_input_pipelines, ctx.input_pipeline_id))


print(json.dumps({{"script": examples_by_worker(ps.worker_dataset_fn(args)),
                  "fit": examples_by_worker(as_fit_builds_it),
                  "one_stream": examples_by_worker(one_stream),
                  "input_context": examples_by_worker(by_input_context)}}))
'''


@pytest.fixture(scope="module")
def seen():
    out = run_python(PROBE, env={"GRPC_FAIL_FAST": "use_caller"}, timeout_s=240)
    return {k: {int(w): set(ix) for w, ix in v.items()} for k, v in json.loads(out.splitlines()[-1]).items()}


@pytest.mark.parametrize("loop", ["script", "fit"])
def test_the_two_workers_never_see_the_same_example(seen, loop):
    assert len(seen[loop][0]) >= 2 * BATCH and len(seen[loop][1]) >= 2 * BATCH
    assert not seen[loop][0] & seen[loop][1]


@pytest.mark.parametrize("loop", ["script", "fit"])
def test_each_worker_reads_every_other_batch(seen, loop):
    # By hand: unshuffled, batch b holds examples b*BATCH .. b*BATCH+3, and worker w takes batches w, w+2, ...
    for worker, examples in seen[loop].items():
        assert {i // BATCH % 2 for i in examples} == {worker}


def test_without_sharding_the_workers_share_batches(seen):
    # The control: one unsharded pipeline per worker hands both workers batch 0 first, so this check can fail.
    assert set(range(BATCH)) <= seen["one_stream"][0] & seen["one_stream"][1]


def test_the_input_context_cannot_tell_the_workers_apart(seen):
    # Under ParameterServerStrategy every worker's input context says pipeline 0 of 1
    # (parameter_server_strategy_v2.py, _distribute_datasets_from_function): sharding by it keeps everything.
    assert set(range(BATCH)) <= seen["input_context"][0] & seen["input_context"][1]
