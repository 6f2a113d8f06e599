"""Launch one real experiment on this machine and return its measured :class:`Result`.

Each experiment runs in fresh processes, because what TensorFlow fixes at
start-up (logical device count, ``tf_keras``, collective ops) differs between
configurations. :func:`run` is the function notebooks call: it starts the
task processes through :mod:`distsim.real.launcher`, shows progress, tears
every process down whatever happens, and returns the chief's result with
every worker's measured steps merged into one trace.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import signal
import sys
import tempfile
from pathlib import Path
from typing import Sequence

import numpy as np

from distsim.real.launcher import (
    SERVER_STARTED,
    Launch,
    LaunchError,
    LaunchOutcome,
    Task,
    Watcher,
    python_module_argv,
)
from distsim.real.plan import RunPlan, plan_from_scenario
from distsim.real.protocol import EXIT_NO_TPU, PROGRESS_PREFIX, NoTPUError
from distsim.real.tfconfig import build_tf_configs, localhost_cluster, task_name
from distsim.results.result import Result
from distsim.results.trace import Trace
from distsim.validation import InputError, Integer, Number

#: Log text that means a port was taken between picking it and binding it.
_PORT_RACE = re.compile(r"Address already in use|Failed to add port|Could not start gRPC server")


def _worker_argv(plan_path: Path, out: Path, tf_config: dict | None, extra: list[str]) -> list[str]:
    argv = ["worker", "--plan", str(plan_path), "--out", str(out), *extra]
    if tf_config is not None:
        argv += ["--tf-config", json.dumps(tf_config, separators=(",", ":"))]
    return python_module_argv("distsim.real", *argv)


def plan_tasks(
    plan: RunPlan,
    workdir: Path,
    *,
    backup_dir: Path | None = None,
    model_dir: Path | None = None,
    progress_every_s: float = 0.5,
) -> list[Task]:
    """The processes ``plan`` needs, with fresh localhost ports for clusters."""
    plan_path = plan.save(workdir / "plan.json")
    extra = ["--progress-every-s", repr(progress_every_s)]
    if backup_dir is not None:
        extra += ["--backup-dir", str(backup_dir)]
    if model_dir is not None:
        extra += ["--model-dir", str(model_dir)]
    if not plan.multi_process:
        servers = plan.num_workers + plan.num_ps if plan.strategy == "parameter_server" else 0
        name = "chief0" if servers else "worker0"
        return [
            Task(
                name=name,
                argv=_worker_argv(plan_path, workdir / f"{name}.json", None, extra),
                ready_pattern=SERVER_STARTED if servers else None,
                ready_count=max(servers, 1),
                stop_signal=signal.SIGKILL,
            )
        ]
    if plan.strategy == "multi_worker_mirrored":
        cluster = localhost_cluster(plan.num_workers)
    else:
        cluster = localhost_cluster(plan.num_workers, plan.num_ps, chief=True)
    tasks = []
    for config in build_tf_configs(cluster, localhost_only=True):
        name = task_name(config)
        coordinator_only = config["task"]["type"] == "chief" and plan.strategy == "parameter_server"
        tasks.append(
            Task(
                name=name,
                argv=_worker_argv(plan_path, workdir / f"{name}.json", config, extra),
                # A PS coordinator starts no server; PS workers and servers never exit by themselves.
                ready_pattern=None if coordinator_only else SERVER_STARTED,
                must_exit=plan.strategy != "parameter_server" or coordinator_only,
                stop_signal=signal.SIGKILL,  # TensorFlow takes SIGTERM as a preemption notice
            )
        )
    return tasks


class _ProgressBar:
    """Turns the chief's ``distsim-progress`` log lines into a tqdm bar."""

    def __init__(self, label: str, chief: str) -> None:
        from tqdm.auto import tqdm

        self.chief = chief
        self.bar = tqdm(total=None, desc=label, unit="step", leave=False)

    def __call__(self, launch: Launch, name: str, line: str) -> None:
        if name != self.chief or not line.startswith(PROGRESS_PREFIX + " "):
            return
        _, done, total, loss = line.split()
        self.bar.total = int(total)
        self.bar.n = int(done)
        self.bar.set_postfix(loss=loss, refresh=False)
        self.bar.refresh()

    def close(self) -> None:
        self.bar.close()


