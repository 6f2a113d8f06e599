"""Fault tolerance for real: kill a MultiWorkerMirrored worker, fail cleanly, relaunch, resume.

:func:`run_with_failure` does the whole story on localhost:

1. launches the cluster with ``BackupAndRestore`` (a checkpoint every epoch);
2. SIGKILLs one worker once the chief reports ``kill_after_steps`` steps;
3. waits for the survivors to notice by themselves (TensorFlow's coordination
   service reports the dead task as unhealthy and the collective aborts), so
   the job *fails* instead of hanging; the launcher's timeout is the backstop;
4. relaunches the same cluster, which restores the last checkpoint and
   trains the remaining epochs;
5. returns what happened, including the final weights the chief saved.

Resuming is exact only if every epoch sees the same batches whether or not
the run was interrupted, so the plan must not shuffle (``shuffle_buffer=0``) (a restarted input
pipeline would replay epoch 0's shuffle order) and should use deterministic ops.
No TensorFlow is imported here: everything runs in the task processes.
"""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from distsim.real.experiment import collect_result, launch_plan
from distsim.real.launcher import Launch, LaunchError, LaunchOutcome
from distsim.real.plan import RunPlan
from distsim.real.protocol import PROGRESS_PREFIX
from distsim.results.result import Result
from distsim.validation import InputError, InstanceOf, Integer, MissingFileError


@dataclass
class FaultToleranceRun:
    """What :func:`run_with_failure` observed.

    Attributes:
        plan: the run.
        killed_task: the worker that was SIGKILLed.
        interrupted: outcome of the first launch (status ``"failed"`` when the
            survivors noticed the failure themselves, ``"timeout"`` if they hung).
        steps_before_failure: the last step the chief reported before failing.
        survivor_error: the last error line of the chief's log.
        resumed: the relaunched run's measured result.
        resumed_from_epoch: the epoch the relaunch started at (0-based).
        model_dir: where the chief saved the final model and weights.
    """

    plan: RunPlan
    killed_task: str
    interrupted: LaunchOutcome
    steps_before_failure: int
    survivor_error: str
    resumed: Result
    resumed_from_epoch: int
    model_dir: Path

    @property
    def failed_cleanly(self) -> bool:
        """Every survivor exited by itself with an error (nobody had to be killed)."""
        survivors = [t for t in self.interrupted.tasks if t.name != self.killed_task]
        return self.interrupted.status == "failed" and all(
            t.returncode not in (None, 0) and not t.torn_down for t in survivors
        )

    @property
    def steps_lost(self) -> int:
        """Steps done before the failure that the relaunch had to redo."""
        return self.steps_before_failure - self.resumed_from_epoch * self.plan.steps_per_epoch


class _KillAfter:
    """Watcher: SIGKILL ``target`` once ``chief`` reports ``steps`` done; tracks the chief's progress."""

    def __init__(self, chief: str, target: str, steps: int) -> None:
        self.chief, self.target, self.steps = chief, target, steps
        self.last_done = 0
        self.killed = False

    def __call__(self, launch: Launch, name: str, line: str) -> None:
        if name != self.chief or not line.startswith(PROGRESS_PREFIX + " "):
            return
        self.last_done = int(line.split()[1])
        if not self.killed and self.last_done >= self.steps:
            launch.kill(self.target, signal.SIGKILL)
            self.killed = True


def load_final_weights(model_dir: str | Path) -> list[np.ndarray]:
    """The chief's ``final_weights.npz`` as a Keras-ordered list of arrays."""
    path = Path(model_dir) / "final_weights.npz"
    if not path.is_file():
        raise MissingFileError(str(path), None, "the model_dir of a finished run (its chief writes this file)",
                               problem="no final weights here; did the chief finish training?")
    with np.load(path) as npz:
        return [npz[f"arr_{i}"] for i in range(len(npz.files))]


def _last_error_line(text: str) -> str:
    errors = [ln for ln in text.splitlines() if re.search(r"Error\b|error:", ln) and not ln.startswith(("I0", "W0"))]
    return errors[-1].strip() if errors else ""


def _check_failure(plan: RunPlan, kill_after_steps: int, kill_task: str) -> None:
    InstanceOf(RunPlan, "a RunPlan")("plan", plan)
    if plan.strategy != "multi_worker_mirrored":
        raise InputError("plan.strategy", plan.strategy, "'multi_worker_mirrored' (one of its workers is killed)")
    Integer(2, note="a survivor to see the failure")("plan.num_workers", plan.num_workers)
    Integer(2, note="a checkpoint to resume from, and an epoch left to train")("plan.epochs", plan.epochs)
    if plan.shuffle_buffer:
        raise InputError("plan.shuffle_buffer", plan.shuffle_buffer, "0 (a relaunch would replay another batch order)")
    last = (plan.epochs - 1) * plan.steps_per_epoch - 1
    Integer(1, last, "a step before the last epoch, so there is a checkpoint to resume from and work left to do")(
        "kill_after_steps", kill_after_steps)
    workers = tuple(f"worker{i}" for i in range(1, plan.num_workers))
    if kill_task not in workers:
        raise InputError("kill_task", kill_task, f"one of {workers}: a worker other than the chief, worker0")


