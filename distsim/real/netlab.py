"""The network lab: one scenario, predicted, then run for real over an emulated network.

A lab point is a :class:`~distsim.scenario.Scenario` whose
``cluster.inter_link`` is a NIC of a given rate (:func:`nic_link`).
:func:`distsim.predict` prices it; :func:`distsim.real.run` runs the same
scenario with every task in its own network namespace and every NIC shaped to
that rate (:mod:`distsim.real.network`). Nothing is fitted to the shaped runs:
the NIC takes its latency, its parameter-server request cost and its host
software's cost per byte from the unshaped calibration
(:func:`distsim.real.calibrate`, the ``this_machine_grpc`` preset), and its
rate from the scenario.

Nothing here imports TensorFlow.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from distsim.real.calibrate import DEVICE_PRESET, INTER_LINK_PRESET, INTRA_LINK_PRESET, workload_preset_name
from distsim.real.experiment import run
from distsim.results.result import Result
from distsim.scenario import Link, Scenario, load_preset, make_scenario, preset_names
from distsim.real.network import HTB_MIN_RATE_BPS
from distsim.validation import Integer, Number, Optional

#: Payload bytes per byte on the wire of an emulated NIC. A 1500-byte MTU
#: frame is 1514 bytes at the qdisc (14 Ethernet + 20 IPv4 + 32 TCP with the
#: timestamp option, RFC 7323, + 1448 payload), and htb counts whole frames.
#: A measured bulk transfer agrees (data/measurements/README.md, "Notes moved from docstrings").
TCP_PAYLOAD_FRACTION = 1448 / 1514

#: Where :data:`TCP_PAYLOAD_FRACTION` comes from.
TCP_PAYLOAD_SOURCE = ("TCP/IPv4 over Ethernet, MTU 1500: 1448 payload bytes per 1514-byte frame "
                      "(14 Ethernet + 20 IPv4 + 32 TCP with timestamps, RFC 7323)")

#: The lab links' ``whole_message_bytes``: a hypothesis, set between the two
#: message sizes the lab measured (407 KB arrive whole, 4.07 MB interleave; see
#: ``data/measurements/README.md``). It once cited gRPC's per-stream window
#: delta (chttp2 ``kMaxWindowDelta = 1 << 20``), but that caps only what a
#: reader adds beyond the SETTINGS initial window, which BDP probing holds
#: at 4 MiB or more at low memory pressure (``AdjustForMemoryPressure``), so gRPC's
#: flow control alone would let a 4.07 MB message through whole.
WHOLE_MESSAGE_BYTES = 1 << 20

#: Built-in presets for a machine that has not been calibrated.
UNCALIBRATED = {"device": "this_machine_core", "intra_link": "shared_memory", "inter_link": "localhost_grpc"}

#: Examples per worker step (weak scaling: every worker keeps its batch).
BATCH_PER_WORKER = 64


@dataclass(frozen=True)
class LabHardware:
    """The presets a lab scenario is built from.

    Attributes:
        device, intra_link, inter_link: preset names.
        calibrated: whether they are this machine's calibrated presets
            (``python -m distsim.real calibrate``) or built-in guesses.
    """

    device: str
    intra_link: str
    inter_link: str
    calibrated: bool

    def workload(self, name: str) -> str:
        """``name``'s calibrated variant when there is one, else ``name``."""
        calibrated = workload_preset_name(name)
        return calibrated if self.calibrated and calibrated in preset_names("workload") else name


def lab_hardware() -> LabHardware:
    """This machine's calibrated presets if :func:`distsim.real.calibrate` wrote
    them (in the user preset folder), else the built-in ones."""
    if DEVICE_PRESET in preset_names("device") and INTER_LINK_PRESET in preset_names("link"):
        return LabHardware(DEVICE_PRESET, INTRA_LINK_PRESET, INTER_LINK_PRESET, calibrated=True)
    return LabHardware(**UNCALIBRATED, calibrated=False)


#: A lab NIC's rate, Mbit/s: at least what htb can shape (8 bit/s,
#: :data:`~distsim.real.network.HTB_MIN_RATE_BPS`), at most 100 Gbit/s.
RATE_MBIT = Number(HTB_MIN_RATE_BPS * 8 / 1e6, 100_000, unit="Mbit/s; htb shapes 8 bit/s at the least")


