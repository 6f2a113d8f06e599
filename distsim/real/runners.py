"""Run one :class:`~distsim.real.plan.RunPlan` on real ``tf.distribute`` in this process.

This module imports TensorFlow (with ``tf_keras`` as ``tf.keras``; see
:mod:`distsim.real.env`). It is what a worker process executes; notebooks and
tests normally call :func:`distsim.real.run`, which starts that process.

The training code is the plan's script in ``notebooks/scripts``
(:mod:`distsim.real.scripts`): this module sets the process up, calls the
script's ``make_strategy`` and ``train`` with the plan's arguments, and adds the
measurement only:

* per-step wall times come from a Keras callback (``on_train_batch_begin``/
  ``_end``). The callback reads the step's logs as numbers, which makes Keras
  wait for the step to finish, so the boundaries are real step boundaries;
* per-step loss and accuracy are recovered exactly from Keras' running epoch
  means (``x_k = k m_k - (k-1) m_{k-1}``) without resetting metrics;
* parameter-server runs are measured on the servers themselves (see
  :mod:`distsim.real.ps`).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np

from distsim.real.env import describe_tensorflow, prepare_environment

prepare_environment()
import tensorflow as tf  # noqa: E402  (must follow prepare_environment)

from distsim.real import ps  # noqa: E402
from distsim.real.building import Progress, configure_for_plan, epoch_meta, run_meta, strategy_info  # noqa: E402
from distsim.real.protocol import NoTPUError  # noqa: E402
from distsim.real.scripts import FIT_SCRIPT, load_script, script_args  # noqa: E402
from distsim.real.plan import RunPlan  # noqa: E402
from distsim.real.tfconfig import task_name, validate_tf_config  # noqa: E402
from distsim.results.result import Curve, Result, Summary  # noqa: E402
from distsim.results.trace import Event, Trace  # noqa: E402
from distsim.validation import InputError  # noqa: E402

# ---- per-step measurement ---------------------------------------------------------------------------
class StepTimer(tf.keras.callbacks.Callback):
    """Wall time, loss and accuracy of every training step.

    Times are ``time.time()`` seconds (one clock for every process on a
    machine, so traces of several workers line up).
    """

    def __init__(self, total_steps: int, steps_per_call: int = 1, on_progress: Progress | None = None) -> None:
        super().__init__()
        self.total_steps = total_steps
        self.steps_per_call = steps_per_call
        self.on_progress = on_progress
        self.begin_s: list[float] = []
        self.end_s: list[float] = []
        self.batch: list[int] = []
        self.epoch: list[int] = []
        self.mean_loss: list[float] = []
        self.mean_accuracy: list[float] = []
        self._epoch = 0

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch

    def on_train_batch_begin(self, batch, logs=None):
        self.begin_s.append(time.time())

    def on_train_batch_end(self, batch, logs=None):
        logs = logs or {}
        loss = float(logs.get("loss", np.nan))  # a number: Keras has waited for the step
        self.end_s.append(time.time())
        self.batch.append(int(batch))
        self.epoch.append(self._epoch)
        self.mean_loss.append(loss)
        self.mean_accuracy.append(float(logs.get("accuracy", np.nan)))
        if self.on_progress is not None:
            self.on_progress(len(self.end_s) * self.steps_per_call, self.total_steps, loss)

    def per_call_values(self, means: list[float]) -> np.ndarray:
        """Undo Keras' running epoch mean, one value per callback call.

        After step ``k`` (1-based within the epoch) Keras reports the mean
        ``m_k`` of the first ``k`` per-step values; all steps have the same
        batch size (``drop_remainder=True``). So the mean over the steps of one
        call, from step ``j`` to ``k``, is ``(k m_k - j m_j) / (k - j)``:
        exact up to float32 rounding of Keras' running sums.
        """
        m = np.asarray(means, dtype=np.float64)
        k = np.asarray(self.batch, dtype=np.float64) + 1.0
        new_epoch = np.r_[True, np.diff(self.epoch) != 0]
        j = np.where(new_epoch, 0.0, np.r_[0.0, k[:-1]])
        m_j = np.where(new_epoch, 0.0, np.r_[0.0, m[:-1]])
        return (k * m - j * m_j) / (k - j)


def sync_result(plan: RunPlan, timer: StepTimer, meta: dict[str, str], num_replicas: int) -> Result:
    """A measured :class:`Result` from one process's :class:`StepTimer`."""
    begin = np.asarray(timer.begin_s)
    end = np.asarray(timer.end_s)
    t0 = float(begin[0])
    step_times = end - begin
    steady = step_times[plan.warmup_steps :] if len(step_times) > plan.warmup_steps else step_times
    step_time_s = float(np.median(steady))
    per_call = timer.steps_per_call
    last_epoch = np.asarray(timer.epoch) == timer.epoch[-1]
    device = meta.get("task", "worker0")
    events = [
        Event(device, "compute", float(b - t0), float(e - t0), i, "train step (measured)")
        for i, (b, e) in enumerate(zip(begin, end))
    ]
    return Result(
        source="measured",
        strategy=plan.strategy,
        num_replicas=num_replicas,
        global_batch=plan.global_batch,
        summary=Summary(
            step_time_s=step_time_s / per_call,
            throughput_samples_per_s=plan.global_batch * per_call / step_time_s,
            epoch_time_s=float(end[last_epoch][-1] - begin[last_epoch][0]),
        ),
        step_times_s=step_times / per_call,
        trace=Trace.from_events(events),
        curve=Curve(
            step=(np.arange(len(end)) + 1) * per_call,
            time_s=end - t0,
            loss=timer.per_call_values(timer.mean_loss),
            accuracy=timer.per_call_values(timer.mean_accuracy),
        ),
        meta={**meta, "t0_unix_s": repr(t0)},
    )


