"""Emulated hosts for real runs: a network namespace, a NIC rate and a CPU quota per task.

On localhost, worker processes talk through loopback, where a gradient costs
next to nothing to move. :class:`Hosts` rebuilds a cluster's network on one
machine, around the task processes (it only prefixes their command lines, so
it works for any program the launcher starts):

* **namespaces**: every task gets its own network namespace with one
  interface, ``eth0``, at ``10.10.0.<task + 1>``; one more namespace holds a
  bridge, the switch, and a veth pair joins each ``eth0`` to a switch port.
  Nothing is added to the machine's own network namespace.
* **rate**: with ``rate_Bps``, each NIC is limited in both directions by an
  ``htb`` qdisc with one class at that rate, which catches every packet: on
  the task's ``eth0`` for what it sends, and on its switch port for what it
  receives. Full duplex, one rate per NIC, as the simulator's
  :class:`~distsim.scenario.Link` means. The rate counts frames on the wire
  (Ethernet, IP and TCP headers included), as a NIC's line rate does. The
  veths keep segmentation offload, so htb releases a send of up to 64 KiB
  whole and then waits out its cost: the rate holds on average, and a
  transfer can finish up to one such send early.
* **TCP**: the hosts run the machine's congestion control, which new
  namespaces inherit, or the one ``congestion_control`` names, set in each
  host's namespace only. It can shift how transfers that meet share a NIC
  (on one day two PS workers shared under CUBIC and took turns under BBR; on
  another they took turns under both), so :meth:`Hosts.describe` names it.
* **CPU quota**: with ``cpu_quota_cores``, the listed tasks run in a cgroup
  v1 ``cpu`` group whose ``cfs_quota_us / cfs_period_us`` is that many cores:
  a real straggler.

Every namespace lives exactly as long as a "holder" process
(``unshare --net``) that waits for end-of-file on a pipe this process holds
open. However this process ends (even by ``SIGKILL``), the pipe closes, the
holders exit, the task processes die with their launcher (see
:func:`distsim.real.__main__.die_with_parent`), and the kernel deletes each
namespace with its interfaces and qdiscs once its last process is gone. A
cgroup directory is removed on :meth:`Hosts.close`; one left behind by a
process that was killed (its name holds that process's PID) is removed by
the next :class:`Hosts`. Needs root (``CAP_SYS_ADMIN`` for namespaces,
``CAP_NET_ADMIN`` for interfaces and qdiscs); :func:`unavailable` says in
one line why it cannot run here.
"""

from __future__ import annotations

import os
import re
import select
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from distsim.real.launcher import TornDown
from distsim.validation import InputError, Integer, Number, OneOf, Optional, check_fields, checked

#: The private subnet of the emulated hosts (the namespaces reach nothing else).
SUBNET = "10.10.0"

#: The port every task's server listens on (each task has its own address).
PORT = 5000

#: Where cgroup v1's ``cpu`` controller is mounted.
CPU_CGROUP_ROOT = Path("/sys/fs/cgroup/cpu")

#: CFS period of a CPU quota, microseconds. Short, so that a throttled step is
#: slowed evenly rather than run at full speed and then frozen for most of a
#: long period (with 100 ms, a 10 ms step could finish unthrottled and the
#: next one wait 75 ms).
CPU_PERIOD_US = 10_000

#: Prefix of the cgroups this module creates: ``distsim-<pid>-<n>``.
CGROUP_PREFIX = "distsim-"

#: Seconds a holder gets to report that its namespace exists.
HOLDER_READY_S = 10.0

#: TCP's congestion control of the reading process's network namespace, and the ones a network namespace
#: other than the machine's may make its own (the kernel lets only the first namespace pick a restricted one).
CONGESTION_CONTROL = "/proc/sys/net/ipv4/tcp_congestion_control"
ALLOWED_CONGESTION_CONTROLS = "/proc/sys/net/ipv4/tcp_allowed_congestion_control"

