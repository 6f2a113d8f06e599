"""Emulated hosts around real processes: a NIC caps every byte, a CPU quota slows a process,
a shaped ring all-reduce is as slow as its bytes, and teardown leaves nothing behind
(after success, a failure, a timeout, SIGINT and a SIGKILLed launcher).

Namespaces, qdiscs and cgroups need root; these tests are skipped, with the
reason, where this process cannot build them. The TensorFlow runs are marked ``tf``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from distsim.real.launcher import Launch, Task
from distsim.real.network import CGROUP_PREFIX, CPU_CGROUP_ROOT, Hosts, unavailable
from processes import alive, processes_in_netns

REASON = unavailable(cpu_quota=True)
pytestmark = pytest.mark.skipif(REASON is not None, reason=f"needs root: {REASON}")

PY = sys.executable
REPO = Path(__file__).resolve().parents[2]


def _py(code: str) -> list[str]:
    return [PY, "-c", textwrap.dedent(code)]


def _machine_state() -> dict:
    """What the machine's own namespace shows: links, qdiscs, and this module's cgroups."""
    show = lambda *argv: subprocess.run(argv, capture_output=True, text=True, check=True).stdout  # noqa: E731
    return {"links": show("ip", "-br", "link"), "qdiscs": show("tc", "qdisc", "show"),
            "cgroups": sorted(p.name for p in CPU_CGROUP_ROOT.glob(f"{CGROUP_PREFIX}*"))}


@pytest.fixture
def clean_machine(no_stray_children):
    before = _machine_state()
    yield
    assert _machine_state() == before


def _assert_gone(namespaces: list[str], cgroups: list[Path], pids=()) -> None:
    # Processes die asynchronously after SIGKILL; wait a bounded time.
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        left = {ns: processes_in_netns(ns) for ns in namespaces}
        if not any(left.values()) and not any(alive(p) for p in pids):
            break
        time.sleep(0.05)
    # A namespace with no process (and no mount or open file) is deleted with its interfaces and qdiscs.
    assert {ns: processes_in_netns(ns) for ns in namespaces} == {ns: set() for ns in namespaces}
    assert [p for p in pids if alive(p)] == []
    assert [p for p in cgroups if p.exists()] == []


# ---- the NIC and the quota do what they say ---------------------------------------------------------
RECEIVER = """
import socket, sys, time
s = socket.socket(); s.bind(("10.10.0.2", 5000)); s.listen()
print("Started server with target: grpc://10.10.0.2:5000", flush=True)
c, _ = s.accept(); got, t0 = 0, time.monotonic()
c.sendall(b"g")  # the sender sends nothing before this byte, so every payload byte crosses after t0
while True:
    d = c.recv(1 << 20)
    if not d: break
    got += len(d)
print("received", got, time.monotonic() - t0, flush=True)
"""
SENDER = """
import socket, time
for _ in range(100):
    try:
        s = socket.create_connection(("10.10.0.2", 5000)); break
    except OSError:
        time.sleep(0.05)
