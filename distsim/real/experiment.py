"""Launch one real experiment on this machine and return its measured :class:`Result`.

Each experiment runs in fresh processes, because what TensorFlow fixes at
start-up (logical device count, ``tf_keras``, collective ops) differs between
configurations. :func:`run` is the function notebooks call: it starts the
task processes through :mod:`distsim.real.launcher`, shows progress, tears
every process down whatever happens, and returns the chief's result with
every worker's measured steps merged into one trace.
"""

from __future__ import annotations

import contextlib
import json
import re
import shlex
import shutil
import signal
import sys
import tempfile
import warnings
from dataclasses import asdict
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
from distsim.real.network import Emulation, Hosts, HostsUnavailable, emulation_from_scenario
from distsim.real.plan import RunPlan, plan_from_scenario
from distsim.real.protocol import EXIT_NO_TPU, PROGRESS_PREFIX, NoTPUError
from distsim.real.tfconfig import build_tf_configs, localhost_cluster, task_name
from distsim.results.result import Result
from distsim.results.trace import Trace
from distsim.validation import InputError, Integer, Number

#: File (in a run's work folder) with what every emulated NIC carried.
NIC_COUNTERS = "nic_counters.json"

#: Log text that means a port was taken between picking it and binding it.
_PORT_RACE = re.compile(r"Address already in use|Failed to add port|Could not start gRPC server")


def _worker_argv(plan_path: Path, out: Path, tf_config: dict | None, extra: list[str]) -> list[str]:
    argv = ["worker", "--plan", str(plan_path), "--out", str(out), *extra]
    if tf_config is not None:
        argv += ["--tf-config", json.dumps(tf_config, separators=(",", ":"))]
    return python_module_argv("distsim.real", *argv)


def cluster_jobs(plan: RunPlan) -> list[tuple[str, int]]:
    """``(job, index)`` of every task of a multi-process ``plan``, in launch order
    (chief, workers, parameter servers)."""
    jobs = [("worker", i) for i in range(plan.num_workers)]
    if plan.strategy == "parameter_server":
        jobs = [("chief", 0), *jobs, *(("ps", i) for i in range(plan.num_ps))]
    return jobs


def plan_tasks(
    plan: RunPlan,
    workdir: Path,
    *,
    backup_dir: Path | None = None,
    model_dir: Path | None = None,
    progress_every_s: float = 0.5,
    hosts: Hosts | None = None,
) -> list[Task]:
    """The processes ``plan`` needs: on fresh localhost ports, or one per
    emulated host of ``hosts`` (task ``i`` of :func:`cluster_jobs` on host ``i``)."""
    plan_path = plan.save(workdir / "plan.json")
    extra = ["--progress-every-s", repr(progress_every_s)]
    if backup_dir is not None:
        extra += ["--backup-dir", str(backup_dir)]
    if model_dir is not None:
        extra += ["--model-dir", str(model_dir)]
    if not plan.multi_process:
        servers = plan.num_workers + plan.num_ps if plan.strategy == "parameter_server" else 0
        name = "chief0" if servers else "worker0"
        argv = _worker_argv(plan_path, workdir / f"{name}.json", None, extra)
        return [
            Task(
                name=name,
                argv=hosts.wrap(0, argv) if hosts is not None else argv,
                ready_pattern=SERVER_STARTED if servers else None,
                ready_count=max(servers, 1),
                stop_signal=signal.SIGKILL,
            )
        ]
    jobs = cluster_jobs(plan)
    local = hosts is None or not hosts.namespaces
    if local:  # free localhost ports, one per task (a CPU quota alone keeps the tasks on localhost)
        counts = {job: sum(1 for j, _ in jobs if j == job) for job, _ in jobs}
        cluster = localhost_cluster(counts["worker"], counts.get("ps", 0), chief="chief" in counts)
    else:
        cluster = {}
        for i, (job, _) in enumerate(jobs):
            cluster.setdefault(job, []).append(hosts.address(i))
    tasks = []
    for i, config in enumerate(build_tf_configs(cluster, localhost_only=local)):
        name = task_name(config)
        coordinator_only = config["task"]["type"] == "chief" and plan.strategy == "parameter_server"
        argv = _worker_argv(plan_path, workdir / f"{name}.json", config, extra)
        tasks.append(
            Task(
                name=name,
                argv=hosts.wrap(i, argv) if hosts is not None else argv,
                # A PS coordinator starts no server; PS workers and servers never exit by themselves.
                ready_pattern=None if coordinator_only else SERVER_STARTED,
                must_exit=plan.strategy != "parameter_server" or coordinator_only,
                stop_signal=signal.SIGKILL,  # TensorFlow takes SIGTERM as a preemption notice
            )
        )
    return tasks


