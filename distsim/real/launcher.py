"""Start a set of task processes on this machine, watch them, and always tear them down.

Every task runs in its own session (``start_new_session=True``), so it and
anything it starts form one process group that :meth:`Launch.close` can kill
as a whole. Teardown runs on every exit path: success, a failed task, a
timeout, ``KeyboardInterrupt`` and ``SIGTERM`` (turned into
:class:`LaunchInterrupted` while a launch is open in the main thread). If the
launching process itself is killed with ``SIGKILL``, the children still die:
``python -m distsim.real`` asks the kernel for ``SIGKILL`` on parent death
(see :func:`distsim.real.__main__.die_with_parent`).

Readiness is read from the logs: a task counts as ready once its log shows the
``tf.distribute`` server start line as many times as it starts servers. There
are no fixed sleeps anywhere; the loop polls the log files.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Sequence

from distsim.real.protocol import PARENT_PID_ENV
from distsim.validation import (Boolean, InputError, InstanceOf, Integer, Number, Optional, StringMap, Text,
                                check_fields, checked, checked_path)

#: What TensorFlow logs when a ``tf.distribute.Server`` is up.
SERVER_STARTED = r"Started server with target: grpc://"

#: The folder that holds the ``distsim`` package, for the children's PYTHONPATH.
_DISTSIM_ROOT = str(Path(__file__).resolve().parents[2])

#: Seconds a task gets between SIGTERM and SIGKILL during teardown.
TERM_GRACE_S = 3.0

#: Seconds teardown waits, for all tasks together, for SIGKILLed tasks to die.
#: Only a process the kernel holds (a frozen cgroup, uninterruptible sleep)
#: outlives SIGKILL; teardown names it instead of waiting for it forever.
KILL_REAP_S = 10.0

#: How often the launcher looks at the logs and processes, in seconds.
POLL_S = 0.05

_TIMEOUT = Number(1e-3, 7 * 86_400, unit="seconds")


@dataclass
class Task:
    """One process to start.

    Attributes:
        name: label, e.g. ``"worker1"``; also the log file's stem.
        argv: the command line.
        env: extra environment variables (on top of this process's).
        ready_pattern: regular expression that marks readiness in the log,
            or ``None`` for a task that is ready as soon as it starts.
        ready_count: how many matches make the task ready (an in-process
            parameter-server cluster starts several servers).
        must_exit: the launch is done when every such task has exited 0.
            Servers that run until killed (parameter-server ``worker``/``ps``
            tasks) set this to ``False``; they are torn down afterwards.
        stop_signal: what teardown sends first; SIGKILL follows after
            :data:`TERM_GRACE_S`. TensorFlow workers catch SIGTERM as a
            preemption notice and keep running, so they are stopped with
            SIGKILL directly.
    """

    name: str = checked(Text(200))
    argv: list[str]
    env: dict[str, str] = checked(StringMap(), default_factory=dict)
    ready_pattern: str | None = checked(Optional(Text(), "ready as soon as it starts"), default=SERVER_STARTED)
    ready_count: int = checked(Integer(1, 10_000), default=1)
    must_exit: bool = checked(Boolean(), default=True)
    stop_signal: int = checked(Integer(1, signal.NSIG - 1, "a signal number"), default=signal.SIGTERM)

    def __post_init__(self) -> None:
        check_fields(self, "Task")
        if not self.name.strip() or "/" in self.name or self.name in (".", ".."):
            raise InputError("Task.name", self.name, "a name without '/' (it is also its log file's name)")
        if not isinstance(self.argv, list) or not self.argv or not all(isinstance(a, str) and "\0" not in a
                                                                        for a in self.argv):
            raise InputError("Task.argv", self.argv, "a non-empty list of strings without NUL (the command line)")
        for key, value in self.env.items():
            if not key or "=" in key or "\0" in key:
                raise InputError(f"Task.env.{key}", value, "a variable name that is not empty and has no '=' or NUL")
            if isinstance(value, str) and "\0" in value:
                raise InputError(f"Task.env.{key}", value, "a string without NUL")
            Text()(f"Task.env.{key}", value)
        if self.ready_pattern is not None:
            try:
                re.compile(self.ready_pattern)
            except re.error as exc:
                raise InputError("Task.ready_pattern", self.ready_pattern, f"a regular expression ({exc})") from None


@dataclass
class TaskOutcome:
    """How one task ended.

    Attributes:
        name: the task's name.
        pid: its process id (also its process-group id).
        returncode: exit status; negative means killed by that signal; ``None``
            if it outlived teardown (see :class:`SurvivedKill`).
        log_path: file holding its stdout and stderr.
        ready_after_s: seconds from start to readiness, or ``None``.
        torn_down: the launcher killed it (teardown or :meth:`Launch.kill`).
    """

    name: str
    pid: int
    returncode: int | None
    log_path: Path
    ready_after_s: float | None
    torn_down: bool

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def log_tail(self, lines: int = 25) -> str:
        """The last ``lines`` lines of the log, without TensorFlow's W/I chatter."""
        kept = [ln for ln in self.log_text().splitlines() if not re.match(r"^[IW]\d{4} ", ln)]
        return "\n".join(kept[-lines:])


#: Possible values of :attr:`LaunchOutcome.status`.
STATUSES = ("ok", "failed", "timeout", "not_ready")


@dataclass
class LaunchOutcome:
    """What happened to a launch.

    Attributes:
        status: one of :data:`STATUSES`.
        tasks: one outcome per task, in launch order.
        elapsed_s: seconds from start to teardown.
        reason: one line explaining a status other than ``"ok"``.
    """

    status: str
    tasks: list[TaskOutcome]
    elapsed_s: float
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def task(self, name: str) -> TaskOutcome:
        for t in self.tasks:
            if t.name == name:
                return t
        raise KeyError(f"no task {name!r}; tasks are {[t.name for t in self.tasks]}")

    def report(self, lines: int = 15) -> str:
        """The reason and every task's exit status and log tail, for error messages."""
        parts = [f"launch {self.status}: {self.reason}"]
        for t in self.tasks:
            parts.append(f"--- {t.name} (pid {t.pid}, exit {t.returncode}, log {t.log_path}) ---")
            parts.append(t.log_tail(lines))
        return "\n".join(parts)


class LaunchError(RuntimeError):
    """A launch did not finish cleanly; ``.outcome`` holds the details and logs."""

    def __init__(self, outcome: LaunchOutcome) -> None:
        super().__init__(outcome.report())
        self.outcome = outcome


class LaunchInterrupted(KeyboardInterrupt):
    """The launching process got SIGTERM while a launch was open."""


class SurvivedKill(RuntimeWarning):
    """A task was still alive :data:`KILL_REAP_S` seconds after SIGKILL."""


#: ``watch(launch, task_name, line)`` is called for every new log line.
Watcher = Callable[["Launch", str, str], None]


class _Running:
    def __init__(self, task: Task, proc: subprocess.Popen, log_path: Path, log_file) -> None:
        self.task = task
        self.proc = proc
        self.log_path = log_path
        self.log_file = log_file
        self.offset = 0
        self.partial = b""
        self.matches = 0
        self.ready_after_s: float | None = None if task.ready_pattern else 0.0
        self.torn_down = False


class TornDown:
    """A context manager that undoes what it started on every exit path.

    ``with`` calls :meth:`start`; if that fails, or when the block ends for
    any reason, :meth:`close` runs :meth:`_teardown` with SIGINT and SIGTERM
    blocked, so a second Ctrl-C cannot cut it short. While it is open in the
    main thread, SIGTERM raises :class:`LaunchInterrupted`, so a ``kill``
    tears down too. Subclasses implement :meth:`start` and :meth:`_teardown`.
    """

    #: What the SIGTERM message says is being torn down.
    what = "what was started"
    _old_sigterm = None

    def __enter__(self):
        self._install_sigterm()
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _install_sigterm(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return

        def on_sigterm(signum, frame):
            raise LaunchInterrupted(f"signal {signum} received; tearing down {self.what}")

        self._old_sigterm = signal.signal(signal.SIGTERM, on_sigterm)

    def start(self) -> None:
        raise NotImplementedError

    def _teardown(self):
        raise NotImplementedError

    def close(self):
        """Undo everything (idempotent); returns what :meth:`_teardown` returns."""
        in_main = threading.current_thread() is threading.main_thread()
        if in_main:
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        try:
            return self._teardown()
        finally:
            # Restore the old SIGTERM handler before unblocking, so a SIGTERM that
            # arrived during teardown now does what it would have done anyway.
            if self._old_sigterm is not None:
                signal.signal(signal.SIGTERM, self._old_sigterm)
                self._old_sigterm = None
            if in_main:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})