#: Tools the namespaces need (util-linux and iproute2).
TOOLS: tuple[str, ...] = ("unshare", "nsenter", "ip", "tc")

#: Packets shorter than this (IPv4 total length, bytes) leave a NIC first (see :func:`_add_htb`).
SMALL_PACKET_BYTES = 256

#: The share of the rate reserved for them (they may use the whole rate when it is free).
SMALL_SHARE = 0.05

#: Most hosts one subnet holds (.1 .. .250).
MAX_HOSTS = 250

_CAP_NET_ADMIN, _CAP_SYS_ADMIN = 12, 21


class HostsUnavailable(RuntimeError):
    """Emulated hosts cannot be built here; the message is one line saying why."""


def _effective_capabilities() -> int:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("CapEff:"):
                return int(line.split()[1], 16)
    except OSError:
        pass
    return 0


def unavailable(*, namespaces: bool = True, cpu_quota: bool = False) -> str | None:
    """``None`` when :class:`Hosts` can run here, else one line saying why not.

    Args:
        namespaces: network namespaces and qdiscs are needed.
        cpu_quota: a cgroup v1 CPU quota is needed.
    """
    if not sys.platform.startswith("linux"):
        return f"emulated hosts need Linux (namespaces, qdiscs, cgroups); this is {sys.platform}"
    caps = _effective_capabilities()
    if namespaces:
        missing = [tool for tool in TOOLS if shutil.which(tool) is None]
        if missing:
            return f"emulated networks need {', '.join(missing)} (util-linux, iproute2), not found on PATH"
        lacking = [name for bit, name in ((_CAP_NET_ADMIN, "CAP_NET_ADMIN"), (_CAP_SYS_ADMIN, "CAP_SYS_ADMIN"))
                   if not caps >> bit & 1]
        if lacking:
            return f"emulated networks need {' and '.join(lacking)} (run as root); this process lacks them"
    if cpu_quota:
        quota = CPU_CGROUP_ROOT / "cpu.cfs_quota_us"
        if not quota.exists():
            return f"a CPU quota needs cgroup v1's cpu controller at {CPU_CGROUP_ROOT}; it is not mounted here"
        if not os.access(CPU_CGROUP_ROOT, os.W_OK) or not caps >> _CAP_SYS_ADMIN & 1:
            return f"a CPU quota needs write access to {CPU_CGROUP_ROOT} (run as root)"
    return None


def allowed_congestion_controls() -> tuple[str, ...]:
    """The TCP congestion controls a lab namespace may set, e.g. ``("reno", "bbr")``: the kernel's
    unrestricted ones (``net.ipv4.tcp_allowed_congestion_control``), not every one it has loaded."""
    try:
        return tuple(Path(ALLOWED_CONGESTION_CONTROLS).read_text().split())
    except OSError:
        return ()


def congestion_control_rule() -> Optional:
    """The check for a congestion control to set: one a namespace may set, or ``None`` (the machine's own)."""
    return Optional(OneOf(allowed_congestion_controls(), note="net.ipv4.tcp_allowed_congestion_control: the only "
                          "ones a namespace may set; root may add one the kernel has loaded"),
                    "the machine's own, which new namespaces inherit")


#: How :meth:`Hosts.describe` introduces the congestion control it ran with.
_TCP_PHRASE = "TCP congestion control"


def described_congestion_control(description: str) -> str | None:
    """The congestion control a :meth:`Hosts.describe` line names (``None``: it names none)."""
    named = re.search(_TCP_PHRASE + r" (\S+)", description)
    return named.group(1) if named else None


def machine_congestion_control() -> str:
    """TCP's congestion control here, which new network namespaces inherit (``"unknown"`` if unreadable).
    It can shift how transfers that meet share a NIC (what the lab saw: ``data/measurements/README.md``), so a
    result names it."""
    try:
        return Path(CONGESTION_CONTROL).read_text().strip()
    except OSError:
        return "unknown"