def plan_hosts(plan: RunPlan, emulation: Emulation) -> Hosts | None:
    """The emulated hosts ``plan`` runs on (``None`` for a plain localhost run).

    The straggler is the last worker: the task ``worker<W-1>`` (for a
    one-process plan, that process).

    Raises:
        InputError: a network or a straggler for a plan whose workers share
            one process (Mirrored, CentralStorage, the in-process PS cluster).
    """
    if emulation.plain:
        return None
    if not plan.multi_process and (emulation.network != "localhost" or plan.num_workers > 1):
        raise InputError("emulation.network", emulation.network,
                         f"'localhost' without a straggler for {plan.label}, which runs in one process (emulated "
                         "hosts need one process per task: multi_worker_mirrored, or parameter_server with "
                         "ps_cluster='processes')")
    jobs = cluster_jobs(plan) if plan.multi_process else [("worker", 0)]
    return emulation.hosts(len(jobs), jobs.index(("worker", plan.num_workers - 1)))


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
    emulation: Emulation = Emulation(),
) -> tuple[LaunchOutcome, list[Task]]:
    """Start ``plan``'s tasks, wait, tear down; retry with fresh ports on a port race.

    Returns the launch outcome (never raises for a failed task; see
    :func:`run` for that) and the tasks. Arguments as in :func:`run`, plus
    ``fail_fast`` and ``watchers`` (see :meth:`Launch.wait`),
    ``progress_every_s``, the least time between two progress lines of a
    worker (0: one line per step), and ``emulation``: the emulated hosts the
    tasks run on (built before and torn down after each attempt; with a rate,
    what every NIC carried is written to ``workdir/nic_counters.json``).

    Raises:
        HostsUnavailable: the emulated hosts could not be built (nothing is
            left configured).
    """
    seconds = Number(0, low_open=True, unit="seconds")
    seconds("timeout_s", timeout_s)  # before any process starts
    seconds("ready_timeout_s", ready_timeout_s)
    Number(0, unit="seconds")("progress_every_s", progress_every_s)
    port_retries = Integer(0)("port_retries", port_retries)
    workdir.mkdir(parents=True, exist_ok=True)
    for attempt in range(port_retries + 1):
        hosts = plan_hosts(plan, emulation)
        with hosts if hosts is not None else contextlib.nullcontext():
            tasks = plan_tasks(
                plan, workdir, backup_dir=backup_dir, model_dir=model_dir, progress_every_s=progress_every_s,
                hosts=hosts,
            )
            bar = _ProgressBar(plan.label, tasks[0].name) if progress else None
            try:
                with Launch(tasks, workdir, watchers=[*watchers, *([bar] if bar else [])]) as launch:
                    outcome = launch.wait(timeout_s=timeout_s, ready_timeout_s=ready_timeout_s, fail_fast=fail_fast)
            finally:
                if bar:
                    bar.close()
            if hosts is not None and hosts.rate_Bps is not None:
                counters = {t.name: asdict(c) for t, c in zip(tasks, hosts.counters())}
                (workdir / NIC_COUNTERS).write_text(json.dumps(counters))
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
    if (workdir / NIC_COUNTERS).exists():
        result.meta["nic_counters"] = (workdir / NIC_COUNTERS).read_text()
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


