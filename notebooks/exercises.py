"""The checkers of the workbook's TensorFlow exercises, one ``check_<name>`` per exercise.

Each takes the learner's function (and the notebook's strategy where the exercise is about one), runs it with
real TensorFlow, and returns one line: ``"Right: ..."`` or ``"Not yet: <what is actually wrong>"``. A notebook's
exercise cell calls its checker in one line; ``tests/test_exercises.py`` feeds every checker the solution in
``solutions/``, an idiomatic variant and a wrong answer. TensorFlow is imported inside the functions, so
importing this module starts nothing.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np


def _failed(exc: BaseException) -> str:
    """The learner's code raised: its first line, as a hint rather than a traceback."""
    first = (str(exc).strip().splitlines() or [""])[0]
    return f"Not yet: your code raised {type(exc).__name__}: {first[:200]}"


# ---- 02, Exercise 4: a weighted loss under a strategy ----------------------------------------------------------

def _example_weights(y):
    """The check's weight of each example: 1, 2 or 3, by its label."""
    return (1.0 + (y % 3)).astype(np.float32)


def _weighted_setup(strategy):
    """The check's network (no L2: the loss is the data term only) and its two batches: full, and uneven."""
    from distsim.datasets import mnist_subset
    from distsim.numerics import SoftmaxRegression
    from distsim.real import load_script

    data = mnist_subset(1030, 1)
    with strategy.scope():
        net = load_script("mnist_fit").build_model(SoftmaxRegression().name, seed=0)
    batches = {"a full batch": (data.x_train[:256], data.y_train[:256]),
               "the uneven last batch": (data.x_train[1024:1030], data.y_train[1024:1030])}
    return net, batches


def _one_device_gradient(net, x, y):
    """The reference: the gradient of the weighted mean loss over the whole batch, on one device, flat."""
    import tensorflow as tf
    with tf.GradientTape() as tape:
        per_example = tf.keras.losses.sparse_categorical_crossentropy(y, net(x), from_logits=True)
        w = _example_weights(y)
        loss = tf.reduce_sum(w * per_example) / tf.reduce_sum(w)
    return np.concatenate([g.numpy().ravel() for g in tape.gradient(loss, net.trainable_variables)])


def _summed_gradient(strategy, net, loss_fn, x, y):
    """The all-reduced gradient when every replica differentiates loss_fn(labels, logits, weights) on its share."""
    import tensorflow as tf

    def gradient(x, y, w):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, net(x), w)
        return tape.gradient(loss, net.trainable_variables)

    @tf.function
    def step(x, y, w):
        summed = strategy.reduce("sum", strategy.run(gradient, args=(x, y, w)), axis=None)
        return tf.concat([tf.reshape(g, [-1]) for g in summed], axis=0)

    ds = tf.data.Dataset.from_tensor_slices((x, y, _example_weights(y))).batch(len(x))
    return step(*next(iter(strategy.experimental_distribute_dataset(ds)))).numpy()


def check_weighted_loss(fn, strategy) -> str:
    """02 Ex4: fn(labels, logits, weights) is one replica's loss; the replicas' gradients must add up to the
    one-device gradient of the weighted mean, on a full batch and on a batch that leaves a replica empty."""
    net, batches = _weighted_setup(strategy)
    for label, (x, y) in batches.items():
        try:
            got = _summed_gradient(strategy, net, fn, x, y)
        except Exception as exc:   # the learner's code failed inside TensorFlow: pass the first line on
            return _failed(exc).replace("your code raised", f"on {label} your function raised")
        if not np.all(np.isfinite(got)):
            return f"Not yet: on {label} the gradient has NaN or inf. Does a replica with no examples divide by zero?"
        want = _one_device_gradient(net, x, y)
        if np.abs(got - want).max() <= 1e-5:   # float32 sums in another order differ by ~1e-7
            continue
        cosine = float(got @ want / (np.linalg.norm(got) * np.linalg.norm(want) + 1e-30))
        length = float(np.linalg.norm(got) / np.linalg.norm(want))
        # Far off in direction (cosine < 0.99, about 8 degrees): the weights are wrong, whatever the length. Nearly
        # the right direction but the wrong length: the division is wrong (replicas dividing by their own totals
        # also tilt the sum a little, which is why the length is judged first there).
        if cosine < -0.99:
            return (f"Not yet: on {label} the summed gradient points the opposite way to the one-device one (cosine "
                    f"{cosine:.4f}): gradient descent would climb the loss. Is your loss negated?")
        if cosine < 0.99 or abs(length - 1) <= 0.01:
            return (f"Not yet: on {label} the summed gradient points another way than the one-device one (cosine "
                    f"{cosine:.4f}), so the examples count with the wrong weights: does every example's loss get "
                    "its weight, and does every replica divide by the same total?")
        return (f"Not yet: on {label} the summed gradient is {length:.2f} times as long as the one-device one. The "
                "all-reduce adds the replicas' gradients: what must each replica divide by, and which call inside "
                "strategy.run tells it a total over all replicas?")
    return "Right: on both batches the replicas' gradients add up to the one-device gradient of the weighted mean."


# ---- 04, Exercise 1: fit under MirroredStrategy ------------------------------------------------------------------

