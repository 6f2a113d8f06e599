"""ParameterServerStrategy: run the ``mnist_ps`` script and measure the staleness of every update.

**Training** is the script's (``notebooks/scripts/mnist_ps.py``): a
``ClusterCoordinator`` loop or ``model.fit``, over servers the script starts
inside this process (``RunPlan.ps_cluster="in_process"``) or over a
TF_CONFIG's processes (``"processes"``, the layout of a real cluster). The
script gives every server ``inter_op_parallelism_threads >= num_workers + 1``:
with one thread a worker deadlocks silently on a 2-core machine.

**Staleness, measured.** The script's ``wrap`` hook gets its update function;
:meth:`StalenessProbe.wrap` returns that function surrounded by the probe. The
probe keeps three things on the parameter server: a counter of applied
updates, a ``tf.CriticalSection`` guarding it, and a log with one row per
applied update. Every training step (on whichever worker runs it):

1. reads the counter (``read_version``) *before* it reads any weight: the
   script's update runs under a control dependency on that read;
2. runs the script's update (forward, backward, apply);
3. re-reads every weight after the apply (ops on the same variable run in
   program order, so this waits for the update to land), and only then takes
   the lock and increments the counter, learning its own apply index ``j``;
4. writes ``(read_version, worker, times, loss, accuracy)`` into row ``j``.

The staleness of update ``j`` is ``j - read_version``: the number of updates
the PS applied between this worker's read and its own apply, the same
definition as :mod:`distsim.engines.asyncps`. Two details were measured the hard way:
``optimizer.apply_gradients`` returns the ``iterations`` increment, which does
*not* wait for the weight updates (hence step 3), and a plain read-then-
``assign_add`` of the counter lets two updates claim the same index (hence
the lock).
"""

from __future__ import annotations

import threading
import time

import numpy as np

from distsim.real.env import prepare_environment

prepare_environment()
import tensorflow as tf  # noqa: E402

from distsim.real.building import Progress, epoch_meta, run_meta, strategy_info  # noqa: E402
from distsim.real.env import describe_tensorflow  # noqa: E402
from distsim.real.plan import RunPlan  # noqa: E402
from distsim.real.scripts import PS_SCRIPT, load_script, script_args  # noqa: E402
from distsim.results.result import Curve, Result, Staleness, Summary  # noqa: E402
from distsim.results.trace import Event, Trace  # noqa: E402


#: Columns of the probe's log, one row per applied update (``forward_s``: the loss was computed).
LOG_COLUMNS = ("read_version", "worker", "start_s", "forward_s", "end_s", "loss", "accuracy")


class StalenessProbe(tf.Module):
    """Counter, lock and per-update log on the parameter server (create under ``strategy.scope()``)."""

    def __init__(self, max_updates: int) -> None:
        super().__init__(name="staleness_probe")
        self.applied = tf.Variable([0], dtype=tf.int64, trainable=False, name="applied_updates")
        self.lock = tf.CriticalSection(name="applied_updates_lock")
        self.log = tf.Variable(
            tf.zeros([max_updates, len(LOG_COLUMNS)], tf.float64), trainable=False, name="update_log"
        )

    def begin(self) -> tuple[tf.Tensor, tf.Tensor]:
        """``(start time, read_version)``; build the forward pass under a dependency on both."""
        start = tf.timestamp()
        with tf.control_dependencies([start]):
            # sparse_read copies under the variable's lock: a snapshot, not an alias.
            version = self.applied.sparse_read([0])[0]
        return start, version

    def end(self, start, version, forward_time, variables, loss, accuracy) -> None:
        """Record the update after its weights have landed on the PS."""
        landed = [tf.raw_ops.ReadVariableOp(resource=v.handle, dtype=v.dtype) for v in variables]
        with tf.control_dependencies(landed):
            index = self.lock.execute(lambda: self.applied.assign_add([1], read_value=True)[0]) - 1
        with tf.control_dependencies([index]):
            end = tf.timestamp()
        worker = tf.cast(tf.distribute.coordinator.experimental_get_current_worker_index(), tf.float64)
        row = tf.stack(
            [tf.cast(version, tf.float64), worker, start, forward_time, end,
             tf.cast(loss, tf.float64), tf.cast(accuracy, tf.float64)]
        )
        self.log.scatter_nd_update(tf.reshape(index, [1, 1]), row[None, :])

    def rows(self) -> np.ndarray:
        """The log's filled rows (one per applied update, in apply order)."""
        count = int(self.applied.numpy()[0])
        return self.log.numpy()[:count]


    def wrap(self, update, model: tf.keras.Model):
        """``update(x, y) -> (logits, loss)`` run between :meth:`begin` and :meth:`end`."""

        def probed(x, y):
            start, version = self.begin()
            with tf.control_dependencies([version]):  # every weight read of the update follows the version read
                logits, loss = update(x, y)
            with tf.control_dependencies([loss]):
                forward_time = tf.timestamp()
            correct = tf.cast(tf.equal(tf.argmax(logits, axis=-1, output_type=y.dtype), y), tf.float32)
            self.end(start, version, forward_time, model.trainable_variables, loss, tf.reduce_mean(correct))
            return logits, loss

        return probed