def merge_worker_results(results: dict[str, Result], chief: str) -> Result:
    """The chief's result with every task's measured steps in one trace.

    Traces are aligned on the shared wall clock (``meta["t0_unix_s"]``).
    """
    main = results[chief]
    if len(results) == 1:
        return main
    t0 = min(float(r.meta["t0_unix_s"]) for r in results.values())
    events = []
    for r in results.values():
        shift = float(r.meta["t0_unix_s"]) - t0
        for e in r.trace.events():
            events.append(e.__class__(e.device, e.kind, e.start_s + shift, e.end_s + shift, e.step, e.label))
    main.trace = Trace.from_events(events)
    main.meta["t0_unix_s"] = repr(t0)
    main.meta["worker_step_time_s"] = json.dumps(
        {name: float(np.median(r.step_times_s)) for name, r in sorted(results.items())}
    )
    return main


def launch_plan(
    plan: RunPlan,
    workdir: Path,
    *,
    timeout_s: float = 600.0,
    ready_timeout_s: float = 120.0,
    progress: bool = True,
    fail_fast: bool = True,
    watchers: Sequence[Watcher] = (),
    backup_dir: Path | None = None,
    model_dir: Path | None = None,
    progress_every_s: float = 0.5,
    port_retries: int = 2,
) -> tuple[LaunchOutcome, list[Task]]:
    """Start ``plan``'s tasks, wait, tear down; retry with fresh ports on a port race.

    Returns the launch outcome (never raises for a failed task; see
    :func:`run` for that) and the tasks. Arguments as in :func:`run`, plus
    ``fail_fast`` and ``watchers`` (see :meth:`Launch.wait`) and
    ``progress_every_s``, the least time between two progress lines of a
    worker (0: one line per step).
    """
    seconds = Number(0, low_open=True, unit="seconds")
    seconds("timeout_s", timeout_s)  # before any process starts
    seconds("ready_timeout_s", ready_timeout_s)
    Number(0, unit="seconds")("progress_every_s", progress_every_s)
    port_retries = Integer(0)("port_retries", port_retries)
    workdir.mkdir(parents=True, exist_ok=True)
    for attempt in range(port_retries + 1):
        tasks = plan_tasks(
            plan, workdir, backup_dir=backup_dir, model_dir=model_dir, progress_every_s=progress_every_s
        )
        bar = _ProgressBar(plan.label, tasks[0].name) if progress else None
        try:
            with Launch(tasks, workdir, watchers=[*watchers, *([bar] if bar else [])]) as launch:
                outcome = launch.wait(timeout_s=timeout_s, ready_timeout_s=ready_timeout_s, fail_fast=fail_fast)
        finally:
            if bar:
                bar.close()
        port_race = not outcome.ok and any(_PORT_RACE.search(t.log_text()) for t in outcome.tasks)
        if not (port_race and attempt < port_retries):
            return outcome, tasks
    raise AssertionError("unreachable: the loop returns on its last attempt")


def collect_result(tasks: Sequence[Task], workdir: Path) -> Result:
    """Load the results the tasks wrote and merge them (chief first)."""
    results = {
        t.name: Result.load(workdir / f"{t.name}.json")
        for t in tasks
        if t.must_exit and (workdir / f"{t.name}.json").exists()
    }
    if tasks[0].name not in results:
        raise FileNotFoundError(f"the chief ({tasks[0].name}) wrote no result in {workdir}")
    result = merge_worker_results(results, tasks[0].name)
    result.meta["launched_by"] = shlex.join([sys.executable, *sys.argv])
    result.meta["task_commands"] = json.dumps({t.name: shlex.join(t.argv) for t in tasks})
    return result