def check_train_mnist(fn, strategy, examples: int = 1280, per_replica: int = 32) -> str:
    """04 Ex1: fn(strategy, x, y, per_replica_batch) trains one epoch with per_replica examples on every replica."""
    from distsim.datasets import mnist_subset
    data = mnist_subset(examples, 1)
    try:
        model = fn(strategy, data.x_train, data.y_train, per_replica)
    except Exception as exc:   # report any failure of the learner's code as a hint, not a traceback
        return _failed(exc)
    kind = type(model.weights[0]).__name__
    if kind != "MirroredVariable":
        return (f"Not yet: the model's variables are {kind}s, so they belong to no strategy and fit trains on one "
                "device. Which Python block makes variables belong to a strategy?")
    history = getattr(model, "history", None)
    epochs = len(getattr(history, "epoch", []))
    if epochs != 1:
        return f"Not yet: fit ran {epochs} epochs; one epoch is asked (fit's epochs argument)."
    steps = int(model.optimizer.iterations.numpy())
    per_step = examples / max(steps, 1)
    replicas = strategy.num_replicas_in_sync
    if per_step != per_replica * replicas:
        return (f"Not yet: fit took {steps} steps for {examples} examples, {per_step:g} examples per step in all, "
                f"so each of the {replicas} replicas got {per_step / replicas:g}. What does fit's batch_size count?")
    return f"Right: mirrored variables, and {steps} steps of {per_step:g} examples: {per_replica} on each replica."


# ---- 07, Exercise 1: a custom training step under CentralStorageStrategy -----------------------------------------

def _mlp(seed: int = 0):
    """A small MLP whose initial weights depend on `seed` only (seeded initializers: no global seed is touched)."""
    import tensorflow as tf
    init = tf.keras.initializers.GlorotUniform
    return tf.keras.Sequential([tf.keras.layers.Flatten(input_shape=(28, 28)),
                                tf.keras.layers.Dense(32, activation="relu", kernel_initializer=init(seed)),
                                tf.keras.layers.Dense(10, kernel_initializer=init(seed + 1))])


def _one_device_step(x, y, lr):
    """The reference: one SGD step on the whole batch's mean loss, on one device. Returns (loss, weights)."""
    import tensorflow as tf
    model = _mlp()
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(y, model(x), from_logits=True))
    grads = tape.gradient(loss, model.trainable_variables)
    return float(loss), [(w - lr * g).numpy() for w, g in zip(model.trainable_variables, grads)]


def check_central_step(fn, devices, batch: int = 64, lr: float = 0.1) -> str:
    """07 Ex1: fn(strategy, model, optimizer, dist_batch, global_batch) takes one step and returns the global batch's mean loss
    as a number; run under CentralStorageStrategy it must match one SGD step on one device."""
    import tensorflow as tf

    from distsim.datasets import mnist_subset
    data = mnist_subset(batch, 1)
    x, y = data.x_train, data.y_train.astype(np.int64)
    strategy = tf.distribute.experimental.CentralStorageStrategy(compute_devices=list(devices),
                                                                 parameter_device="/cpu:0")
    with strategy.scope():
        model, optimizer = _mlp(), tf.keras.optimizers.SGD(lr)
    dist = next(iter(strategy.experimental_distribute_dataset(tf.data.Dataset.from_tensor_slices((x, y)).batch(batch))))
    loss = None
    try:
        loss = fn(strategy, model, optimizer, dist, batch)
        loss = float(loss)
    except Exception as exc:   # e.g. a PerReplica loss that float() cannot take
        return _failed(exc) + (" (a per-replica value: reduce it with strategy.reduce)" if "PerReplica" in str(exc)
                               or "PerReplica" in type(loss).__name__ else "")
    want_loss, want_weights = _one_device_step(x, y, lr)
    gap = max(float(np.abs(a - b).max()) for a, b in zip(model.get_weights(), want_weights))
    moved = max(float(np.abs(a - b).max()) for a, b in zip(model.get_weights(), _mlp().get_weights()))
    if moved == 0:
        return "Not yet: the weights did not move: apply the gradients with the optimizer inside strategy.run."
    if gap > 1e-5:   # float32 sums in another order differ by ~1e-7; a wrongly scaled update by far more
        return (f"Not yet: the weights end {gap:.1e} away from one step on one device. The replicas' gradients are "
                "summed: does each replica's loss divide by the global batch (tf.nn.compute_average_loss)?")
    if abs(loss - want_loss) > 1e-5 * max(1.0, want_loss):   # the same sums, rounded in float32
        return (f"Not yet: the step is right, but you returned {loss:.4f} where the global batch's mean loss is "
                f"{want_loss:.4f}. How should strategy.reduce combine the replicas' scaled losses?")
    return (f"Right: one step under CentralStorageStrategy on {strategy.num_replicas_in_sync} replicas equals one "
            f"step on one device (weights within {gap:.0e}), and the loss {loss:.4f} is the batch's mean.")


# ---- 08, Exercise 4: a dataset_fn for two workers ----------------------------------------------------------------

DATASET_FN_EXAMPLES, DATASET_FN_GLOBAL_BATCH, DATASET_FN_EPOCHS = 64, 16, 2


def _pipeline_batches(ds, wanted: int) -> list[list[int]]:
    """The first `wanted` batches, iterating the dataset again when it ends, as fit does once per epoch."""
    out: list[list[int]] = []
    while len(out) < wanted:
        before = len(out)
        for b in ds:
            out.append(b.numpy().tolist())
            if len(out) == wanted:
                break
        if len(out) == before:   # an empty pass: the dataset has nothing more to give
            break
    return out


def _epoch(batches, e, per_epoch):
    """The example numbers of epoch e (from 0) in one pipeline's batches, in order."""
    return [x for b in batches[e * per_epoch:(e + 1) * per_epoch] for x in b]