# ---- entry ----------------------------------------------------------------------------------------
def run_plan(
    plan: RunPlan,
    *,
    tf_config: dict | str | None = None,
    on_progress: Progress | None = None,
    backup_dir: str | Path | None = None,
    model_dir: str | Path | None = None,
) -> Result:
    """Run ``plan`` in this process and return what was measured.

    Args:
        plan: the run.
        tf_config: this task's TF_CONFIG for multi-process strategies (also
            read from the ``TF_CONFIG`` environment variable when omitted).
        on_progress: called after every step (or update) with
            ``(done, total, loss)``.
        backup_dir: enable ``BackupAndRestore`` there (checkpoint every
            epoch; a relaunch resumes from the last one).
        model_dir: save the final model there (the script's ``save_final_model``:
            the chief keeps it, every other worker deletes its copy).

    Returns:
        ``Result(source="measured")`` from this task's point of view.
    """
    if tf_config is None and os.environ.get("TF_CONFIG"):
        tf_config = os.environ["TF_CONFIG"]
    if tf_config is not None:
        tf_config = validate_tf_config(tf_config)
        os.environ["TF_CONFIG"] = json.dumps(tf_config)
    elif plan.multi_process:
        raise InputError("RunPlan.strategy", plan.strategy, "a TF_CONFIG for each task with these settings")
    device = configure_for_plan(plan, tf_config)
    task = task_name(tf_config) if tf_config else "worker0"
    if plan.strategy == "parameter_server":
        return ps.train(plan, task, on_progress)
    script = load_script(FIT_SCRIPT)
    args = script.parse_args(script_args(plan, device=device, backup_dir=backup_dir, model_dir=model_dir))
    try:  # first: MultiWorkerMirrored sets up collectives before anything starts the runtime
        strategy = script.make_strategy(args.strategy, args.cross_device_op, args.communication)
    except (ValueError, tf.errors.NotFoundError, tf.errors.UnavailableError) as exc:
        if plan.strategy != "tpu":
            raise
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise NoTPUError(f"no TPU on this runtime ({first[:120]}); skipping TPUStrategy") from None
    info = strategy_info(strategy, plan)
    meta = run_meta(plan, describe_tensorflow(), info, task)
    timer = StepTimer(plan.total_steps, plan.steps_per_execution, on_progress)
    _, history = script.train(args, callbacks=[timer], strategy=strategy)
    result = sync_result(plan, timer, meta, strategy.num_replicas_in_sync)
    result.meta["first_epoch"] = str(timer.epoch[0])
    result.meta.update(epoch_meta(history.history))
    return result