def nic_link(rate_Bps: float, base: Link) -> Link:
    """A NIC with wire rate ``rate_Bps`` (bytes/s) between hosts that talk
    gRPC over it, ``base`` being the same gRPC link without a NIC (the
    calibrated localhost link).

    From ``base``: the per-message latency and the PS request cost, and its
    bandwidth as the host software's cost per byte (serialising and copying a
    tensor, which happens before and after the bytes cross the wire). From
    the NIC: its rate, of which TCP/IP framing leaves
    :data:`TCP_PAYLOAD_FRACTION` for the message.
    """
    how = f"from {base.name}"
    return Link(
        name=f"{rate_Bps * 8 / 1e6:g} Mbit/s NIC",
        bandwidth_Bps=rate_Bps,
        latency_s=base.latency_s,
        request_s=base.request_s,
        payload_fraction=TCP_PAYLOAD_FRACTION,
        stack_bandwidth_Bps=base.bandwidth_Bps,
        whole_message_bytes=WHOLE_MESSAGE_BYTES,
        full_duplex=True,
        sources={
            "bandwidth_Bps": "the emulated NIC's rate (htb, each direction)",
            "latency_s": how,
            "request_s": how,
            "payload_fraction": TCP_PAYLOAD_SOURCE,
            "stack_bandwidth_Bps": f"{how}: its fitted bandwidth, the gRPC software's cost per byte",
            "whole_message_bytes": "hypothesis: between the lab's measured 407 KB (whole) and 4.07 MB "
                                   "(interleaved) messages; mechanism not found (data/measurements/README.md)",
            "full_duplex": "the emulated NIC: htb limits each direction separately (distsim.real.network)",
        },
    )


def lab_scenario(
    strategy: str,
    num_workers: int,
    rate_mbit: float | None = None,
    *,
    workload: str = "mnist_mlp",
    steps: int = 30,
    straggler_cores: float | None = None,
    batch_per_worker: int = BATCH_PER_WORKER,
    cores_per_worker: float | None = None,
    hardware: LabHardware | None = None,
    seed: int = 0,
) -> Scenario:
    """One lab configuration as a :class:`Scenario`.

    Args:
        strategy: ``"multi_worker_mirrored"`` or ``"parameter_server"`` (one
            process per task, one PS).
        num_workers: worker processes.
        rate_mbit: every NIC's rate in Mbit/s (:func:`nic_link`); ``None``:
            the unshaped gRPC link itself.
        workload: an MNIST workload preset (``mnist_mlp``, ``mnist_mlp_wide``...).
        steps: training steps (parameter server: updates per worker).
        straggler_cores: CPU cores of the last worker (a CPU quota); ``None``:
            no straggler.
        batch_per_worker: examples per worker per step (weak scaling: the
            global batch grows with the workers).
        cores_per_worker: each worker's cores; ``None``: the workers share
            this machine's cores (``cores / workers``), as the real runs here
            do (and ``benchmarks/bench_real.py``). Give this machine's core
            count to ask about workers that are machines of their own.
        hardware: the presets (default :func:`lab_hardware`).
        seed: the scenario's seed.
    """
    num_workers = Integer(1)("num_workers", num_workers)  # before it divides the cores
    rate_mbit = Optional(RATE_MBIT, "unshaped")("rate_mbit", rate_mbit)  # before any host is built
    hardware = hardware or lab_hardware()
    values, sources = load_preset("link", hardware.inter_link)
    # Every lab task has its own process and socket pairs, so even unshaped a PS sends while it receives.
    base = Link(name=hardware.inter_link, **values, full_duplex=True,
                sources={**sources, "full_duplex": "one process per task: TCP carries both directions at once"})
    link = base if rate_mbit is None else nic_link(rate_mbit * 1e6 / 8, base)
    return make_scenario(
        hardware.device, hardware.workload(workload), strategy, num_workers,
        intra_link=hardware.intra_link, inter_link={"name": link.name, **_fields(link)},
        physical_cores=cores_per_worker or (os.cpu_count() or 1) / num_workers, straggler_cores=straggler_cores,
        ps_cluster="processes", global_batch=batch_per_worker * num_workers, steps=steps, seed=seed,
        name=f"{strategy} x{num_workers}, {workload}, " + (f"{rate_mbit:g} Mbit/s NICs" if rate_mbit else "unshaped"),
    )