def _cluster_problem(fn, pipelines, replicas, examples, global_batch, epochs):
    """The first thing wrong with fn's batches on a cluster of `pipelines` workers, or None."""
    import tensorflow as tf
    per_replica = global_batch // replicas
    per_epoch = examples // pipelines // per_replica                     # batches per pipeline per epoch
    batches = []
    for pid in range(pipelines):
        ctx = tf.distribute.InputContext(num_input_pipelines=pipelines, input_pipeline_id=pid,
                                         num_replicas_in_sync=replicas)
        batches.append(_pipeline_batches(fn(ctx), epochs * per_epoch))
    if (sizes := sorted({len(b) for p in batches for b in p})) != [per_replica]:
        return (f"the batches hold {sizes} examples; with {replicas} replicas in sync each replica's batch should "
                f"hold GLOBAL_BATCH / {replicas}. Which InputContext method computes it?")
    seen = [sorted(x for p in batches for x in _epoch(p, e, per_epoch)) for e in range(epochs)]
    if any(e != list(range(examples)) for e in seen):
        shared = set(_epoch(batches[0], 0, per_epoch)).intersection(*(_epoch(p, 0, per_epoch) for p in batches[1:]))
        if shared:
            return (f"the workers read the same examples ({len(shared)} of them in both workers' first epoch): "
                    "give each input pipeline its own shard (input_pipeline_id).")
        return ("an epoch shows some examples twice and misses others: the epochs mix. Does shuffling happen "
                "before the epochs are repeated?")
    orders = [_epoch(batches[0], e, per_epoch) for e in range(epochs)]
    if orders[0] == orders[1] or orders[0] == sorted(orders[0]):
        return "every epoch comes in the same order (or unshuffled): shuffle, and reshuffle each iteration."
    return None