assert s.recv(1) == b"g"
s.sendall(b"x" * 1_500_000); s.close()
"""


def test_a_nic_carries_at_most_its_rate_and_every_packet_passes_its_cap(tmp_path, clean_machine):
    rate_Bps = 20e6 / 8
    with Hosts(2, rate_Bps=rate_Bps) as hosts:
        tasks = [Task("receiver", hosts.wrap(1, _py(RECEIVER))), Task("sender", hosts.wrap(0, _py(SENDER)),
                                                                         ready_pattern=None)]
        with Launch(tasks, tmp_path) as launch:
            outcome = launch.wait(timeout_s=60)
        counters = hosts.counters()
        # A host's namespace runs the machine's TCP congestion control, as results say (Hosts.describe).
        inside = subprocess.run(hosts.wrap(0, ["cat", "/proc/sys/net/ipv4/tcp_congestion_control"]),
                                capture_output=True, text=True, timeout=30, check=True).stdout.strip()
    assert inside == Path("/proc/sys/net/ipv4/tcp_congestion_control").read_text().strip()
    assert outcome.ok, outcome.report()
    got, seconds = outcome.task("receiver").log_text().split("received ")[1].split()
    assert int(got) == 1_500_000
    # Payload can arrive at most at the frame rate x 1448/1514 (TCP/IPv4/Ethernet headers), plus what htb
    # lets out ahead of its rate: the classes' bursts (1600 bytes each, parent and child) and one whole
    # segmentation-offload packet, up to the veth's gso_max_size (65536 bytes, `ip -d link`), which htb
    # releases at once and pays for afterwards (measured: 35 kB ahead on 0.3 and 1.5 MB, 1 kB on 6 MB).
    # The sender waits for a byte the receiver sends after starting its clock, so no payload leaves before
    # the clock starts, however late the scheduler runs either process.
    assert int(got) <= rate_Bps * 1448 / 1514 * float(seconds) + 65536 + 2 * 1600
    # Every packet passed a shaped class, and the sender's class carried the payload plus headers.
    assert [c.unshaped_packets for c in counters] == [0, 0]
    assert counters[0].sent_bytes >= 1_500_000 / (1448 / 1514)
    assert counters[1].received_bytes == pytest.approx(counters[0].sent_bytes, rel=1e-3)


def test_a_chosen_congestion_control_holds_in_every_host_and_leaves_the_machine_alone(clean_machine):
    machine_file = Path("/proc/sys/net/ipv4/tcp_congestion_control")
    before = machine_file.read_text().strip()
    # One a namespace may set: only the first namespace may pick one outside this list (here cubic was loaded but
    # not listed, and writing it in a namespace failed).
    other = next(cc for cc in Path("/proc/sys/net/ipv4/tcp_allowed_congestion_control").read_text().split()
                 if cc != before)
    with Hosts(2, rate_Bps=20e6 / 8, congestion_control=other) as hosts:
        inside = [subprocess.run(hosts.wrap(h, ["cat", str(machine_file)]), capture_output=True, text=True,
                                 timeout=30, check=True).stdout.strip() for h in range(2)]
        described = hosts.describe()
    assert inside == [other, other]
    assert f"TCP congestion control {other} (set per namespace)" in described
    assert machine_file.read_text().strip() == before


BUSY = """
import os, time
t0, c0 = time.monotonic(), time.process_time()
while time.monotonic() - t0 < 2.0:
    pass