#: htb's slowest rate, bytes/s. ``tc`` hands the kernel a class rate in whole
#: bytes per second (``struct tc_ratespec.rate``, include/uapi/linux/pkt_sched.h),
#: and ``htb_change_class`` (net/sched/sch_htb.c) refuses a rate of 0
#: (``if (!hopt->rate.rate || !hopt->ceil.rate) goto failure``). Tried here:
#: ``tc class add ... htb rate 7bit`` fails ("rate" is required), ``8bit`` is set.
HTB_MIN_RATE_BPS = 1.0


def wire_rate_arg(rate_Bps: float) -> str:
    """``tc``'s rate argument for ``rate_Bps`` bytes/s: whole bits per second."""
    return f"{int(round(rate_Bps * 8))}bit"


@dataclass(frozen=True)
class HostCounters:
    """What one task's NIC carried, from its htb classes (bytes and packets on the wire).

    Attributes:
        sent_bytes, sent_packets: through the task's ``eth0`` class (what it sent).
        received_bytes, received_packets: through its switch port's class.
        unshaped_packets: packets that bypassed the classes (htb's
            ``direct_packets_stat``, on both sides); 0 when the cap held for
            every packet.
        dropped_packets: packets the qdiscs dropped (queue full), both sides.
    """

    sent_bytes: int
    sent_packets: int
    received_bytes: int
    received_packets: int
    unshaped_packets: int
    dropped_packets: int