def check_dataset_fn(fn, strategy, pipelines: int = 2, replicas: int = 4) -> str:
    """08 Ex4: fn(input_context) feeds 2 workers x 2 replicas; then it must also run on `strategy`."""
    n, batch, epochs = DATASET_FN_EXAMPLES, DATASET_FN_GLOBAL_BATCH, DATASET_FN_EPOCHS
    try:
        problem = _cluster_problem(fn, pipelines, replicas, n, batch, epochs)
        if problem:
            return "Not yet: " + problem
        real = strategy.distribute_datasets_from_function(fn)         # 1 pipeline, this kernel's replicas
        it = iter(real)
        first = [next(it) for _ in range(n // batch)]
    except Exception as exc:   # the learner's code failed inside tf.data
        return _failed(exc)
    sizes = {int(t.shape[0]) for b in first for t in strategy.experimental_local_results(b)}
    if sizes != {batch // strategy.num_replicas_in_sync}:
        return "Not yet: on the real strategy the replicas' batches have the wrong size."
    return (f"Right: {pipelines} workers x {replicas // pipelines} replicas get {batch // replicas} distinct "
            f"examples each per step, every epoch covers all {n}, in a new order; the real strategy agrees.")


# ---- 09, Exercise 4: a fit that resumes after a crash ------------------------------------------------------------

RESUME_EPOCHS, RESUME_STEPS, RESUME_PER_REPLICA = 3, 4, 32


def mirrored(replicas: int):
    """A MirroredStrategy on the first `replicas` logical CPUs. ReductionToOneDevice: no collective groups, so
    strategies of different sizes can live in one process."""
    import tensorflow as tf
    cpus = [d.name for d in tf.config.list_logical_devices("CPU")]
    return tf.distribute.MirroredStrategy(cpus[:replicas], cross_device_ops=tf.distribute.ReductionToOneDevice())


def build(strategy):
    """A seeded softmax regression under `strategy`, and its dataset of global batches (one epoch = one pass of
    the data at 2 replicas)."""
    import tensorflow as tf

    from distsim.datasets import mnist_subset
    small = mnist_subset(2 * RESUME_PER_REPLICA * RESUME_STEPS, 1)
    global_batch = RESUME_PER_REPLICA * strategy.num_replicas_in_sync
    with strategy.scope():
        tf.keras.utils.set_random_seed(3)
        model = tf.keras.Sequential([tf.keras.layers.Flatten(input_shape=(28, 28)), tf.keras.layers.Dense(10)])
        model.compile(optimizer=tf.keras.optimizers.SGD(0.1),
                      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    ds = tf.data.Dataset.from_tensor_slices((small.x_train, small.y_train)).batch(global_batch, drop_remainder=True)
    return model, ds.repeat()


def _callbacks(fail_after):
    """The check's bookkeeping: the epoch fit started at, and (optionally) a crash after `fail_after` steps."""
    import tensorflow as tf

    class FirstEpoch(tf.keras.callbacks.Callback):
        epoch = None

        def on_epoch_begin(self, epoch, logs=None):
            self.epoch = self.epoch if self.epoch is not None else epoch

    class FailAfter(tf.keras.callbacks.Callback):
        done = 0

        def on_train_batch_end(self, batch, logs=None):
            self.done += 1
            if self.done == fail_after:
                raise RuntimeError(f"simulated crash after step {fail_after}")

    first = FirstEpoch()
    return first, [first] + ([FailAfter()] if fail_after else [])


def crashable(fit, strategy, backup_dir, fail_after=None):
    """Build, then `fit(model, dataset, backup_dir, callbacks)`; returns (weights or None after a crash, first epoch)."""
    model, ds = build(strategy)
    first, callbacks = _callbacks(fail_after)
    try:
        fit(model, ds, str(backup_dir), callbacks)
    except RuntimeError as exc:
        if "simulated crash" not in str(exc):
            raise
        return None, first.epoch
    return model.get_weights(), first.epoch


def check_resumable(fn) -> str:
    """09 Ex4: fn(model, dataset, backup_dir, callbacks), crashed in epoch 1 and relaunched, must end where an
    uninterrupted run ends."""
    work = Path(tempfile.mkdtemp(prefix="distsim-ex09-"))
    try:
        reference, _ = crashable(fn, mirrored(2), work / "reference")
        crashable(fn, mirrored(2), work / "run", fail_after=RESUME_STEPS + 2)      # crashes in epoch 1
        resumed, first_epoch = crashable(fn, mirrored(2), work / "run")            # the relaunch
    except Exception as exc:   # the learner's error
        return _failed(exc)
    if first_epoch == 0:
        return ("Not yet: the relaunch started again at epoch 0, so nothing from the crashed run was kept. Which "
                "callback saves fit's state to backup_dir and restores it when fit starts again?")
    gap = max(float(np.abs(a - b).max()) for a, b in zip(resumed, reference))
    if gap > 1e-6:   # the same arithmetic in the same order: a faithful resume differs by rounding at most
        return f"Not yet: resumed at epoch {first_epoch}, but the weights end {gap:.1e} away from an uninterrupted run."
    return f"Right: the relaunch resumed at epoch {first_epoch} and ended with an uninterrupted run's weights."


# ---- 05, Exercise 2: clusters from TF_CONFIGs, launched for real ------------------------------------------------

def _same_cluster_problems(configs) -> list[str]:
    """Problems with validated TF_CONFIGs meant to form one cluster: a different cluster, a task twice or never."""
    from distsim.real import build_tf_configs, task_name
    problems = [f"{task_name(c)} lists a different cluster" for c in configs if c["cluster"] != configs[0]["cluster"]]
    names = [task_name(c) for c in configs if c["task"]["type"] != "evaluator"]
    problems += [f"{n} is claimed {names.count(n)} times" for n in sorted(set(names)) if names.count(n) > 1]
    problems += [f"nobody is {n}" for n in (task_name(c) for c in build_tf_configs(configs[0]["cluster"]))
                 if n not in names]
    return problems


def _validated(fn, ports):
    """(the learner's configs, validated, or None; the problem, or None)."""
    from distsim.real import validate_tf_config
    try:
        return [validate_tf_config(c, localhost_only=True) for c in fn(list(ports))], None
    except Exception as exc:   # the learner's function, or the validator, said no: pass the message on
        return None, f"{type(exc).__name__}: {exc}"


def check_three_workers(fn, workdir=None) -> str:
    """05 Ex2: fn(ports) gives the TF_CONFIGs of a 3-worker MultiWorkerMirroredStrategy cluster on localhost; the
    three processes, launched with them, must train one model."""
    import json
    import sys

    from distsim.real import Task, free_ports, launch, script_path, task_name
    configs, problem = _validated(fn, free_ports(3))
    if problem:
        return f"Not yet: {problem}"
    workers = configs[0]["cluster"].get("worker", []) if configs else []
    if len(configs) != 3 or len(workers) != 3:
        return f"Not yet: {len(configs)} config(s) for a cluster listing {len(workers)} worker(s); three of each."
    if problems := _same_cluster_problems(configs):
        return "Not yet: " + "; ".join(problems)
    fit = [sys.executable, str(script_path("mnist_fit")), "--strategy", "multi_worker_mirrored",
           "--communication", "ring", "--batch", "16", "--steps", "3"]
    tasks = [Task(task_name(c), fit, env={"TF_CONFIG": json.dumps(c)}) for c in configs]
    outcome = launch(tasks, Path(workdir or tempfile.mkdtemp(prefix="distsim-ex05-")), timeout_s=240)
    if not outcome.ok:
        return f"Not yet: the cluster did not train ({outcome.status}: {outcome.reason})."
    reports = {t.name: [ln for ln in t.log_text().splitlines() if ln.startswith('{"loss"')][-1] for t in outcome.tasks}
    if len(set(reports.values())) != 1:
        return f"Not yet: the workers report different losses, so they trained different models: {reports}"
    return "Right: three processes, one cluster, one model: every worker reports the same losses."


# ---- 06, Exercise 3: a variable partitioner ----------------------------------------------------------------------

def run_partition_demo(*args, legacy_keras=True, timeout_s=240) -> str:
    """Run scripts/ps_partition_demo.py (an in-process PS cluster) in a fresh process; return what it printed."""
    import os
    import subprocess
    import sys

    from distsim.real import script_path
    env = {**os.environ, "TF_USE_LEGACY_KERAS": "1" if legacy_keras else "0", "TF_CPP_MIN_LOG_LEVEL": "3",
           "PYTHONWARNINGS": "ignore"}
    done = subprocess.run([sys.executable, str(script_path("ps_partition_demo")), *args], env=env,
                          capture_output=True, text=True, timeout=timeout_s)   # on timeout the process is killed
    return done.stdout if done.returncode == 0 else done.stdout + done.stderr[-2000:]


def bytes_per_ps(printed: str) -> dict[str, int]:
    """Float32 bytes of every variable part on each PS task, from the demo's output."""
    import re
    out: dict[str, int] = {}
    for shape, task in re.findall(r"\(([\d, ]+)\) on /job:ps/task:(\d)", printed):
        out[task] = out.get(task, 0) + 4 * int(np.prod([int(d) for d in shape.split(",") if d.strip()]))
    return out


def _part_bytes(printed: str) -> dict[str, list[int]]:
    """Float32 bytes of each part of every variable ("dense/kernel": [bytes, ...]), from the demo's output."""
    import re
    out = {}
    for line in printed.splitlines():
        parts = re.findall(r"\(([\d, ]+)\) on /job:ps/task:\d", line)
        if parts and "/" in line.split()[0]:
            out[line.split()[0]] = [4 * int(np.prod([int(d) for d in shape.split(",") if d.strip()])) for shape in parts]
    return out


def check_partitioner(fn, num_ps: int = 2, workdir=None, max_part_bytes: int = 128 * 1024) -> str:
    """06 Ex3: make_partitioner(num_ps), run in the demo's fresh process, must keep every variable part within
    `max_part_bytes`, with as few parts as that allows."""
    import inspect
    import math
    path = Path(workdir or tempfile.mkdtemp(prefix="distsim-ex06-")) / "partitioner.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(inspect.getsource(fn))
    printed = run_partition_demo("--ps", str(num_ps), "--partitioner-file", str(path))
    if "4 steps ran" not in printed:
        last = [ln for ln in printed.splitlines() if ln.strip()][-1:] or ["(no output)"]
        return f"Not yet: the script failed with your partitioner: {last[0][:300]}"
    parts = _part_bytes(printed)
    name, biggest = max(((n, max(b)) for n, b in parts.items()), key=lambda nb: nb[1])
    if biggest > max_part_bytes:
        return (f"Not yet: a part of {name} holds {biggest:,} bytes, over the {max_part_bytes:,} asked. Which of "
                "TensorFlow's partitioners bounds the size of a shard rather than its minimum?")
    fewest = {n: math.ceil(sum(b) / max_part_bytes) for n, b in parts.items()}
    if extra := {n: len(b) for n, b in parts.items() if len(b) > fewest[n]}:
        return (f"Not yet: every part is small enough, but {extra} parts where {({n: fewest[n] for n in extra})} "
                "would do: each extra part is one more message per push and pull.")
    return (f"Right: {sum(len(b) for b in parts.values())} parts, none over {max_part_bytes:,} bytes (the largest "
            f"holds {biggest:,}), and no variable cut into more parts than that needs.")


# ---- 05b, Exercise 3: a MultiWorkerMirroredStrategy fit from TF_CONFIG, on a real two-process cluster -----------

_WORKER_SCRIPT = '''
import json
import numpy as np
{source}
model = {name}()
import tensorflow as tf  # noqa: E402  (after the learner's function, which must create the strategy first)
weights = np.concatenate([w.ravel() for w in model.get_weights()])
strategy = model.distribute_strategy
print("distsim-exercise " + json.dumps({{"strategy": type(strategy).__name__,
    "multi_worker": isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy),
    "replicas": int(strategy.num_replicas_in_sync), "steps": int(model.optimizer.iterations.numpy()),
    "weights": [float(weights.sum()), float(np.abs(weights).sum())]}}), flush=True)
'''


def _worker_report(task) -> dict | None:
    import json
    lines = [ln for ln in task.log_text().splitlines() if ln.startswith("distsim-exercise ")]
    return json.loads(lines[-1].split(" ", 1)[1]) if lines else None


def _run_workers(script_text: str, workers: int, workdir, prefix: str, verb: str) -> dict[str, dict] | str:
    """Run `script_text` in `workers` fresh processes of a localhost cluster, each with its TF_CONFIG; every
    worker's report (worker name -> the JSON it printed), or a "Not yet" line saying which worker failed how.
    ``launch`` stops every process it started, also on failure or timeout."""
    import json
    import sys

    from distsim.real import Task, build_tf_configs, launch, localhost_cluster
    work = Path(workdir or tempfile.mkdtemp(prefix=prefix))
    work.mkdir(parents=True, exist_ok=True)
    script = work / "worker.py"
    script.write_text(script_text)
    tasks = [Task(f"worker{i}", [sys.executable, str(script)], env={"TF_CONFIG": json.dumps(c)}, ready_pattern=None)
             for i, c in enumerate(build_tf_configs(localhost_cluster(workers)))]
    outcome = launch(tasks, work / "cluster", timeout_s=240)
    reports = {t.name: _worker_report(t) for t in outcome.tasks}
    if not outcome.ok or None in reports.values():
        failed = next((t for t in outcome.tasks if _worker_report(t) is None), outcome.tasks[0])
        last = [ln for ln in failed.log_text().splitlines() if ln.strip()][-1:] or ["(no output)"]
        return f"Not yet: the cluster did not {verb} ({outcome.status}); {failed.name}'s last line: {last[0][:300]}"
    return reports


def check_multi_worker_fit(fn, workdir=None, workers: int = 2, steps: int = 5) -> str:
    """05b Ex3: fn(), run in each of `workers` fresh processes with its TF_CONFIG set, must train ONE model with
    MultiWorkerMirroredStrategy for `steps` steps and return it."""
    import inspect
    reports = _run_workers(_WORKER_SCRIPT.format(source=inspect.getsource(fn), name=fn.__name__), workers,
                           workdir, "distsim-ex05b-", "train")
    if isinstance(reports, str):
        return reports
    first = reports["worker0"]
    if not first["multi_worker"] or first["replicas"] != workers:
        return (f"Not yet: each worker trained under {first['strategy']} with {first['replicas']} replica(s) in "
                f"sync, so the {workers} processes trained {workers} separate models. Which strategy reads "
                "TF_CONFIG and joins the cluster?")
    if first["steps"] != steps:
        return f"Not yet: the model took {first['steps']} optimizer steps; {steps} are asked (steps_per_epoch)."
    if any(r["weights"] != first["weights"] for r in reports.values()):
        return "Not yet: the workers end with different weights, so they did not train one model."
    return (f"Right: {workers} processes, one MultiWorkerMirroredStrategy with {workers} replicas in sync, {steps} "
            "steps, and every worker ends with the same weights.")


# ---- 09, Exercise 5: a SavedModel written by the chief, loaded back with and without strategy.scope() -----------

class _NonChief:
    """The strategy as a worker that is not the chief sees it: ``extended.should_checkpoint`` is False (under
    MultiWorkerMirroredStrategy it is ``_is_chief``: ``collective_all_reduce_strategy.py`` 1114-1115); the rest
    is the real strategy."""

    def __init__(self, strategy):
        self._strategy = strategy
        self.extended = type("Extended", (), {"should_checkpoint": False})()

    def __getattr__(self, name):
        return getattr(self._strategy, name)


def _files(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file under `folder`, with its inode and modification time (a rewrite changes one of them)."""
    return {str(p.relative_to(folder)): (p.stat().st_ino, p.stat().st_mtime_ns) for p in folder.rglob("*")}


def _distributed(variables) -> bool:
    import tensorflow as tf
    return bool(variables) and all(isinstance(v, tf.distribute.DistributedValues) for v in variables)


def check_saved_model(fn) -> str:
    """09 Ex5: fn(model, strategy, export_dir) -> (loaded, loaded_in_scope). Called as the chief, it must write a
    SavedModel to export_dir and load it back outside and inside strategy.scope(); called as another worker, it
    must leave export_dir and its folder as they were."""
    import tensorflow as tf
    strategy = mirrored(2)
    model, ds = build(strategy)
    x = next(iter(ds))[0][:8]
    want = model(x).numpy()
    work = Path(tempfile.mkdtemp(prefix="distsim-ex09-savedmodel-"))
    export_dir = work / "model"
    try:
        loaded, loaded_in_scope = fn(model, strategy, str(export_dir))
        if not tf.saved_model.contains_saved_model(str(export_dir)):
            return ("Not yet: after the chief's call export_dir holds no SavedModel. model.save(export_dir) or "
                    "tf.saved_model.save(model, export_dir) writes one (a name ending in .keras or .h5 does not).")
        if _distributed(loaded.variables) or not loaded.variables:
            return "Not yet: the first model returned should have plain variables: load it outside strategy.scope()."
        if not _distributed(loaded_in_scope.variables):
            return ("Not yet: the second model's variables are not distributed. Load it again inside "
                    "`with strategy.scope():` so that every replica gets a copy.")
        gap = float(np.abs(loaded(x).numpy() - want).max())
        per_replica = strategy.experimental_local_results(strategy.run(loaded_in_scope, args=(x,)))
        gap = max([gap] + [float(np.abs(r.numpy() - want).max()) for r in per_replica])
        before = _files(work)
        fn(model, _NonChief(strategy), str(export_dir))
        after = _files(work)
    except Exception as exc:   # the learner's error
        return _failed(exc)
    if gap > 1e-5:   # the same float32 weights and ops: only rounding may differ
        return f"Not yet: the loaded model's outputs differ from the model's by {gap:.1e}. Did you save the model given?"
    if any(before.get(name) != stamp for name, stamp in after.items() if name.startswith("model")):
        return ("Not yet: a worker that is not the chief (strategy.extended.should_checkpoint is False) wrote into "
                "export_dir, which the chief writes. It must save too, but to a temporary directory it deletes.")
    left = sorted({name.split("/")[0] for name in after} - {"model"})
    if left:
        return f"Not yet: the non-chief left {left} next to export_dir; delete its temporary copy after saving."
    return (f"Right: the chief wrote the SavedModel; loaded outside the scope it has plain variables, inside it "
            f"{len(per_replica)} copies of each, and both compute the model's outputs.")

# ---- 04, Exercise 3: a learning-rate warm-up scaled by the replica count ------------------------------------------

def warmup_rate(step: int, base_lr: float, warmup_steps: int, replicas: int) -> float:
    """Goyal et al. (2017, arXiv:1706.02677, section 2.2): from base_lr at step 0, linearly up to base_lr x replicas
    at step warmup_steps, then constant."""
    return base_lr * (1 + (replicas - 1) * min(step, warmup_steps) / warmup_steps)


def _schedule_values(schedule, steps) -> list[float]:
    """The schedule's rates at `steps`, called as an optimizer calls it: inside a tf.function, on an int64 step."""
    import tensorflow as tf
    traced = tf.function(lambda step: tf.cast(schedule(step), tf.float64))
    return [float(traced(tf.constant(k, tf.int64))) for k in steps]


def _warmup_mistake(got, want, base_lr, warmup_steps, replicas, steps) -> str | None:
    """The hint for a schedule whose rates `got` (at `steps`) differ from `want`, or None when they agree."""
    def close(a, b):   # float32 arithmetic in the schedule: 1e-5 relative is over 10 float32 roundings
        return all(abs(x - y) <= 1e-5 * max(abs(y), 1e-12) for x, y in zip(a, b))

    if close(got, want):
        return None
    peak = got[-1]
    if replicas > 1 and close([peak], [base_lr]):
        return (f"Not yet: after the warm-up your rate is {peak:g}, which is base_lr: it is not multiplied by "
                f"strategy.num_replicas_in_sync ({replicas} here), so the bigger global batch gets a small batch's rate.")
    if not close([peak], [base_lr * replicas]):
        return (f"Not yet: after the warm-up your rate is {peak:g}; with {replicas} replicas it should be base_lr x "
                f"{replicas} = {base_lr * replicas:g}. Read the replica count from the strategy you are given.")
    if close(got[:1], [peak]):
        return (f"Not yet: no warm-up: step 0 already has the full rate {peak:g}. Start at base_lr and rise linearly "
                f"to base_lr x replicas over warmup_steps={warmup_steps} steps.")
    for shift in (1, -1):
        if close(got, [warmup_rate(max(k + shift, 0), base_lr, warmup_steps, replicas) for k in steps]):
            return (f"Not yet: the warm-up is off by one: your rate at step k is the one due at step k {'+' if shift > 0 else '-'} 1 "
                    f"(at step 0: {got[0]:g}, not base_lr = {base_lr:g}). The optimizer's first update has step 0, and "
                    f"the rate reaches base_lr x replicas exactly at step warmup_steps.")
    table = ", ".join(f"step {k}: {g:.4g} (want {w:.4g})" for k, g, w in zip(steps, got, want))
    return f"Not yet: the rates differ from a linear warm-up from base_lr to base_lr x replicas: {table}."


def check_warmup_schedule(fn, strategy, base_lr: float = 0.1, warmup_steps: int = 10) -> str:
    """04 Ex3: fn(strategy, base_lr, warmup_steps) returns a LearningRateSchedule; checked under `strategy` and
    under a 2-replica MirroredStrategy on its first two devices, then used by an optimizer in a real fit."""
    import tensorflow as tf
    steps = (0, 1, warmup_steps // 2, warmup_steps - 1, warmup_steps, warmup_steps + 7)
    pair = tf.distribute.MirroredStrategy(strategy.extended.worker_devices[:2])
    for s in (strategy, pair):
        replicas = s.num_replicas_in_sync
        try:
            with s.scope():
                schedule = fn(s, base_lr, warmup_steps)
        except Exception as exc:   # report any failure of the learner's code as a hint, not a traceback
            return _failed(exc)
        if not isinstance(schedule, tf.keras.optimizers.schedules.LearningRateSchedule):
            return (f"Not yet: you returned a {type(schedule).__name__}; an optimizer takes a "
                    "tf.keras.optimizers.schedules.LearningRateSchedule and calls it with its step counter.")
        try:
            got = _schedule_values(schedule, steps)
        except Exception as exc:   # e.g. Python's min() or .numpy() on the graph's symbolic step
            return (f"Not yet: your schedule cannot be traced into a graph ({type(exc).__name__}); the optimizer calls "
                    "it inside its tf.function, on a symbolic int64 step. Use TensorFlow ops (tf.cast, tf.minimum), "
                    "not Python's min(), float() or .numpy().")
        hint = _warmup_mistake(got, [warmup_rate(k, base_lr, warmup_steps, replicas) for k in steps],
                               base_lr, warmup_steps, replicas, steps)
        if hint:
            return hint
    return _fit_with_schedule(fn, strategy, base_lr, warmup_steps)


def _fit_with_schedule(fn, strategy, base_lr, warmup_steps, fit_steps: int = 3) -> str:
    """Trains `fit_steps` steps under `strategy` with an SGD on the learner's schedule; the optimizer evaluates the
    schedule at its step counter before each update (tf_keras optimizer.py 625-645, 705), so after fit_steps
    updates it holds the rate of step fit_steps - 1."""
    import tensorflow as tf
    replicas = strategy.num_replicas_in_sync
    rng = np.random.default_rng(0)
    x, y = rng.random((8 * replicas * fit_steps, 4), dtype=np.float32), rng.integers(0, 2, 8 * replicas * fit_steps)
    with strategy.scope():
        model = tf.keras.Sequential([tf.keras.layers.Dense(2, input_shape=(4,))])
        model.compile(optimizer=tf.keras.optimizers.SGD(fn(strategy, base_lr, warmup_steps)),
                      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    try:
        model.fit(x, y, batch_size=8 * replicas, epochs=1, verbose=0)
    except Exception as exc:   # the schedule passed the checks above but fails inside fit
        return _failed(exc)
    used = float(model.optimizer.learning_rate.numpy())
    want = warmup_rate(fit_steps - 1, base_lr, warmup_steps, replicas)
    if abs(used - want) > 1e-5 * want:   # float32 variable: 1e-5 relative as above
        return f"Not yet: after {fit_steps} updates in fit the optimizer's rate is {used:g}, not {want:g}."
    return (f"Right: from base_lr = {base_lr:g} at step 0 up to {base_lr * replicas:g} with {replicas} replicas at step "
            f"{warmup_steps} (and {base_lr * 2:g} with 2), and fit's SGD used {used:.4g} for its update at step "
            f"{fit_steps - 1}.")

# ---- 05, Exercise 1: a dataset_fn on a real two-process MultiWorkerMirroredStrategy cluster --------------------

SHARD_EXAMPLES, SHARD_GLOBAL_BATCH = 64, 16

_SHARD_SCRIPT = '''
import json
import tensorflow as tf
strategy = tf.distribute.MultiWorkerMirroredStrategy()   # first: it configures the collectives (see notebook 05)
EXAMPLES, GLOBAL_BATCH = {examples}, {global_batch}
{source}
batches = iter(strategy.distribute_datasets_from_function({name}))
seen = []
for _ in range(EXAMPLES // GLOBAL_BATCH):   # one epoch of global steps, or fewer if the data ends first
    try:
        local = strategy.experimental_local_results(next(batches))
    except StopIteration:   # every worker agrees on the end (a collective), so all stop here together
        break
    seen.append([t.numpy().ravel().tolist() for t in local])
print("distsim-exercise " + json.dumps({{"replicas": strategy.num_replicas_in_sync, "seen": seen}}), flush=True)
'''


def _shard_problem(seen: dict[str, list[list[list[int]]]], workers: int) -> str | None:
    """What is wrong with what each worker's replicas read (worker -> step -> replica -> example numbers), or None."""
    per_replica = SHARD_GLOBAL_BATCH // workers
    sizes = sorted({len(b) for steps in seen.values() for step in steps for b in step})
    if not sizes:
        return "the dataset gave no batch at all: return a batched dataset of the EXAMPLES."
    if sizes != [per_replica]:
        return (f"per-replica batch {sizes[-1]} ≠ {per_replica} ({SHARD_GLOBAL_BATCH} global over {workers} "
                "replicas): batch by input_context.get_per_replica_batch_size(GLOBAL_BATCH).")
    read = {w: [x for step in steps for b in step for x in b] for w, steps in seen.items()}
    shared = set.intersection(*(set(r) for r in read.values()))
    if shared:
        return (f"the workers read the same examples ({len(shared)} of the {len(next(iter(read.values())))} each "
                "read in one epoch): shard by input_context.input_pipeline_id.")
    everything = sorted(x for r in read.values() for x in r)
    if everything != list(range(SHARD_EXAMPLES)):
        return (f"one epoch of the cluster read {len(set(everything))} distinct examples of {SHARD_EXAMPLES}: "
                "cut the data into input_context.num_input_pipelines shards, one per worker.")
    return None


def check_sharded_input(fn, workdir=None, workers: int = 2) -> str:
    """05 Ex1: fn(input_context), run by strategy.distribute_datasets_from_function on each worker of a real
    `workers`-process MultiWorkerMirroredStrategy cluster on localhost, must give every replica its own
    GLOBAL_BATCH / replicas examples, and one epoch of the cluster every example once."""
    import inspect
    script = _SHARD_SCRIPT.format(source=inspect.getsource(fn), name=fn.__name__, examples=SHARD_EXAMPLES,
                                  global_batch=SHARD_GLOBAL_BATCH)
    reports = _run_workers(script, workers, workdir, "distsim-ex05-", "finish")
    if isinstance(reports, str):
        return reports
    problem = _shard_problem({name: r["seen"] for name, r in reports.items()}, workers)
    if problem:
        return "Not yet: " + problem
    return (f"Right: {workers} workers, {SHARD_GLOBAL_BATCH // workers} examples per replica per step, and one epoch "
            f"of the cluster read each of the {SHARD_EXAMPLES} examples exactly once.")

# ---- 06, Exercise 2: a ClusterCoordinator schedule/join loop on a real parameter-server cluster ------------------

def _schedule_report(fn, steps: int, workdir=None, timeout_s: int = 240) -> dict | str:
    """Run scripts/ps_schedule_check.py with the learner's coordinator_loop; its JSON report, or what went wrong."""
    import inspect
    import json
    import os
    import subprocess
    import sys

    from distsim.real import script_path
    path = Path(workdir or tempfile.mkdtemp(prefix="distsim-ex06-")) / "coordinator_loop.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(inspect.getsource(fn))
    env = {**os.environ, "TF_USE_LEGACY_KERAS": "1", "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONWARNINGS": "ignore"}
    try:   # the cluster lives inside that process: on a timeout subprocess.run kills it, servers and all
        done = subprocess.run([sys.executable, str(script_path("ps_schedule_check")), "--answer-file", str(path),
                               "--steps", str(steps)], env=env, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return f"the cluster was still running after {timeout_s} s and was stopped. Does your loop end?"
    reports = [ln.split(" ", 1)[1] for ln in done.stdout.splitlines() if ln.startswith("distsim-report ")]
    if not reports:
        return f"the check's process failed: {(done.stderr.strip().splitlines() or ['(no output)'])[-1][:300]}"
    return json.loads(reports[-1])


def check_coordinator_loop(fn, workdir=None, steps: int = 40) -> str:
    """06 Ex2: coordinator_loop(strategy, coordinator, model, optimizer, dataset_fn, steps), run by the chief of a
    real 2-worker, 1-PS cluster, must apply `steps` updates from per-worker datasets and be done when it returns."""
    report = _schedule_report(fn, steps, workdir)
    if isinstance(report, str):
        return f"Not yet: {report}"
    calls, applied = report["calls"], report["applied"]
    per_worker = ("Every worker must read its own dataset: coordinator.create_per_worker_dataset(dataset_fn), "
                  "then iter() of it, passed to schedule as an argument.")
    if "schedule_python" in calls:
        return ("Not yet: you scheduled a plain Python function; ClusterCoordinator.schedule runs only a "
                "tf.function on the workers (it raised TypeError). Decorate your step with @tf.function.")
    if report["error"]:
        if "create_per_worker_dataset" not in calls:
            return f"Not yet: your steps did not read a per-worker dataset (your code raised {report['error']}). {per_worker}"
        if "merge_call" in report["error"]:   # apply_gradients outside a replica context
            return (f"Not yet: your code raised {report['error']}: the step ran outside a replica. Call the "
                    "function that applies the gradients through strategy.run(fn, args=...).")
        return f"Not yet: your code raised {report['error']}"
    if "schedule" not in calls:
        return "Not yet: nothing was scheduled. Send each step to the workers with coordinator.schedule(fn, args=...)."
    if "create_per_worker_dataset" not in calls:
        return f"Not yet: your steps did not read a per-worker dataset. {per_worker}"
    if not report["done_at_return"]:
        return (f"Not yet: when your function returned, the parameter server had applied {report['applied_at_return']}"
                f" of the {steps} updates: schedule only queues a step and returns at once. Call coordinator.join() "
                "before you return, to wait until every scheduled step has run.")
    if applied != steps:
        why = " Does your step call optimizer.apply_gradients?" if applied == 0 else ""
        return f"Not yet: the parameter server applied {applied} updates for the {steps} steps asked.{why}"
    return (f"Right: {steps} updates applied on the parameter server, by steps scheduled on two workers, each "
            "reading its own dataset; join() waited for all of them.")