print("cpu share", (time.process_time() - c0) / (time.monotonic() - t0), flush=True)
"""


def test_a_cpu_quota_caps_a_busy_process_at_its_share_of_a_core(tmp_path, clean_machine):
    with Hosts(1, cpu_quota_cores={0: 0.25}, namespaces=False) as hosts:
        with Launch([Task("busy", hosts.wrap(0, _py(BUSY)), ready_pattern=None)], tmp_path) as launch:
            outcome = launch.wait(timeout_s=60)
    assert outcome.ok, outcome.report()
    share = float(outcome.task("busy").log_text().split("cpu share ")[1])
    # CFS grants 2.5 ms per 10 ms period; over 2 s (200 periods) the share is 0.25. On the
    # shared machine it can only come out lower, never higher (one period of slack: +0.005).
    assert 0.10 < share <= 0.255


# ---- teardown on every exit path -----------------------------------------------------------------------
SLEEPER = _py("""
import time
print("Started server with target: grpc://10.10.0.1:5000", flush=True)
time.sleep(600)
""")


@pytest.mark.parametrize("ending", ["success", "failure", "timeout"])
def test_teardown_leaves_no_namespace_process_qdisc_or_cgroup(tmp_path, clean_machine, ending):
    with Hosts(3, rate_Bps=1e6, cpu_quota_cores={2: 0.5}) as hosts:
        namespaces, cgroups = hosts.namespace_ids(), hosts.cgroup_paths()
        last = {"success": _py("print('done')"), "failure": _py("raise SystemExit(3)"),
                "timeout": _py("import time; time.sleep(600)")}[ending]
        tasks = [Task("a", hosts.wrap(0, SLEEPER), must_exit=False), Task("b", hosts.wrap(1, SLEEPER), must_exit=False),
                 Task("c", hosts.wrap(2, last), ready_pattern=None)]
        with Launch(tasks, tmp_path) as launch:
            outcome = launch.wait(timeout_s=5 if ending == "timeout" else 60)
        assert len(set(namespaces)) == 4 and all(cg.exists() for cg in cgroups)
    assert outcome.status == {"success": "ok", "failure": "failed", "timeout": "timeout"}[ending]
    _assert_gone(namespaces, cgroups, [t.pid for t in outcome.tasks])


# A shell that starts a command in the background makes it ignore SIGINT; restore Python's handler.
LAUNCHER = """
import json, signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)
from distsim.real.launcher import Launch, Task
from distsim.real.network import Hosts
sleeper = [sys.executable, "-c", "import time; print('Started server with target: grpc://x', flush=True); time.sleep(600)"]
with Hosts(2, rate_Bps=1e6, cpu_quota_cores={1: 0.5}) as hosts:
    made = {"namespaces": hosts.namespace_ids(), "cgroups": [str(p) for p in hosts.cgroup_paths()], "pids": []}
    if sys.argv[2] == "hosts":
        print(json.dumps(made), flush=True)
        time.sleep(600)
    tasks = [Task(f"t{i}", hosts.wrap(i, sleeper), must_exit=i == 1) for i in range(2)]
    with Launch(tasks, sys.argv[1]) as launch:
        print(json.dumps(made | {"pids": list(launch.pids.values())}), flush=True)
        launch.wait(timeout_s=600)