class Hosts(TornDown):
    """``num_hosts`` emulated hosts on this machine. Use as a context manager.

    Example::

        with Hosts(3, rate_Bps=50e6 / 8) as hosts:
            argv = hosts.wrap(0, ["python", "-m", "distsim.real", "worker", ...])
            address = hosts.address(0)    # "10.10.0.1:5000"
        # namespaces, interfaces, qdiscs and cgroups are gone here

    Args:
        num_hosts: tasks, one host each (1..:data:`MAX_HOSTS`).
        rate_Bps: each NIC's rate in each direction, bytes/s on the wire;
            ``None``: namespaces without a rate limit.
        cpu_quota_cores: ``{host: cores}``; those hosts' processes may use that
            much CPU time (a straggler).
        namespaces: build the network namespaces; ``False`` keeps the tasks on
            localhost (only a CPU quota is applied).
        congestion_control: TCP's congestion control in every host's
            namespace (one of :func:`allowed_congestion_controls`);
            ``None``: the machine's own, which new namespaces inherit. The
            machine's own setting is never changed.
    """

    def __init__(self, num_hosts: int, *, rate_Bps: float | None = None,
                 cpu_quota_cores: dict[int, float] | None = None, namespaces: bool = True,
                 congestion_control: str | None = None) -> None:
        num_hosts = Integer(1, MAX_HOSTS)("num_hosts", num_hosts)
        rate_Bps = Optional(Number(HTB_MIN_RATE_BPS, unit="bytes/s, the least htb shapes"),
                            "no rate limit")("rate_Bps", rate_Bps)
        if rate_Bps is not None and not namespaces:
            raise InputError("rate_Bps", rate_Bps, "None without namespaces (a rate is set on each host's own interface)")
        congestion_control = congestion_control_rule()("congestion_control", congestion_control)
        if congestion_control is not None and not namespaces:
            raise InputError("congestion_control", congestion_control,
                             "None without namespaces (it is set in each host's own namespace)")
        quotas = {}
        for host, cores in dict(cpu_quota_cores or {}).items():
            host = Integer(0, num_hosts - 1)("cpu_quota_cores key", host)
            quotas[host] = Number(0, low_open=True, unit="cores")(f"cpu_quota_cores[{host}]", cores)
        self.num_hosts = num_hosts
        self.rate_Bps = rate_Bps
        self.cpu_quota_cores = quotas
        self.namespaces = namespaces
        self.congestion_control = congestion_control
        self._holders: list[subprocess.Popen] = []  # [switch, host 0, host 1, ...]
        self._cgroups: dict[int, Path] = {}

    # ---- life cycle -----------------------------------------------------------------
    what = "the emulated hosts"

    def start(self) -> None:
        """Build everything; raise :class:`HostsUnavailable` (after undoing it all) if a step fails."""
        reason = unavailable(namespaces=self.namespaces, cpu_quota=bool(self.cpu_quota_cores))
        if reason:
            raise HostsUnavailable(reason)
        if self.cpu_quota_cores:
            remove_stale_cgroups()
            for host, cores in self.cpu_quota_cores.items():
                self._cgroups[host] = _make_cpu_cgroup(cores)
        if self.namespaces:
            self._holders = [_start_holder() for _ in range(self.num_hosts + 1)]
            self._configure()

    def _teardown(self) -> None:
        for holder in self._holders:
            _stop_holder(holder)
        self._holders = []
        for path in self._cgroups.values():
            _remove_cgroup(path)
        self._cgroups = {}

    # ---- what the launcher uses ----------------------------------------------------------
    def address(self, host: int, port: int = PORT) -> str:
        """``"ip:port"`` of ``host`` in its namespace (without namespaces the
        tasks stay on localhost, on ports the launcher picks)."""
        self._check_host(host)
        if not self.namespaces:
            raise RuntimeError("Hosts.address() needs namespaces; without them tasks use free localhost ports")
        return f"{self.ip(host)}:{port}"

    @staticmethod
    def ip(host: int) -> str:
        return f"{SUBNET}.{host + 1}"

    def wrap(self, host: int, argv: Sequence[str]) -> list[str]:
        """``argv`` run inside ``host``: its network namespace, then its CPU quota.

        The prefixes ``exec`` the command, so it keeps the launcher's process
        id, session and parent (its parent-death signal still works).
        """
        self._check_host(host)
        argv = list(argv)
        if self.namespaces:
            if not self._holders:
                raise RuntimeError("Hosts.wrap() before start(); use Hosts as a context manager")
            argv = ["nsenter", f"--net=/proc/{self._holders[host + 1].pid}/ns/net", "--", *argv]
        if host in self._cgroups:
            # Join the cgroup first, then exec: every thread the task starts is throttled.
            argv = ["sh", "-c", 'echo $$ > "$1" && shift && exec "$@"', "sh",
                    str(self._cgroups[host] / "cgroup.procs"), *argv]
        return argv

    def counters(self) -> list[HostCounters]:
        """Per host, what its NIC carried so far (needs a rate)."""
        if not (self.namespaces and self.rate_Bps and self._holders):
            raise RuntimeError("Hosts.counters() needs a running shaped network (rate_Bps set)")
        switch = self._holders[0].pid
        out = []
        for host in range(self.num_hosts):
            pid = self._holders[host + 1].pid
            sent, sent_other = _htb_counters(pid, "eth0")
            received, received_other = _htb_counters(switch, f"s{host}")
            out.append(HostCounters(sent[0], sent[1], received[0], received[1],
                                    sent_other[0] + received_other[0], sent_other[1] + received_other[1]))
        return out

    def namespace_ids(self) -> list[str]:
        """The network namespaces (``net:[inode]``), switch first, while running."""
        return [os.readlink(f"/proc/{holder.pid}/ns/net") for holder in self._holders]

    def cgroup_paths(self) -> list[Path]:
        """The CPU-quota cgroups, while running."""
        return list(self._cgroups.values())

    def describe(self) -> str:
        """One line for a result's metadata."""
        parts = []
        if self.namespaces:
            rate = "no rate limit" if self.rate_Bps is None else f"htb {self.rate_Bps * 8 / 1e6:g} Mbit/s per NIC per direction"
            tcp = (f"{self.congestion_control} (set per namespace)" if self.congestion_control
                   else f"{machine_congestion_control()} (the machine's, inherited)")
            parts.append(f"{self.num_hosts} network namespaces ({SUBNET}.0/24) through one bridge, {rate}, "
                         f"{_TCP_PHRASE} {tcp}")
        else:
            parts.append(f"{self.num_hosts} tasks on localhost")
        for host, cores in sorted(self.cpu_quota_cores.items()):
            parts.append(f"task {host} under a CPU quota of {cores:g} cores")
        return "; ".join(parts)

    # ---- building -------------------------------------------------------------------
    def _check_host(self, host: int) -> None:
        Integer(0, self.num_hosts - 1)("host", host)

    def _configure(self) -> None:
        switch = self._holders[0].pid
        batch = ["link set lo up", "link add br0 type bridge", "link set br0 up"]
        for host in range(self.num_hosts):
            batch += [f"link add s{host} type veth peer name eth0 netns {self._holders[host + 1].pid}",
                      f"link set s{host} master br0"]
        _nsrun(switch, ["ip", "-batch", "-"], "\n".join(batch) + "\n")
        for host in range(self.num_hosts):
            pid = self._holders[host + 1].pid
            # The qdisc goes on before the link comes up, so not one packet passes unshaped.
            if self.rate_Bps is not None:
                _add_htb(pid, "eth0", self.rate_Bps)
                _add_htb(switch, f"s{host}", self.rate_Bps)
            if self.congestion_control:
                # /proc/sys/net is the namespace's own: this leaves the machine's setting alone.
                _nsrun(pid, ["sh", "-c", f'echo "$1" > {CONGESTION_CONTROL}', "sh", self.congestion_control])
            _nsrun(pid, ["ip", "-batch", "-"],
                   f"link set lo up\naddr add {self.ip(host)}/24 dev eth0\nlink set eth0 up\n")
            _nsrun(switch, ["ip", "link", "set", f"s{host}", "up"])


