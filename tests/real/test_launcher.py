"""The localhost launcher: readiness from logs, failure and timeout teardown, and no orphans
when the launcher itself is interrupted or killed.

The first tests start small real Python processes (no TensorFlow) to exercise
the launcher's own logic quickly; the last ones kill a launcher in the middle
of a real two-worker MultiWorkerMirrored run.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from distsim.real import launcher
from distsim.real.launcher import Launch, ProbeFailed, SurvivedKill, Task, launch, run_python
from distsim.validation import InputError

from processes import alive, child_pids

pytestmark = pytest.mark.tf

PY = sys.executable


def _py(code: str) -> list[str]:
    return [PY, "-c", textwrap.dedent(code)]


SERVER_THEN_SLEEP = _py(
    """
    import time
    print("I0000 grpc_server_lib.cc] Started server with target: grpc://localhost:1", flush=True)
    time.sleep(600)
    """
)


def test_ready_and_success(tmp_path, no_stray_children):
    tasks = [
        Task("a", _py("print('Started server with target: grpc://localhost:1', flush=True)")),
        Task("b", _py("print('no server here', flush=True)"), ready_pattern=None),
    ]
    outcome = launch(tasks, tmp_path, timeout_s=60)
    assert outcome.ok, outcome.report()
    assert [t.returncode for t in outcome.tasks] == [0, 0]
    assert outcome.task("a").ready_after_s is not None
    assert "no server here" in outcome.task("b").log_text()


def test_server_tasks_log_at_info_level_even_when_the_parent_is_quiet(tmp_path, monkeypatch, no_stray_children):
    # Notebooks set TF_CPP_MIN_LOG_LEVEL=2; TensorFlow's "Started server" line is
    # INFO, so a task inheriting that level would never become ready.
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "2")
    echo_level = "import os; print('level', os.environ['TF_CPP_MIN_LOG_LEVEL'], flush=True)"
    tasks = [
        Task("server", _py(echo_level + "; print('Started server with target: grpc://localhost:1', flush=True)")),
        Task("plain", _py(echo_level), ready_pattern=None),
    ]
    outcome = launch(tasks, tmp_path, timeout_s=60)
    assert outcome.ok, outcome.report()
    assert "level 0" in outcome.task("server").log_text()
    assert "level 2" in outcome.task("plain").log_text()


def test_children_can_import_distsim_without_an_install(tmp_path, monkeypatch, no_stray_children):
    # As in Colab, where the clone is only on the notebook's sys.path: run the
    # child from elsewhere with no site-packages, and it must still find distsim.
    monkeypatch.delenv("PYTHONPATH", raising=False)
    # find_spec locates the package without importing it (numpy is in site-packages).
    probe = [PY, "-S", "-c", "import importlib.util as u; print('found', u.find_spec('distsim').name, flush=True)"]
    outcome = launch([Task("child", probe, ready_pattern=None)], tmp_path, timeout_s=60)
    assert outcome.ok, outcome.report()
    assert "found distsim" in outcome.task("child").log_text()


def test_a_failing_task_tears_down_the_others(tmp_path, no_stray_children):
    tasks = [
        Task("sleeper", SERVER_THEN_SLEEP),
        Task("crasher", _py("print('Started server with target: grpc://x', flush=True); raise SystemExit(7)")),
    ]
    outcome = launch(tasks, tmp_path, timeout_s=120)
    assert outcome.status == "failed"
    assert outcome.task("crasher").returncode == 7
    sleeper = outcome.task("sleeper")
    assert sleeper.torn_down and sleeper.returncode == -signal.SIGTERM
    assert not alive(sleeper.pid)


def test_timeout_kills_everything_including_grandchildren(tmp_path, no_stray_children):
    # The task starts a grandchild in its own process group: teardown kills the group.
    pid_file = tmp_path / "grandchild.pid"
    code = f"""
        import subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        open({str(pid_file)!r}, "w").write(str(child.pid))
        print("Started server with target: grpc://localhost:1", flush=True)
        time.sleep(600)
    """
    with Launch([Task("parent", _py(code))], tmp_path) as run:
        deadline = time.monotonic() + 60
        while not pid_file.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        # Time runs out half a second from now, with both processes running.
        outcome = run.wait(timeout_s=run.elapsed_s() + 0.5)
    assert outcome.status == "timeout"
    assert not alive(outcome.tasks[0].pid)
    # The grandchild got SIGKILL with its group; its death is asynchronous, so wait (bounded).
    assert _wait_gone({int(pid_file.read_text())}) == set()


def test_a_task_that_never_gets_ready_is_reported(tmp_path, no_stray_children):
    outcome = launch([Task("mute", _py("import time; time.sleep(600)"))], tmp_path, timeout_s=60, ready_timeout_s=2)
    assert outcome.status == "not_ready"
    assert "mute" in outcome.reason


def test_servers_that_never_exit_are_torn_down_after_the_chief(tmp_path, no_stray_children):
    tasks = [
        Task("chief", _py("print('done', flush=True)"), ready_pattern=None),
        Task("ps", SERVER_THEN_SLEEP, must_exit=False),
    ]
    outcome = launch(tasks, tmp_path, timeout_s=60)
    assert outcome.ok, outcome.report()
    assert outcome.task("ps").torn_down and not alive(outcome.task("ps").pid)


FREEZER = Path("/sys/fs/cgroup/freezer")


@pytest.mark.skipif(not (FREEZER / "tasks").exists() or os.geteuid() != 0,
                    reason="needs root and the cgroup v1 freezer")
def test_a_task_that_outlives_sigkill_is_named_not_waited_for(tmp_path, monkeypatch, no_stray_children):
    # A frozen cgroup holds its tasks in the kernel (state D): SIGKILL stays pending until it is thawed.
    # Teardown used to wait for such a task forever; now it gives up after KILL_REAP_S and names it.
    monkeypatch.setattr(launcher, "TERM_GRACE_S", 0.2)
    monkeypatch.setattr(launcher, "KILL_REAP_S", 0.5)
    group = FREEZER / f"distsim-test-{os.getpid()}"
    group.mkdir()
    pid = None
    try:
        with pytest.warns(SurvivedKill, match=r"^sleeper \(pid \d+, state D\) outlived SIGKILL by 0.5 s"):
            with Launch([Task("sleeper", _py("import time; time.sleep(600)"), ready_pattern=None)], tmp_path) as run:
                pid = run.pids["sleeper"]
                (group / "tasks").write_text(str(pid))
                (group / "freezer.state").write_text("FROZEN")
                while (group / "freezer.state").read_text().strip() != "FROZEN":
                    time.sleep(0.01)
        assert alive(pid)
        assert run.outcomes()[0].returncode is None
    finally:
        try:
            (group / "freezer.state").write_text("THAWED")
            if pid is not None:  # teardown's SIGTERM and SIGKILL are both pending; either ends it on thawing
                status = os.waitpid(pid, 0)[1]
                assert os.WIFSIGNALED(status) and os.WTERMSIG(status) in (signal.SIGTERM, signal.SIGKILL)
        finally:
            group.rmdir()  # empty once the task is reaped, whatever the assertion said


def _refused(message: str):
    """An InputError whose whole message is ``message`` (path, value and what is allowed)."""
    return pytest.raises(InputError, match="^" + re.escape(message) + "$")


def test_bad_task_lists_are_rejected(tmp_path):
    with _refused("tasks=[]; allowed: at least one Task"):
        Launch([], tmp_path)
    with _refused("tasks[1].name='a'; allowed: a name no other task has (it names the log file)"):
        Launch([Task("a", ["true"]), Task("a", ["true"])], tmp_path)
    with _refused("tasks=['a']; allowed: at least one task with must_exit=True (else the launch never finishes)"):
        Launch([Task("a", ["true"], must_exit=False)], tmp_path)
    with _refused("tasks[0]=['true']; allowed: a Task"):
        Launch([["true"]], tmp_path)


@pytest.mark.parametrize("kwargs, message", [
    (dict(name="w/0"), "Task.name='w/0'; allowed: a name without '/' (it is also its log file's name)"),
    (dict(argv="true"), "Task.argv='true'; allowed: a non-empty list of strings without NUL (the command line)"),
    (dict(argv=["sleep", 1]), "Task.argv=['sleep', 1]; allowed: a non-empty list of strings without NUL (the command line)"),
    (dict(env={"N": 2}), "Task.env.N=2; allowed: a string of at most 10,000 characters"),
    (dict(ready_count=0), "Task.ready_count=0; allowed: an integer >= 1"),
    (dict(must_exit="yes"), "Task.must_exit='yes'; allowed: true or false"),
    (dict(stop_signal=0), "Task.stop_signal=0; allowed: an integer >= 1 and <= "),
    (dict(ready_pattern="(unclosed"), "Task.ready_pattern='(unclosed'; allowed: a regular expression (missing ), "),
])
def test_bad_tasks_are_rejected(kwargs, message):
    with pytest.raises(InputError, match="^" + re.escape(message)):
        Task(**{"name": "w0", "argv": ["true"], **kwargs})


def test_bad_timeouts_are_rejected_before_anything_starts(tmp_path, no_stray_children):
    with _refused("timeout_s=0; allowed: a finite number >= 0.001 and <= 604,800 (seconds)"):
        launch([Task("a", ["true"], ready_pattern=None)], tmp_path, timeout_s=0)
    assert not list(tmp_path.iterdir())  # no log file: nothing was started
    with _refused("ready_timeout_s=nan; allowed: a finite number >= 0.001 and <= 604,800 (seconds)"):
        with Launch([Task("a", ["true"], ready_pattern=None)], tmp_path) as run:
            run.wait(timeout_s=10, ready_timeout_s=float("nan"))


# ---- a real MultiWorkerMirrored run whose launcher is interrupted or killed -------------------------
# A shell that starts a command in the background (`make test &`, some CI
# runners) makes it ignore SIGINT, and children inherit that; Python then never
# installs its KeyboardInterrupt handler. Restore it, as an interactive Python has.
LAUNCHER = """
import signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)
from distsim.real.experiment import run
from distsim.real.plan import RunPlan
plan = RunPlan("multi_worker_mirrored", num_workers=2, per_replica_batch=16, steps_per_epoch=100000)
run(plan, log_dir=sys.argv[1], progress=False, timeout_s=600)
"""


def _start_launcher(log_dir: Path) -> tuple[subprocess.Popen, set[int]]:
    """A launcher process running 2 workers; returns once both are training."""
    proc = subprocess.Popen([PY, "-c", LAUNCHER, str(log_dir)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        logs = [log_dir / f"worker{i}.log" for i in range(2)]
        if all(p.exists() and "distsim-progress" in p.read_text(errors="replace") for p in logs):
            workers = child_pids(proc.pid)
            assert len(workers) == 2, workers
            return proc, workers
        assert proc.poll() is None, proc.stdout.read().decode(errors="replace")
        time.sleep(0.2)
    proc.kill()
    raise AssertionError("the workers never started training")


def _wait_gone(pids: set[int], timeout_s: float = 30.0) -> set[int]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.1)
    return {p for p in pids if alive(p)}


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["SIGINT", "SIGKILL"])
def test_killing_the_launcher_mid_run_leaves_no_worker_alive(tmp_path, sig):
    proc, workers = _start_launcher(tmp_path)
    try:
        proc.send_signal(sig)
        proc.wait(timeout=60)
        # SIGINT/SIGTERM: the launcher tears down and re-raises; SIGKILL: the
        # kernel kills the workers (parent-death signal set by the worker entry).
        assert _wait_gone(workers) == set()
    finally:
        for pid in workers:
            if alive(pid):
                subprocess.run(["kill", "-9", str(pid)], check=False)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if sig == signal.SIGINT:
        out = proc.stdout.read().decode(errors="replace")
        assert proc.returncode == -signal.SIGINT and "KeyboardInterrupt" in out, out


SLEEPERS = """
import sys
from distsim.real.launcher import Launch, Task
tasks = [Task(f"s{i}", [sys.executable, "-c", "import time; time.sleep(600)"], ready_pattern=None) for i in range(2)]
with Launch(tasks, sys.argv[1]) as launch:
    print("pids", *launch.pids.values(), flush=True)
    launch.wait(timeout_s=600)