"""


def _start(tmp_path, mode: str) -> tuple[subprocess.Popen, dict]:
    proc = subprocess.Popen([PY, "-c", LAUNCHER, str(tmp_path), mode], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    assert line, proc.stderr.read()
    made = json.loads(line)
    # Wait (bounded) until every task has entered its namespace.
    deadline = time.monotonic() + 30
    while not all(processes_in_netns(ns) & set(made["pids"]) for ns in made["namespaces"][1:len(made["pids"]) + 1]):
        assert time.monotonic() < deadline, "the tasks never entered their namespaces"
        time.sleep(0.05)
    return proc, made


def test_sigint_to_the_launcher_tears_everything_down(tmp_path, clean_machine):
    proc, made = _start(tmp_path, "tasks")
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=30) != 0  # KeyboardInterrupt ends it, after the teardown
    _assert_gone(made["namespaces"], [Path(p) for p in made["cgroups"]], made["pids"])


def test_a_sigkilled_launcher_leaves_no_namespace_and_its_cgroup_is_swept(tmp_path, no_stray_children):
    before = _machine_state()
    proc, made = _start(tmp_path, "hosts")
    proc.kill()
    proc.wait()
    # The holders saw their pipe close and exited: the namespaces went with them.
    _assert_gone(made["namespaces"], [])
    # A cgroup cannot remove itself; the next Hosts with a quota removes the dead launcher's.
    assert all(Path(p).exists() for p in made["cgroups"])
    with Hosts(1, cpu_quota_cores={0: 1.0}, namespaces=False):
        pass
    assert [p for p in made["cgroups"] if Path(p).exists()] == []
    assert _machine_state() == before


# ---- real TensorFlow over shaped NICs ------------------------------------------------------------------
@pytest.mark.tf
def test_a_shaped_two_worker_ring_is_slower_than_its_bytes_and_near_its_prediction(no_stray_children):
    from distsim.engines.prediction import predict
    from distsim.real.experiment import run
    from distsim.real.netlab import lab_scenario, wire_bound_s

    shaped = lab_scenario("multi_worker_mirrored", 2, 20, steps=10)
    unshaped = lab_scenario("multi_worker_mirrored", 2, None, steps=10)
    measured = run(shaped, network="shaped", progress=False, timeout_s=300)
    beside = run(unshaped, network="namespaces", progress=False, timeout_s=300)
    assert "htb 20 Mbit/s per NIC" in measured.meta["network"]
    machine = Path("/proc/sys/net/ipv4/tcp_congestion_control").read_text().strip()
    assert f"TCP congestion control {machine} (the machine's, inherited)" in measured.meta["network"]
    step = measured.summary.step_time_s
    # Physics: every worker sends its whole 407 KB gradient (1448 of each 1514 bytes on the
    # wire are payload) through a 20 Mbit/s NIC each step: 170 ms. Nothing can be faster.
    assert step > wire_bound_s(shaped) > 0.15
    # The model: the time the network adds, on top of the run beside it without a rate limit,
    # within the benchmark's largest allowed error (20 %). At 20 Mbit/s the bytes (170 ms)
    # dwarf every calibrated quantity (~10 ms), so this holds with the built-in presets too.
    added = predict(shaped).summary.step_time_s - predict(unshaped).summary.step_time_s
    assert (beside.summary.step_time_s + added) / step - 1 == pytest.approx(0, abs=0.20)


@pytest.mark.tf
def test_a_network_benchmark_run_record_carries_every_apply_time_and_worker(clean_machine):
    sys.path.insert(0, str(REPO / "tests"))
    from benchmark_scripts import load

    from distsim.real.netlab import lab_hardware, lab_scenario, wire_bound_s

    bench = load("bench_network")
    cell, steps = bench.Cell("parameter_server", 2, "mnist_mlp", 20), 6
    record = bench.measure(cell, steps, shaped=True, hw=lab_hardware(), congestion_control=None)
    times, workers = record["apply_time_s"], record["apply_worker"]
    # Every update the two workers applied (6 each), in apply order, by both workers, within the run's wall time.
    assert len(times) == len(workers) == 2 * steps and sorted(set(workers)) == [0, 1]
    assert times == sorted(times) and 0 < times[0] and times[-1] < record["wall_s"]
    # Physics: every update's gradient crosses the server's 20 Mbit/s NIC (407 KB, 1448 of each 1514 bytes are
    # payload: 170 ms), so updates cannot land faster than one per wire_bound_s / workers on average.
    shaped = lab_scenario("parameter_server", 2, 20, steps=steps, hardware=lab_hardware())
    assert (times[-1] - times[0]) / (len(times) - 1) > wire_bound_s(shaped) / 2 > 0.16
    assert bench.run_phases(record)[1].size > 0


@pytest.mark.tf
def test_without_the_capability_a_run_says_so_in_one_line_and_runs_unshaped(tmp_path, no_stray_children):
    argv = ["setpriv", "--inh-caps=-net_admin,-sys_admin", "--bounding-set=-net_admin,-sys_admin", "--",
            PY, "-m", "distsim.real", "netlab", "--strategy", "multi_worker_mirrored", "--workers", "2",
            "--rate-mbit", "50", "--steps", "5", "--json"]
    env = {**os.environ, "DISTSIM_PRESET_DIR": str(tmp_path)}
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env, cwd=REPO)
    assert done.returncode == 0, done.stderr
    warnings_ = [line for line in done.stderr.splitlines() if line.startswith("warning:")]
    assert warnings_ == ["warning: emulated networks need CAP_NET_ADMIN and CAP_SYS_ADMIN (run as root); "
                         "this process lacks them; running on plain localhost instead"]
    out = json.loads(done.stdout)
    assert out["network"] == "localhost (loopback)" and out["measured_step_s"] > 0