# ---- namespaces ------------------------------------------------------------------------
def _start_holder() -> subprocess.Popen:
    """A process alone in a new network namespace, living until its stdin closes."""
    holder = subprocess.Popen(
        ["unshare", "--net", "--", "sh", "-c", "echo ready; read _"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
    )
    ready, _, _ = select.select([holder.stdout], [], [], HOLDER_READY_S)
    line = holder.stdout.readline().decode(errors="replace").strip() if ready else ""
    if line != "ready":
        _stop_holder(holder)
        error = holder.stderr.read().decode(errors="replace").strip().splitlines()
        raise HostsUnavailable(f"could not create a network namespace: {error[-1] if error else 'no answer'}")
    # Never configure the machine's own namespace by mistake.
    if os.readlink(f"/proc/{holder.pid}/ns/net") == os.readlink("/proc/self/ns/net"):
        _stop_holder(holder)
        raise HostsUnavailable("unshare --net left the holder in this process's network namespace")
    return holder


def _stop_holder(holder: subprocess.Popen) -> None:
    for stream in (holder.stdin, holder.stdout, holder.stderr):
        if stream is not None:
            stream.close()
    try:
        holder.wait(timeout=2.0)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(holder.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        holder.wait()


def _nsrun(pid: int, argv: list[str], stdin: str | None = None) -> str:
    """Run ``argv`` in the network namespace of ``pid``; raise with its error on failure."""
    done = subprocess.run(["nsenter", f"--net=/proc/{pid}/ns/net", "--", *argv], input=stdin,
                          capture_output=True, text=True, timeout=30)
    if done.returncode:
        error = (done.stderr or done.stdout).strip().splitlines()
        raise HostsUnavailable(f"'{' '.join(argv)}' failed: {error[-1] if error else done.returncode}")
    return done.stdout


def _add_htb(pid: int, dev: str, rate_Bps: float) -> None:
    """Limit everything leaving ``dev`` to ``rate_Bps``, small packets first.

    One htb class at the rate holds two: packets under
    :data:`SMALL_PACKET_BYTES` (TCP acknowledgements, HTTP/2 window updates,
    gRPC requests) at priority 0, everything else at priority 1; both may use
    the whole rate. Without the priority those packets wait in one FIFO behind
    up to 4 MiB of bulk data per TCP socket and stall a ring all-reduce by up
    to a chunk's transfer per step. Linux's usual ``fq_codel`` qdisc serves
    such sparse flows first; this kernel has neither ``fq_codel`` nor ``sfq``.
    """
    rate = wire_rate_arg(rate_Bps)
    tc = ["tc", "class", "add", "dev", dev]
    _nsrun(pid, ["tc", "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "20"])
    _nsrun(pid, [*tc, "parent", "1:", "classid", "1:1", "htb", "rate", rate, "ceil", rate])
    _nsrun(pid, [*tc, "parent", "1:1", "classid", "1:10", "htb", "rate", wire_rate_arg(rate_Bps * SMALL_SHARE),
                 "ceil", rate, "prio", "0"])
    _nsrun(pid, [*tc, "parent", "1:1", "classid", "1:20", "htb", "rate", wire_rate_arg(rate_Bps * (1 - SMALL_SHARE)),
                 "ceil", rate, "prio", "1"])
    # IPv4 total length (bytes 2-3 of the header) below SMALL_PACKET_BYTES, a power of two: its high bits are 0.
    mask = f"0x{0xFFFF & ~(SMALL_PACKET_BYTES - 1):04x}"
    _nsrun(pid, ["tc", "filter", "add", "dev", dev, "parent", "1:", "protocol", "ip", "prio", "1", "u32",
                 "match", "u16", "0x0000", mask, "at", "2", "flowid", "1:10"])


_SENT = re.compile(r"Sent (\d+) bytes (\d+) pkt")


def _htb_counters(pid: int, dev: str) -> tuple[tuple[int, int], tuple[int, int]]:
    """``((bytes, packets) through class 1:1, (packets that bypassed it, packets dropped))`` on ``dev``."""
    classes = _nsrun(pid, ["tc", "-s", "class", "show", "dev", dev])
    qdisc = _nsrun(pid, ["tc", "-s", "qdisc", "show", "dev", dev])
    sent = _SENT.search(classes[classes.index("class htb 1:1 "):])
    direct = re.search(r"direct_packets_stat (\d+)", qdisc)
    dropped = re.search(r"\(dropped (\d+)", qdisc)
    if not sent or not direct or not dropped:
        raise RuntimeError(f"no htb counters on {dev}: {classes!r} {qdisc!r}")
    return (int(sent.group(1)), int(sent.group(2))), (int(direct.group(1)), int(dropped.group(1)))


# ---- CPU quotas -------------------------------------------------------------------------
_counter = iter(range(1 << 62))


def _make_cpu_cgroup(cores: float) -> Path:
    path = CPU_CGROUP_ROOT / f"{CGROUP_PREFIX}{os.getpid()}-{next(_counter)}"
    try:
        path.mkdir()
        (path / "cpu.cfs_period_us").write_text(str(CPU_PERIOD_US))
        # The kernel's least quota is 1 ms.
        (path / "cpu.cfs_quota_us").write_text(str(max(1000, int(round(cores * CPU_PERIOD_US)))))
    except OSError as exc:
        _remove_cgroup(path)
        raise HostsUnavailable(f"could not set a CPU quota in {path}: {exc.strerror or exc}") from None
    return path


def _remove_cgroup(path: Path) -> None:
    """Move any process still inside to the root group, then remove the group."""
    if not path.exists():
        return
    for _ in range(50):
        try:
            for pid in (path / "cgroup.procs").read_text().split():
                try:
                    (CPU_CGROUP_ROOT / "cgroup.procs").write_text(pid)
                except OSError:
                    pass  # exited meanwhile
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.02)  # a process still leaving the group
    path.rmdir()  # last try: raise what the kernel says


def remove_stale_cgroups() -> list[Path]:
    """Remove this module's cgroups whose creating process is gone; return them."""
    removed = []
    if not CPU_CGROUP_ROOT.is_dir():
        return removed
    for path in CPU_CGROUP_ROOT.glob(f"{CGROUP_PREFIX}*-*"):
        match = re.fullmatch(rf"{CGROUP_PREFIX}(\d+)-\d+", path.name)
        if match and not Path(f"/proc/{match.group(1)}").exists():
            _remove_cgroup(path)
            removed.append(path)
    return removed


# ---- what a run asks for ---------------------------------------------------------------
#: How the tasks of a real run reach each other: plain loopback (``localhost``),
#: a namespace per task through a switch (``namespaces``), or the same with
#: every NIC rate-limited (``shaped``).
NETWORKS: tuple[str, ...] = ("localhost", "namespaces", "shaped")


@dataclass(frozen=True)
class Emulation:
    """What a real run emulates around its task processes.

    Attributes:
        network: one of :data:`NETWORKS`.
        rate_Bps: each NIC's rate in each direction with ``"shaped"``, bytes/s
            on the wire; ``None`` otherwise.
        straggler_cores: CPU time the last worker may use, cores (a CPU
            quota); ``None``: no straggler.
        congestion_control: TCP's congestion control in the hosts'
            namespaces (see :class:`Hosts`); ``None``: the machine's own.
    """

    network: str = checked(OneOf(NETWORKS), default="localhost")
    rate_Bps: float | None = checked(Optional(Number(0, low_open=True, unit="bytes/s"), "no rate limit"),
                                     default=None)
    straggler_cores: float | None = checked(Optional(Number(0, low_open=True, unit="cores"), "no straggler"),
                                            default=None)
    congestion_control: str | None = None

    def __post_init__(self) -> None:
        check_fields(self, "emulation")
        congestion_control_rule()("emulation.congestion_control", self.congestion_control)
        if self.congestion_control is not None and self.network == "localhost":
            raise InputError("emulation.congestion_control", self.congestion_control,
                             "None on localhost (it is set in each host's namespace: network 'namespaces' or 'shaped')")
        if (self.network == "shaped") != (self.rate_Bps is not None):
            raise InputError("emulation.rate_Bps", self.rate_Bps,
                             "a rate (bytes/s) with network 'shaped', and None with any other network")

    @property
    def plain(self) -> bool:
        """Nothing to emulate: today's localhost run."""
        return self.network == "localhost" and self.straggler_cores is None

    def unavailable(self) -> str | None:
        """One line saying why this cannot run here, or ``None``."""
        if self.plain:
            return None
        return unavailable(namespaces=self.network != "localhost", cpu_quota=self.straggler_cores is not None)

    def hosts(self, num_hosts: int, straggler_host: int | None) -> Hosts:
        """The (not yet started) :class:`Hosts` for ``num_hosts`` tasks."""
        quota = {} if self.straggler_cores is None or straggler_host is None else {straggler_host: self.straggler_cores}
        return Hosts(num_hosts, rate_Bps=self.rate_Bps, cpu_quota_cores=quota,
                     namespaces=self.network != "localhost", congestion_control=self.congestion_control)


def emulation_from_scenario(scenario, network: str = "shaped", congestion_control: str | None = None) -> Emulation:
    """The :class:`Emulation` of ``scenario`` (a :class:`distsim.scenario.Scenario`):
    with ``network="shaped"`` every NIC runs at ``cluster.inter_link.bandwidth_Bps``;
    the straggler is ``cluster.straggler_cores``; ``congestion_control`` as in :class:`Emulation`."""
    OneOf(NETWORKS)("network", network)
    c = scenario.cluster
    return Emulation(network, c.inter_link.bandwidth_Bps if network == "shaped" else None, c.straggler_cores,
                     congestion_control)
