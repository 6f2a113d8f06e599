"""Micro-benchmarks for calibration, run inside a task process (imports TensorFlow).

Three parts, each in its own process because they need different device setups:

* ``single`` (one process, one logical CPU, as in a one-device run):
  single-replica training step time against the per-replica batch (real
  ``model.fit`` steps, measured by the same callback as every run), the input
  pipeline's seconds per example, a large matmul's FLOP rate and a
  memory-copy rate;
* ``local`` (one process, ``max(devices)`` logical CPUs): the step time of a
  tiny batch on 1, 2, ..., N logical devices (what each extra replica costs
  the host) and the all-reduce time against message size across 2..N
  logical devices with the cross-device op Mirrored uses here;
* ``collective`` (one process per worker, a MultiWorkerMirrored cluster): the
  all-reduce time against message size across the worker processes.

Every timing is a median over repeated calls after warm-up calls. All-reduce
times have the time of the same call without the all-reduce subtracted, so
they hold only the collective. Each call issues :data:`ALLREDUCES_PER_CALL`
all-reduces and the calls run back to back, as a Keras training step issues
its gradient and metric all-reduces one step after another; the time per
all-reduce in that steady state is what a step pays (a lone all-reduce after
a pause costs more, because its peers are not yet waiting for it).
:mod:`distsim.real.calibrate` fits the simulator's parameters to these numbers.
"""

from __future__ import annotations

import gc
import json
import os
import time

import numpy as np

from distsim.real.env import prepare_environment

prepare_environment()
import tensorflow as tf  # noqa: E402

from distsim.real.building import configure_for_plan, run_meta, strategy_info  # noqa: E402
from distsim.real.protocol import TINY_BATCH  # noqa: E402
from distsim.real.env import describe_tensorflow  # noqa: E402
from distsim.real.plan import RunPlan  # noqa: E402
from distsim.real.runners import StepTimer  # noqa: E402
from distsim.real.scripts import FIT_SCRIPT, load_script, script_args  # noqa: E402

#: The training script whose model, data and fit the benchmarks time.
SCRIPT = load_script(FIT_SCRIPT)

#: Independent all-reduces per benchmark call: a MultiWorkerMirrored Keras step
#: issues 5 (the packed gradient and 4 metric scalars).
ALLREDUCES_PER_CALL = 4


def median_call_s(fn, *, calls: int = 25, warmup: int = 3) -> float:
    """Median seconds of ``fn()`` (which must block until its work is done)."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(calls):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return float(np.median(times))


def paired_difference_s(fn, base, *, calls: int = 40, blocks: int = 4, warmup: int = 3) -> float:
    """``median time(fn) - median time(base)`` in seconds, over ``calls`` calls of each.

    The calls run back to back in ``blocks`` alternating blocks: back to back
    because a collective costs less when its peers are already polling (as in
    a training loop) than after a pause, and alternating blocks so that slow
    drifts in machine load hit both alike.
    """
    for _ in range(warmup):
        fn()
        base()
    times: dict[int, list[float]] = {0: [], 1: []}
    per_block = max(1, calls // blocks)
    for _ in range(blocks):
        for which, f in enumerate((fn, base)):
            for _ in range(per_block):
                t = time.perf_counter()
                f()
                times[which].append(time.perf_counter() - t)
    return float(np.median(times[0]) - np.median(times[1]))


def _median_step_s(strategy: tf.distribute.Strategy, plan: RunPlan, steps: int, skip: int = 5) -> float:
    """Median step seconds of the script's ``train`` for ``plan`` under ``strategy`` (the first ``skip`` left out)."""
    timer = StepTimer(steps + skip)
    args = SCRIPT.parse_args(script_args(plan.with_(steps_per_epoch=steps + skip, epochs=1)))
    model, _ = SCRIPT.train(args, callbacks=[timer], strategy=strategy)
    # A finished fit's input iterator keeps its prefetch thread until collected,
    # and those threads would slow every later measurement in this process.
    del model
    gc.collect()
    tf.keras.backend.clear_session()
    return float(np.median((np.asarray(timer.end_s) - np.asarray(timer.begin_s))[skip:]))