"""


def test_sigterm_to_the_launcher_tears_down_and_exits(tmp_path):
    proc = subprocess.Popen([PY, "-c", SLEEPERS, str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        pids = {int(p) for p in proc.stdout.readline().split()[1:]}
        assert len(pids) == 2 and all(alive(p) for p in pids)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        assert _wait_gone(pids) == set()
        assert "LaunchInterrupted" in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_worker_rejects_an_invalid_tf_config_before_starting_tensorflow(tmp_path):
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"schema_version": 1, "strategy": "multi_worker_mirrored", "num_workers": 2}))
    bad = json.dumps({"cluster": {"worker": ["localhost:1"]}, "task": {"type": "worker", "index": 3}})
    proc = subprocess.run(
        [PY, "-m", "distsim.real", "worker", "--plan", str(plan), "--tf-config", bad],
        capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stderr == "error: TF_CONFIG.task.index=3; allowed: 0..0 (job 'worker' has 1 tasks)\n"
    assert "tensorflow" not in proc.stderr.lower()


def test_run_python_returns_stdout_and_passes_arguments_and_env(no_stray_children):
    # 6 * 7 worked by hand; the argument and the extra variable must arrive unchanged.
    code = "import os, sys; print(6 * 7, sys.argv[1], os.environ['PROBE_VAR'], os.environ['TF_CPP_MIN_LOG_LEVEL'])"
    assert run_python(code, "arg one", env={"PROBE_VAR": "x"}) == "42 arg one x 3"


def test_run_python_puts_distsim_on_the_childs_pythonpath(monkeypatch, no_stray_children):
    # As in Colab, where the clone is only on the notebook's sys.path (an editable
    # install here would find distsim anyway, so look at PYTHONPATH itself).
    monkeypatch.delenv("PYTHONPATH", raising=False)
    code = "import os, pathlib; print(any((pathlib.Path(p) / 'distsim' / '__init__.py').is_file() " \
           "for p in os.environ.get('PYTHONPATH', '').split(os.pathsep) if p))"
    assert run_python(code) == "True"


def test_run_python_failure_names_the_status_and_stderr(no_stray_children):
    with pytest.raises(ProbeFailed, match=r"status 3(.|\n)*went wrong"):
        run_python("import sys; print('went wrong', file=sys.stderr); sys.exit(3)")


def test_run_python_kills_a_probe_that_overruns(no_stray_children):
    with pytest.raises(subprocess.TimeoutExpired):
        run_python("import time; time.sleep(60)", timeout_s=1)
    with pytest.raises(InputError, match="timeout_s=0"):
        run_python("pass", timeout_s=0)