class Launch(TornDown):
    """A running set of tasks. Use as a context manager, or call :func:`launch`.

    Example::

        with Launch(tasks, log_dir) as run:
            outcome = run.wait(timeout_s=120)
        # every process is gone here, whatever happened
    """

    def __init__(self, tasks: Sequence[Task], log_dir: str | Path, *, watchers: Sequence[Watcher] = ()) -> None:
        if not isinstance(tasks, (list, tuple)):
            raise InputError("tasks", tasks, "a list of Tasks")
        tasks = [InstanceOf(Task, "a Task")(f"tasks[{i}]", t) for i, t in enumerate(tasks)]
        if not tasks:
            raise InputError("tasks", tasks, "at least one Task")
        names = [t.name for t in tasks]
        for i, name in enumerate(names):
            if name in names[:i]:
                raise InputError(f"tasks[{i}].name", name, "a name no other task has (it names the log file)")
        if not any(t.must_exit for t in tasks):
            raise InputError("tasks", names, "at least one task with must_exit=True (else the launch never finishes)")
        self.tasks = tasks
        self.log_dir = checked_path(log_dir, "log folder", "log_dir")
        self.watchers = list(watchers)
        self._running: list[_Running] = []
        self._t0 = 0.0

    # ---- life cycle -----------------------------------------------------------------
    what = "the launched tasks"

    def start(self) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._t0 = time.monotonic()
        for task in self.tasks:
            env = _with_distsim_path({**os.environ, **task.env, PARENT_PID_ENV: str(os.getpid()),
                                      "PYTHONUNBUFFERED": "1"})
            if task.ready_pattern == SERVER_STARTED:
                # TensorFlow logs the server start at INFO level; a quieter
                # TF_CPP_MIN_LOG_LEVEL inherited from a notebook would hide it
                # and the task would never count as ready.
                env["TF_CPP_MIN_LOG_LEVEL"] = "0"
            log_path = self.log_dir / f"{task.name}.log"
            log_file = open(log_path, "wb")
            try:
                proc = subprocess.Popen(
                    task.argv,
                    stdout=log_file,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    env=env,
                    start_new_session=True,
                )
            except BaseException:
                log_file.close()
                raise
            self._running.append(_Running(task, proc, log_path, log_file))

    def close(self) -> list[TaskOutcome]:
        """Kill every task still alive (SIGTERM, then SIGKILL) and reap it; the outcomes.

        A task still alive :data:`KILL_REAP_S` seconds after SIGKILL is named
        in a :class:`SurvivedKill` warning and left to the kernel."""
        return super().close()

    def _teardown(self) -> list[TaskOutcome]:
        for r in self._running:
            if r.proc.poll() is None:
                r.torn_down = True
                _signal_group(r.proc.pid, r.task.stop_signal)
        deadline = time.monotonic() + TERM_GRACE_S
        for r in self._running:
            try:
                r.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for r in self._running:
            # SIGKILL the whole group even if the leader exited: a child of it may linger.
            _signal_group(r.proc.pid, signal.SIGKILL)
        deadline = time.monotonic() + KILL_REAP_S
        survivors = []
        for r in self._running:
            try:
                r.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                survivors.append(f"{r.task.name} (pid {r.proc.pid}, state {_process_state(r.proc.pid)})")
            r.log_file.close()
        if survivors:
            warnings.warn(f"{', '.join(survivors)} outlived SIGKILL by {KILL_REAP_S:g} s: the kernel holds it "
                          "(state D: uninterruptible sleep; a frozen cgroup), so it dies when released; "
                          "its outcome has no return code", SurvivedKill, stacklevel=3)
        return self.outcomes()

    # ---- monitoring ---------------------------------------------------------------
    @property
    def pids(self) -> dict[str, int]:
        return {r.task.name: r.proc.pid for r in self._running}

    def elapsed_s(self) -> float:
        return time.monotonic() - self._t0

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        """Send ``sig`` to one task's process group (fault injection)."""
        for r in self._running:
            if r.task.name == name:
                r.torn_down = True
                _signal_group(r.proc.pid, sig)
                return
        raise KeyError(f"no task {name!r}; tasks are {[t.name for t in self.tasks]}")

    def _read_new_lines(self, r: _Running) -> list[str]:
        with open(r.log_path, "rb") as f:
            f.seek(r.offset)
            data = f.read()
        r.offset += len(data)
        data = r.partial + data
        *lines, r.partial = data.split(b"\n")
        return [ln.decode(errors="replace") for ln in lines]

    def _poll_logs(self) -> None:
        for r in self._running:
            for line in self._read_new_lines(r):
                if r.task.ready_pattern and r.ready_after_s is None and re.search(r.task.ready_pattern, line):
                    r.matches += 1
                    if r.matches >= r.task.ready_count:
                        r.ready_after_s = self.elapsed_s()
                for watch in self.watchers:
                    watch(self, r.task.name, line)

    def ready(self) -> bool:
        return all(r.ready_after_s is not None for r in self._running)

    def wait(
        self, *, timeout_s: float, ready_timeout_s: float = 60.0, fail_fast: bool = True
    ) -> LaunchOutcome:
        """Watch until every task exits, one fails, or time runs out; then tear down.

        Args:
            timeout_s: seconds (from start) after which everything is killed.
            ready_timeout_s: seconds within which every task must be ready.
            fail_fast: tear the others down as soon as one task exits non-zero.
                ``False`` lets the survivors notice the failure themselves
                (until ``timeout_s``), which is how a fault-tolerance demo shows
                that TensorFlow fails cleanly instead of hanging.
        """
        status, reason = "ok", ""
        try:
            _TIMEOUT("timeout_s", timeout_s)
            _TIMEOUT("ready_timeout_s", ready_timeout_s)
            while True:
                self._poll_logs()
                codes = {r.task.name: r.proc.poll() for r in self._running}
                bad = {n: c for n, c in codes.items() if c not in (None, 0)}
                finishers = [r.task.name for r in self._running if r.task.must_exit]
                if bad and (fail_fast or all(codes[n] is not None for n in finishers)):
                    status, reason = "failed", f"task(s) exited with status {bad}"
                    break
                if all(codes[n] is not None for n in finishers):
                    break
                if not self.ready() and self.elapsed_s() > ready_timeout_s:
                    late = [r.task.name for r in self._running if r.ready_after_s is None]
                    status, reason = "not_ready", f"{late} not ready within {ready_timeout_s} s"
                    break
                if self.elapsed_s() > timeout_s:
                    alive = [n for n, c in codes.items() if c is None]
                    status, reason = "timeout", f"{alive} still running after {timeout_s} s"
                    break
                time.sleep(POLL_S)
            self._poll_logs()
        finally:
            self.close()
        return LaunchOutcome(status, self.outcomes(), self.elapsed_s(), reason)

    def outcomes(self) -> list[TaskOutcome]:
        return [
            TaskOutcome(r.task.name, r.proc.pid, r.proc.poll(), r.log_path, r.ready_after_s, r.torn_down)
            for r in self._running
        ]