def step_time_curve(plan: RunPlan, batches: list[int], steps: int) -> list[float]:
    """Median training-step seconds of one replica (OneDeviceStrategy) for each batch."""
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    return [
        _median_step_s(strategy, plan.with_(strategy="one_device", per_replica_batch=b, replicas_per_worker=1,
                                            n_train=None, steps_per_epoch=steps), steps)
        for b in batches
    ]


def replica_step_times(plan: RunPlan, counts: list[int], batch: int, steps: int,
                       strategy: str = "mirrored") -> list[float]:
    """Median step seconds with ``batch`` examples per replica on the first n
    logical CPUs, for each n in ``counts``, under ``strategy``: "mirrored" (a
    copy of the variables on every device, summed with ReductionToOneDevice, the
    op the calibrated link is fitted on) or "central_storage" (one copy, on the
    first device). With a tiny batch the step is host work, so the growth with
    n is what each replica adds. The strategies span a subset of this process's
    devices, which the script's own ``make_strategy`` (all devices) does not do."""
    cpus = [d.name for d in tf.config.list_logical_devices("CPU")]
    out = []
    for n in counts:
        p = plan.with_(strategy=strategy, device="cpu", cross_device_op="reduction_to_one_device",
                       per_replica_batch=batch, replicas_per_worker=n, n_train=None, steps_per_epoch=steps)
        if strategy == "mirrored":
            built = tf.distribute.MirroredStrategy(cpus[:n], cross_device_ops=tf.distribute.ReductionToOneDevice())
        else:
            built = tf.distribute.experimental.CentralStorageStrategy(compute_devices=cpus[:n],
                                                                      parameter_device="/cpu:0")
        out.append(_median_step_s(built, p, steps))
    return out


def input_seconds_per_example(plan: RunPlan, batches: int = 200) -> float:
    """Seconds per example of the training input pipeline alone, run inside TensorFlow.

    The batches are consumed by ``Dataset.reduce`` (no Python per batch), as
    the training step's iterator consumes them.
    """
    p = plan.with_(per_replica_batch=64, steps_per_epoch=batches, replicas_per_worker=1, strategy="one_device")
    ds = SCRIPT.make_dataset(p.global_batch, p.examples, p.seed, p.shuffle_buffer, bool(p.prefetch),
                             p.shard_policy).take(batches)
    count = tf.function(lambda: ds.reduce(tf.constant(0, tf.int64), lambda n, xy: n + tf.shape(xy[1], tf.int64)[0]))
    count()  # build the pipeline and trace
    return median_call_s(lambda: count().numpy(), calls=5, warmup=0) / (batches * p.batch_per_call)


def matmul_flops_per_s(n: int = 1024) -> float:
    """FLOP/s of an ``n x n`` float32 matmul with every core TensorFlow uses."""
    a = tf.random.stateless_uniform([n, n], seed=[1, 2])
    f = tf.function(lambda x: tf.reduce_sum(tf.matmul(x, x)))
    return 2.0 * n**3 / median_call_s(lambda: f(a).numpy(), calls=10)