def run_with_failure(
    plan: RunPlan,
    workdir: str | Path,
    *,
    kill_after_steps: int,
    kill_task: str = "worker1",
    timeout_s: float = 180.0,
    progress: bool = False,
) -> FaultToleranceRun:
    """Kill ``kill_task`` mid-training, check the job fails, relaunch, resume.

    Args:
        plan: a ``multi_worker_mirrored`` plan with ``shuffle_buffer=0`` (see
            module docs) and at least 2 workers and 2 epochs.
        workdir: folder for logs, the backup and the final model.
        kill_after_steps: SIGKILL once the chief has done this many steps;
            must fall before the last epoch.
        kill_task: the worker to kill (not ``worker0``, the chief).
        timeout_s: per launch.
        progress: show progress bars.

    Raises:
        InputError: an unsuitable plan, kill point or task.
        LaunchError: the first launch did not fail at all, or the relaunch failed.
    """
    _check_failure(plan, kill_after_steps, kill_task)
    workdir = Path(workdir)
    backup_dir, model_dir = workdir / "backup", workdir / "model"
    killer = _KillAfter("worker0", kill_task, kill_after_steps)
    interrupted, _ = launch_plan(
        plan, workdir / "interrupted", timeout_s=timeout_s, progress=progress, fail_fast=False,
        watchers=[killer], backup_dir=backup_dir, model_dir=model_dir, progress_every_s=0.0,
    )
    if not killer.killed or interrupted.ok:
        raise LaunchError(interrupted)
    outcome, tasks = launch_plan(
        plan, workdir / "resumed", timeout_s=timeout_s, progress=progress,
        backup_dir=backup_dir, model_dir=model_dir,
    )
    if not outcome.ok:
        raise LaunchError(outcome)
    resumed = collect_result(tasks, workdir / "resumed")
    return FaultToleranceRun(
        plan=plan,
        killed_task=kill_task,
        interrupted=interrupted,
        steps_before_failure=killer.last_done,
        survivor_error=_last_error_line(interrupted.task("worker0").log_text()),
        resumed=resumed,
        resumed_from_epoch=int(resumed.meta["first_epoch"]),
        model_dir=model_dir,
    )


@dataclass
class ParameterServerFailureRun:
    """What :func:`run_ps_with_worker_failure` observed.

    Attributes:
        plan: the run (``ps_cluster="processes"``).
        killed_task: the worker that was SIGKILLed.
        killed_after_updates: updates the coordinator had reported when it was killed.
        outcome: the launch; the chief exits 0 when training survived the loss.
        result: the chief's measured result (every applied update, with its worker).
    """

    plan: RunPlan
    killed_task: str
    killed_after_updates: int
    outcome: LaunchOutcome
    result: Result

    @property
    def applied_updates(self) -> int:
        """Updates the parameter servers applied: at least the plan's, more when a step the dead worker
        had already applied was rescheduled (ClusterCoordinator runs a function at least once)."""
        return len(self.result.staleness.staleness)

    @property
    def survived(self) -> bool:
        """The coordinator finished every update by itself after the worker died."""
        chief = self.outcome.task("chief0")
        return chief.returncode == 0 and not chief.torn_down and self.applied_updates >= self.plan.total_steps


def run_ps_with_worker_failure(
    plan: RunPlan,
    workdir: str | Path,
    *,
    kill_after_updates: int,
    kill_task: str = "worker1",
    timeout_s: float = 240.0,
) -> ParameterServerFailureRun:
    """Kill a parameter-server worker mid-training and let ``ClusterCoordinator`` carry on.

    The coordinator reports progress once per epoch (ParameterServerStrategy
    has no per-step callbacks), so the kill happens at the first epoch end at
    or after ``kill_after_updates``. The launch does not stop at the dead
    worker (``fail_fast=False``): the coordinator must notice by itself,
    reschedule the dead worker's functions on the others, and finish.

    Raises:
        InputError: not a ``processes`` parameter-server plan with >= 2 workers,
            or a kill point outside the run.
        LaunchError: the coordinator did not finish (error or timeout).
    """
    plan = InstanceOf(RunPlan, "a RunPlan")("plan", plan)
    if plan.strategy != "parameter_server" or plan.ps_cluster != "processes" or plan.num_workers < 2:
        raise InputError("plan", plan.label, "a parameter_server plan with ps_cluster='processes' (one process per "
                         "task) and >= 2 workers")
    Integer(1, plan.total_steps - 1, "an update inside the run")("kill_after_updates", kill_after_updates)
    workdir = Path(workdir)
    killer = _KillAfter("chief0", kill_task, kill_after_updates)
    outcome, tasks = launch_plan(plan, workdir, timeout_s=timeout_s, progress=False, fail_fast=False,
                                 watchers=[killer], progress_every_s=0.0)
    chief = outcome.task("chief0")
    if not killer.killed or chief.returncode != 0:
        raise LaunchError(outcome)
    return ParameterServerFailureRun(plan, kill_task, killer.last_done, outcome, collect_result(tasks, workdir))