def _process_state(pid: int) -> str:
    """The one-letter state of ``pid`` from /proc (``?`` if it cannot be read)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "?"


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def launch(
    tasks: Sequence[Task],
    log_dir: str | Path,
    *,
    timeout_s: float,
    ready_timeout_s: float = 60.0,
    fail_fast: bool = True,
    watchers: Sequence[Watcher] = (),
) -> LaunchOutcome:
    """Start ``tasks``, wait (see :meth:`Launch.wait`), tear down, return the outcome."""
    _TIMEOUT("timeout_s", timeout_s)  # before any process starts (wait checks again for direct callers)
    _TIMEOUT("ready_timeout_s", ready_timeout_s)
    with Launch(tasks, log_dir, watchers=watchers) as run:
        return run.wait(timeout_s=timeout_s, ready_timeout_s=ready_timeout_s, fail_fast=fail_fast)


def _with_distsim_path(env: dict[str, str]) -> dict[str, str]:
    """``env`` with the folder holding ``distsim`` first on ``PYTHONPATH``: a child
    can import distsim even where it is not installed (a Colab clone put on sys.path)."""
    return {**env, "PYTHONPATH": os.pathsep.join(filter(None, [_DISTSIM_ROOT, env.get("PYTHONPATH")]))}


def python_module_argv(module: str, *args: str) -> list[str]:
    """``[<this python>, "-m", module, *args]``."""
    return [sys.executable, "-m", module, *args]


class ProbeFailed(RuntimeError):
    """A :func:`run_python` snippet exited with a non-zero status; the message holds its stderr's tail."""