def memory_bytes_per_s(nbytes: int = 64 * 2**20) -> float:
    """Bytes/s of an in-place scaling of a large float32 variable (``nbytes`` read + written)."""
    x = tf.Variable(tf.ones([nbytes // 4]))

    @tf.function
    def scale():
        x.assign(x * 1.0001)
        return x[0]

    return 2.0 * nbytes / median_call_s(lambda: scale().numpy(), calls=10)


def allreduce_times(strategy: tf.distribute.Strategy, sizes_bytes: list[int], calls: int = 40,
                    per_call: int = ALLREDUCES_PER_CALL) -> list[float]:
    """Median seconds per all-reduce (sum of float32 vectors) for each message size, net of call overhead.

    Each call all-reduces ``per_call`` independent variables' copies (never
    constants, which TensorFlow would fold) and adds the results; the same
    call adding the copies without reducing them is the paired baseline
    (:func:`paired_difference_s`). The difference divided by ``per_call`` is
    one all-reduce's share.
    """
    out = []
    for size in sizes_bytes:
        n = max(1, size // 4)
        with strategy.scope():
            variables = [tf.Variable(tf.ones([n])) for _ in range(per_call)]

        @tf.function
        def reduce():
            def replica():
                ctx = tf.distribute.get_replica_context()
                return tf.add_n([ctx.all_reduce("sum", v * 1.0) for v in variables])
            return strategy.run(replica)

        @tf.function
        def copy():
            return strategy.run(lambda: tf.add_n([v * 1.0 for v in variables]))

        def first(fn):
            return lambda: strategy.experimental_local_results(fn())[0][0].numpy()

        out.append(max(0.0, paired_difference_s(first(reduce), first(copy), calls=calls)) / per_call)
    return out


def run_single(plan: RunPlan, *, batches: list[int], steps: int) -> dict:
    """The ``single`` part: one logical device, as in a one-device run (see module docs)."""
    configure_for_plan(plan.with_(strategy="one_device", replicas_per_worker=1, device="cpu"))
    env = describe_tensorflow()
    return {
        "batches": batches,
        "step_time_s": step_time_curve(plan, batches, steps),
        "input_s_per_sample": input_seconds_per_example(plan),
        "matmul_flops_per_s": matmul_flops_per_s(),
        "memory_Bps": memory_bytes_per_s(),
        "device": env.device_summary,
        "cpu_model": env.cpu_model,
        "tf_version": env.tf_version,
    }


def run_local(plan: RunPlan, *, devices: list[int], sizes_bytes: list[int], steps: int) -> dict:
    """The ``local`` part: ``max(devices)`` logical CPUs (see module docs)."""
    configure_for_plan(plan.with_(strategy="mirrored", replicas_per_worker=max(devices), device="cpu"))
    cpus = [d.name for d in tf.config.list_logical_devices("CPU")]
    allreduce = {}
    for n in devices:
        strategy = tf.distribute.MirroredStrategy(cpus[:n], cross_device_ops=tf.distribute.ReductionToOneDevice())
        allreduce[str(n)] = allreduce_times(strategy, sizes_bytes)
    counts = list(range(1, max(devices) + 1))
    return {
        "replica_counts": counts,
        "replica_batch": TINY_BATCH,
        "replica_step_time_s": replica_step_times(plan, counts, TINY_BATCH, steps),
        "central_step_time_s": replica_step_times(plan, counts, TINY_BATCH, steps, "central_storage"),
        "sizes_bytes": sizes_bytes,
        "allreduce_s": allreduce,
        "cross_device_op": "reduction_to_one_device",
    }


def run_collective(plan: RunPlan, tf_config: dict, *, sizes_bytes: list[int]) -> dict:
    """The ``collective`` part on one worker of a MultiWorkerMirrored cluster."""
    os.environ["TF_CONFIG"] = json.dumps(tf_config)  # where the script's make_strategy reads the cluster
    configure_for_plan(plan, tf_config)
    info = strategy_info(SCRIPT.make_strategy(plan.strategy, communication="ring"), plan)
    if info.strategy.num_replicas_in_sync != plan.num_workers:
        # A strategy that missed the cluster all-reduces within this process in microseconds: a silent, absurd link.
        raise RuntimeError(f"the collective spans {info.strategy.num_replicas_in_sync} replica(s), not the "
                           f"{plan.num_workers} workers of TF_CONFIG {tf_config}")
    times = allreduce_times(info.strategy, sizes_bytes)
    meta = run_meta(plan, describe_tensorflow(), info, f"worker{tf_config['task']['index']}")
    return {
        "workers": plan.num_workers,
        "sizes_bytes": sizes_bytes,
        "allreduce_s": times,
        "cross_device_op": info.cross_device_op,
        "device": meta["device"],
    }


def run_spec(spec: dict, tf_config: dict | None) -> dict:
    """Run the part a calibration spec names (see :mod:`distsim.real.calibrate`)."""
    plan = RunPlan.from_dict(spec["plan"])
    if spec["part"] == "single":
        return run_single(plan, batches=spec["batches"], steps=spec["steps"])
    if spec["part"] == "local":
        return run_local(plan, devices=spec["devices"], sizes_bytes=spec["sizes_bytes"], steps=spec["steps"])
    if spec["part"] == "collective":
        if tf_config is None:
            raise ValueError("the collective micro-benchmark needs a TF_CONFIG")
        return run_collective(plan, tf_config, sizes_bytes=spec["sizes_bytes"])
    raise ValueError(f"micro-benchmark part={spec['part']!r}; allowed: 'single', 'local', 'collective'")