def _fields(link: Link) -> dict:
    return {k: getattr(link, k) for k in ("bandwidth_Bps", "latency_s", "request_s", "payload_fraction",
                                          "stack_bandwidth_Bps", "whole_message_bytes", "full_duplex",
                                          "sources")}


def real_options(scenario: Scenario) -> dict:
    """RunPlan options a lab run adds: a parameter-server run trains on one
    global batch of MNIST, repeated, because the coordinator ships the
    dataset (a constant in the dataset function) to every task through its
    own shaped NIC before training; the step times do not depend on which
    examples are used."""
    if scenario.strategy.name == "parameter_server":
        return {"n_train": scenario.training.global_batch}
    return {}


@dataclass
class LabPoint:
    """One configuration predicted and measured.

    Attributes:
        scenario: what both describe.
        predicted: :func:`distsim.predict`'s result.
        measured: :func:`distsim.real.run`'s result.
        network: what the real run ran on (``measured.meta["network"]``).
        fallback: why it ran on plain localhost instead, or ``""``.
    """

    scenario: Scenario
    predicted: Result
    measured: Result
    network: str = ""
    fallback: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def error(self) -> float:
        """``predicted / measured - 1`` of the step time."""
        return self.predicted.summary.step_time_s / self.measured.summary.step_time_s - 1.0

    def to_dict(self) -> dict:
        link = self.scenario.cluster.inter_link
        return {
            "scenario": self.scenario.name,
            "strategy": self.scenario.strategy.name,
            "workers": self.scenario.cluster.num_workers,
            "workload": self.scenario.workload.name,
            "rate_mbit": link.bandwidth_Bps * 8 / 1e6 if link.payload_fraction < 1 else None,
            "gradient_bytes": self.scenario.workload.gradient_bytes,
            "predicted_step_s": self.predicted.summary.step_time_s,
            "measured_step_s": self.measured.summary.step_time_s,
            "error": self.error,
            "bytes_on_the_wire_s": wire_bound_s(self.scenario),
            "network": self.network,
            "fallback": self.fallback,
            "caveat": self.predicted.meta.get("caveat", ""),
            **apply_times(self.measured),
            **self.extra,
        }


def apply_times(result: Result) -> dict:
    """When a measured run applied its updates, for a run record (JSON-ready).

    ``apply_time_s``: seconds since the run's start at which each update landed, in
    apply order (a parameter server: every worker's applied update, read from the PS's
    log; a synchronous run: the end of each of the chief's steps, where every worker
    applies the same summed gradient), or ``None`` for a run that recorded no steps.
    ``apply_worker``: which worker sent each update (parameter server), or ``None``
    (synchronous: every worker applies each one).
    """
    times = None if result.curve is None else [float(t) for t in result.curve.time_s]
    worker = None if result.staleness is None else [int(w) for w in result.staleness.worker]
    return {"apply_time_s": times, "apply_worker": worker}


def wire_bound_s(scenario: Scenario) -> float:
    """Seconds the busiest NIC needs per step just to carry its gradient bytes
    (frames, headers included) at ``cluster.inter_link.bandwidth_Bps``: a ring
    all-reduce sends ``2 (p-1)/p`` gradients from every NIC, a PS receives
    (and sends) one gradient per worker per step."""
    c, n = scenario.cluster, scenario.workload.gradient_bytes
    wire_bytes = n / c.inter_link.payload_fraction
    if scenario.strategy.name == "parameter_server":
        return c.num_workers * wire_bytes / c.inter_link.bandwidth_Bps
    p = c.num_replicas
    return 2 * (p - 1) / p * wire_bytes / c.inter_link.bandwidth_Bps


def run_point(scenario: Scenario, *, network: str = "shaped", timeout_s: float = 900.0,
              progress: bool = False, **options) -> LabPoint:
    """Predict ``scenario``, run it on ``network`` (see :func:`distsim.real.run`), return both."""
    from distsim.engines.prediction import predict

    predicted = predict(scenario)
    measured = run(scenario, network=network, timeout_s=timeout_s, progress=progress,
                   **{**real_options(scenario), **options})
    return LabPoint(scenario, predicted, measured, measured.meta.get("network", ""),
                    measured.meta.get("emulation_fallback", ""))