def run_python(source: str, *args: str, env: Mapping[str, str] | None = None, timeout_s: float = 300.0) -> str:
    """Run ``python -c source *args`` in a fresh interpreter and return its stdout, stripped.

    For a short probe that must not run in the caller's process (one that
    needs its own TensorFlow runtime, or fails in a way that spoils it). The
    child gets ``distsim`` on its ``PYTHONPATH`` and ``TF_CPP_MIN_LOG_LEVEL=3``
    (TensorFlow's C++ log lines off) on top of this process's environment,
    then ``env`` on top of that. It is killed after ``timeout_s`` seconds
    (``subprocess.TimeoutExpired`` is raised). A non-zero exit status raises
    :class:`ProbeFailed` with the status and the last 1500 characters of stderr.
    """
    _TIMEOUT("timeout_s", timeout_s)
    child_env = _with_distsim_path({**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", **(env or {})})
    done = subprocess.run([sys.executable, "-c", source, *args], env=child_env, capture_output=True, text=True,
                          timeout=timeout_s)
    if done.returncode != 0:
        raise ProbeFailed(f"the probe exited with status {done.returncode}; its last words:\n{done.stderr[-1500:]}")
    return done.stdout.strip()


def launched_processes(parent_pid: int | None = None) -> list[int]:
    """PIDs of the live processes a launcher in ``parent_pid`` (default: this process) started.

    Every task carries its launcher's PID in ``DISTSIM_PARENT_PID``; this reads
    it from ``/proc`` (Linux; elsewhere it returns an empty list). A zombie's
    environment reads empty, so reaped-but-not-yet-gone tasks do not count.
    """
    mark = f"{PARENT_PID_ENV}={parent_pid or os.getpid()}".encode()
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if mark in (proc / "environ").read_bytes().split(b"\0"):
                found.append(int(proc.name))
        except OSError:  # exited meanwhile, or not ours to read
            pass
    return found