class EmulationUnavailable(UserWarning):
    """A run asked for emulated hosts that cannot be built here; it ran on plain localhost."""


def run_emulation(experiment, network: str = "localhost", emulation: Emulation | None = None) -> Emulation:
    """What a run of ``experiment`` emulates: ``emulation`` if given, else the
    scenario's own (:func:`~distsim.real.network.emulation_from_scenario`),
    else (a :class:`RunPlan`) plain localhost."""
    if emulation is not None:
        return emulation
    if isinstance(experiment, RunPlan):
        if network != "localhost":
            raise InputError("network", network, "'localhost' for a RunPlan (pass a Scenario, whose "
                             "cluster.inter_link gives the rate, or an Emulation)")
        return Emulation()
    return emulation_from_scenario(experiment, network)


def run(
    experiment,
    *,
    timeout_s: float = 600.0,
    ready_timeout_s: float = 120.0,
    progress: bool = True,
    log_dir: str | Path | None = None,
    backup_dir: str | Path | None = None,
    model_dir: str | Path | None = None,
    network: str = "localhost",
    emulation: Emulation | None = None,
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
        network: for a Scenario, one of
            :data:`~distsim.real.network.NETWORKS`: ``"localhost"`` (loopback),
            ``"namespaces"`` (a network namespace per task, through a switch)
            or ``"shaped"`` (the same, every NIC at the scenario's
            ``cluster.inter_link.bandwidth_Bps``). A scenario's
            ``cluster.straggler_cores`` puts the last worker under that CPU
            quota on any network.
        emulation: an explicit :class:`~distsim.real.network.Emulation`
            (overrides ``network``; the way to shape a RunPlan's run).
        real_options: :class:`RunPlan` fields only a real run has
            (``ps_loop``, ``steps_per_execution``, ``deterministic``, ...).

    Where the emulation cannot be built here (not root, no namespaces), the
    run warns once (:class:`EmulationUnavailable`, one line saying why) and
    runs on plain localhost; ``result.meta["network"]`` says what ran.

    Raises:
        LaunchError: a task failed, timed out or never got ready; the message
            holds every task's exit status and log tail.
        NoTPUError: ``plan.strategy == "tpu"`` and no TPU is attached.
    """
    plan = as_plan(experiment, **real_options)
    wanted = run_emulation(experiment, network, emulation)
    used = wanted
    plan_hosts(plan, wanted)  # a network the plan cannot have is bad input, not a fallback
    fallback = wanted.unavailable()
    keep = log_dir is not None
    workdir = Path(log_dir) if keep else Path(tempfile.mkdtemp(prefix="distsim-real-"))
    options = dict(
        timeout_s=timeout_s,
        ready_timeout_s=ready_timeout_s,
        progress=progress,
        backup_dir=Path(backup_dir) if backup_dir is not None else None,
        model_dir=Path(model_dir) if model_dir is not None else None,
    )
    if fallback is None:
        try:
            outcome, tasks = launch_plan(plan, workdir, emulation=wanted, **options)
        except HostsUnavailable as exc:
            fallback = str(exc)
    if fallback is not None:
        warnings.warn(f"{fallback}; running on plain localhost instead", EmulationUnavailable, stacklevel=2)
        used = Emulation()
        outcome, tasks = launch_plan(plan, workdir, **options)
    if not outcome.ok:
        if outcome.tasks[0].returncode == EXIT_NO_TPU:
            lines = outcome.tasks[0].log_text().splitlines()
            shutil.rmtree(workdir, ignore_errors=True)
            raise NoTPUError(next((ln for ln in lines if ln.startswith("no TPU")), "no TPU on this runtime"))
        raise LaunchError(outcome)
    result = collect_result(tasks, workdir)
    hosts = plan_hosts(plan, used)
    result.meta["network"] = hosts.describe() if hosts is not None else "localhost (loopback)"
    result.meta["emulation"] = json.dumps(asdict(used))
    result.meta["emulation_fallback"] = fallback or ""
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