def as_plan(experiment, **real_options) -> RunPlan:
    """A :class:`RunPlan` from a plan or a :class:`distsim.scenario.Scenario`."""
    if isinstance(experiment, RunPlan):
        return experiment.with_(**real_options) if real_options else experiment
    from distsim.scenario import Scenario

    if isinstance(experiment, Scenario):
        return plan_from_scenario(experiment, **real_options)
    raise InputError("experiment", experiment, "a RunPlan or a distsim.scenario.Scenario")


def plan_from_scenario_file(path: str | Path, **real_options) -> tuple[RunPlan, object]:
    """``(plan, scenario)`` for a Scenario JSON file."""
    from distsim.scenario import Scenario

    scenario = Scenario.load(path)
    return plan_from_scenario(scenario, **real_options), scenario


def run(
    experiment,
    *,
    timeout_s: float = 600.0,
    ready_timeout_s: float = 120.0,
    progress: bool = True,
    log_dir: str | Path | None = None,
    backup_dir: str | Path | None = None,
    model_dir: str | Path | None = None,
    **real_options,
) -> Result:
    """Run an experiment for real on this machine; return ``Result(source="measured")``.

    Args:
        experiment: a :class:`distsim.scenario.Scenario` (the same one the
            simulator predicts) or a :class:`~distsim.real.plan.RunPlan`.
        timeout_s: seconds after which every task is killed and
            :class:`~distsim.real.launcher.LaunchError` is raised.
        ready_timeout_s: seconds within which every server must log its start.
        progress: show a tqdm progress bar fed by the chief's log.
        log_dir: keep the task logs and files here (default: a temporary
            folder, deleted on success and kept on failure).
        backup_dir: ``BackupAndRestore`` folder; a relaunch resumes from it.
        model_dir: the chief saves the final model (and ``final_weights.npz``) here.
        real_options: :class:`RunPlan` fields only a real run has
            (``ps_loop``, ``steps_per_execution``, ``deterministic``, ...).

    Raises:
        LaunchError: a task failed, timed out or never got ready; the message
            holds every task's exit status and log tail.
        NoTPUError: ``plan.strategy == "tpu"`` and no TPU is attached.
    """
    plan = as_plan(experiment, **real_options)
    keep = log_dir is not None
    workdir = Path(log_dir) if keep else Path(tempfile.mkdtemp(prefix="distsim-real-"))
    outcome, tasks = launch_plan(
        plan,
        workdir,
        timeout_s=timeout_s,
        ready_timeout_s=ready_timeout_s,
        progress=progress,
        backup_dir=Path(backup_dir) if backup_dir is not None else None,
        model_dir=Path(model_dir) if model_dir is not None else None,
    )
    if not outcome.ok:
        if outcome.tasks[0].returncode == EXIT_NO_TPU:
            lines = outcome.tasks[0].log_text().splitlines()
            shutil.rmtree(workdir, ignore_errors=True)
            raise NoTPUError(next((ln for ln in lines if ln.startswith("no TPU")), "no TPU on this runtime"))
        raise LaunchError(outcome)
    result = collect_result(tasks, workdir)
    if not isinstance(experiment, RunPlan):
        result.scenario = experiment
    if not keep:
        shutil.rmtree(workdir, ignore_errors=True)
    return result


def tpu_status(timeout_s: float = 120.0) -> tuple[bool, str]:
    """``(available, one line)``: probe for a TPU in a fresh process."""
    try:
        result = run(RunPlan("tpu", steps_per_epoch=2, warmup_steps=0), timeout_s=timeout_s, progress=False)
    except NoTPUError as exc:
        return False, str(exc)
    return True, f"TPU found: {result.meta.get('devices', '')}"