class CpuSampler:
    """This process's CPU seconds (every thread's: ``time.process_time``) against
    the Unix time, sampled every ``period_s`` on a daemon thread while open, so
    that afterwards the cores a window of the run kept busy can be read
    (:meth:`cores_busy`). The probe's times are ``tf.timestamp()``, the same clock
    as ``time.time()``."""

    def __init__(self, period_s: float = 0.005) -> None:
        self.period_s = period_s
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="cpu-sampler", daemon=True)

    def _sample(self) -> None:
        while True:
            self.samples.append((time.time(), time.process_time()))
            if self._stop.wait(self.period_s):
                return

    def __enter__(self) -> "CpuSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.samples.append((time.time(), time.process_time()))

    def cores_busy(self, start_s: float, end_s: float) -> float:
        """Mean number of this process's cores busy from ``start_s`` to ``end_s``
        (Unix seconds), the CPU seconds interpolated between samples."""
        if not end_s > start_s:
            raise ValueError(f"the window must have end_s > start_s; got {start_s!r} to {end_s!r}")
        wall, cpu = np.array(self.samples).T
        if start_s < wall[0] or end_s > wall[-1]:
            raise ValueError(f"the window {start_s!r} to {end_s!r} lies outside the samples "
                             f"({wall[0]!r} to {wall[-1]!r})")
        used = np.interp(end_s, wall, cpu) - np.interp(start_s, wall, cpu)
        return float(used / (end_s - start_s))


class _EpochProgress(tf.keras.callbacks.Callback):
    """Epoch-level progress (ParameterServerStrategy allows no batch-level callbacks)."""

    def __init__(self, plan: RunPlan, on_progress: Progress) -> None:
        super().__init__()
        self.plan, self.on_progress = plan, on_progress

    def on_epoch_end(self, epoch, logs=None):
        loss = float((logs or {}).get("loss", np.nan))
        self.on_progress((epoch + 1) * self.plan.steps_per_epoch, self.plan.total_steps, loss)


def steady_window_s(plan: RunPlan, end_s: np.ndarray) -> tuple[float, float, int]:
    """The steady state of a log's apply times (Unix seconds): from the end of the
    first update after every worker's warm-up steps (tracing on first use) to the
    last, and how many updates lie between."""
    n = len(end_s)
    if n < 2:
        raise ValueError(f"only {n} update(s) were recorded; a parameter-server result needs at least 2")
    first = min(plan.warmup_steps * plan.num_workers, n - 2)
    return float(end_s[first]), float(end_s[-1]), n - 1 - first


def result_from_log(plan: RunPlan, rows: np.ndarray, meta: dict[str, str]) -> Result:
    """A measured :class:`Result` from the probe's rows (see :data:`LOG_COLUMNS`)."""
    read, worker, start, forward, end, loss, acc = (rows[:, i] for i in range(len(LOG_COLUMNS)))
    n = len(rows)
    window_start, window_end, updates = steady_window_s(plan, end)
    worker = worker.astype(np.int64)
    staleness = np.arange(n, dtype=np.int64) - read.astype(np.int64)
    t0 = float(start.min())
    interval_s = (window_end - window_start) / updates
    events = []
    for j in range(n):
        device = f"worker{worker[j]}"
        events.append(Event(device, "compute", start[j] - t0, forward[j] - t0, j, "read + forward"))
        events.append(Event(device, "update", forward[j] - t0, max(end[j], forward[j]) - t0, j,
                            "backward + push + apply"))
    return Result(
        source="measured",
        strategy=plan.strategy,
        num_replicas=plan.num_workers,
        global_batch=plan.global_batch,
        summary=Summary(
            step_time_s=interval_s * plan.num_workers,
            throughput_samples_per_s=plan.per_replica_batch / interval_s,
            epoch_time_s=interval_s * plan.steps_per_epoch,
            mean_staleness=float(staleness.mean()),
        ),
        step_times_s=end - start,
        trace=Trace.from_events(events),
        curve=Curve(step=np.arange(1, n + 1), time_s=end - t0, loss=loss, accuracy=acc),
        staleness=Staleness(staleness=staleness, worker=worker),
        meta={**meta, "t0_unix_s": repr(t0), "ps_loop": plan.ps_loop, "ps_cluster": plan.ps_cluster},
    )


def train(plan: RunPlan, task: str, on_progress: Progress | None) -> Result:
    """Run the ``mnist_ps`` script's loop for ``plan`` with the probe, and return the measured result."""
    script = load_script(PS_SCRIPT)
    args = script.parse_args(script_args(plan))
    strategy = script.make_strategy(args)
    probes: list[StalenessProbe] = []

    def wrap(update, model):  # called by the script inside strategy.scope(): the probe lives on the PS
        # Room for twice the planned updates: a worker that dies mid-step can have its step applied and then
        # rescheduled by the coordinator (at-least-once execution), so more updates can land than were planned.
        probes.append(StalenessProbe(2 * plan.total_steps))
        return probes[-1].wrap(update, model)

    meta = run_meta(plan, describe_tensorflow(), strategy_info(strategy, plan), task)
    callbacks = [_EpochProgress(plan, on_progress)] if on_progress else []
    loop = script.train_fit if plan.ps_loop == "fit" else script.train_custom
    with CpuSampler() as cpu:
        history = loop(strategy, args, callbacks=callbacks, wrap=wrap)
    rows = probes[0].rows()
    result = result_from_log(plan, rows, meta)
    if plan.ps_cluster == "in_process":  # every server is a thread of this process, so its CPU is theirs
        start_s, end_s, _ = steady_window_s(plan, rows[:, LOG_COLUMNS.index("end_s")])
        result.meta["steady_cores_busy"] = repr(cpu.cores_busy(start_s, end_s))
    if plan.ps_loop == "custom":  # per-epoch means of the per-update values, in apply order
        epochs = np.array_split(rows, plan.epochs)
        history = {key: [float(e[:, LOG_COLUMNS.index(key)].mean()) for e in epochs] for key in ("loss", "accuracy")}
    result.meta.update(epoch_meta(history))
    return result
