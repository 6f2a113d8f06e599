"""The parts of a scenario: device, link, cluster, workload, strategy, training.

Each part is a frozen dataclass whose fields declare their own rule
(:mod:`distsim.validation.fields`); building one checks every field and
reports a bad value at its path. Units: seconds, bytes, bytes/s, FLOP/s,
FLOP, examples.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from distsim.scenario import limits, rules
from distsim.validation import (
    Boolean,
    InputError,
    InstanceOf,
    Integer,
    Number,
    OneOf,
    Optional,
    Sequence,
    StringMap,
    Text,
    check_fields,
    checked,
)

DEVICE_KINDS: tuple[str, ...] = ("cpu", "gpu", "tpu")

#: Strategy names: ``default`` is plain Keras without a strategy (no
#: distributed iterator; ``fit`` and tf.data still prefetch by default).
STRATEGIES: tuple[str, ...] = (
    "default",
    "one_device",
    "mirrored",
    "multi_worker_mirrored",
    "central_storage",
    "parameter_server",
    "tpu",
)
MODES: tuple[str, ...] = ("sync", "async")

#: How a parameter-server cluster's tasks are hosted (see :class:`Strategy`).
PS_CLUSTERS: tuple[str, ...] = ("processes", "in_process")

#: Gradient-summation algorithms (see :mod:`distsim.mechanics.collectives`).
ALGORITHMS: tuple[str, ...] = (
    "ring",
    "tree",
    "halving_doubling",
    "hierarchical",
    "reduce_to_one",
    "parameter_server",
    "torus2d",
)

#: Intra-node wirings of a :class:`Topology`.
TOPOLOGY_KINDS: tuple[str, ...] = ("nvlink_mesh", "nvswitch", "pcie_tree")
#: How collectives are priced (see :mod:`distsim.mechanics.communication`).
PROTOCOLS: tuple[str, ...] = ("alpha_beta", "nccl")
#: Algorithms of the inter-node stage of the hierarchical all-reduce.
INTER_ALGORITHMS: tuple[str, ...] = ("ring", "halving_doubling", "tree", "nccl_tree")
#: Where the parameter-server shards live (see :class:`Strategy`).
PS_PLACEMENTS: tuple[str, ...] = ("own_hosts", "worker_hosts", "host_cpu")

#: How gradient tensors are grouped into collectives (see :mod:`distsim.mechanics.gradients`).
GROUPINGS: tuple[str, ...] = ("buckets", "per_tensor", "pack", "fusion")

#: ``tf.data.experimental.AutoShardPolicy`` values (see :mod:`distsim.mechanics.sharding`).
SHARD_POLICIES: tuple[str, ...] = ("DATA", "FILE", "OFF")
#: Compute-time factor shapes, each with mean 1 (see :mod:`distsim.mechanics.stragglers`).
COMPUTE_DISTRIBUTIONS: tuple[str, ...] = ("deterministic", "exponential", "lognormal")

_NAME = Text(200)
_SECONDS = Number(0, limits.MAX_SECONDS, unit="seconds")
_RATE_BPS = Number(limits.MIN_BYTES_PER_S, limits.MAX_BYTES_PER_S, unit="bytes/s")
_CORES = Number(limits.MIN_CORES, limits.MAX_CORES, unit="cores per worker")


def _sources() -> dict:
    return checked(StringMap(), default_factory=dict, compare=False)


@dataclass(frozen=True)
class Device:
    """One compute device (a replica runs on one).

    Attributes:
        name: preset name or a label.
        kind: ``cpu``, ``gpu`` or ``tpu``.
        peak_flops: dense peak rate for training math, FLOP/s.
        efficiency: achieved fraction of the peak (0..1].
        memory_bandwidth_Bps: device memory bandwidth (optimizer update), bytes/s.
        memory_bytes: device memory, bytes. ``predict`` checks that a
            replica's weights, gradients, optimizer state and activations fit.
        step_overhead_s: fixed cost of every step on this device (framework
            dispatch, kernel-launch floor), seconds.
        replica_dispatch_s: host time to dispatch one replica's step (its
            graph's ops), seconds. A worker's host dispatches its replicas one
            after another, so N replicas cost N of these per step; a replica
            starts computing once its dispatch is done. 0 when the preset's
            ``step_overhead_s`` already holds all host costs.
        replica_variable_s: the part of ``replica_dispatch_s`` that serves the
            replica's own copy of the variables (its optimizer update, metric
            state, variable reads), seconds. Strategies that mirror the
            variables on every replica pay it per replica; central_storage,
            which keeps one copy, pays it once per step. At most
            ``replica_dispatch_s``; 0 when not measured.
        kernel_launch_s: host seconds to launch one kernel. A process that
            drives several devices launches the other replicas' kernels while
            they compute: ``(devices_per_worker - 1) x 4 x
            num_gradient_tensors`` launches a step, and a replica's compute
            takes at least that long (``data/reference/RULES.md`` rules
            16-18). 0 where kernels are not launched one by one (CPUs,
            XLA-compiled TPU steps).
        activation_value_bytes: bytes one stored activation value takes in
            the precision training usually runs in on this device: 4 for
            float32 (TF32 tensor-core math still stores float32), 2 where
            activations are kept in bfloat16 or float16 (TPUs). The memory
            check scales ``Workload.activation_bytes_per_sample``, which
            counts float32 values, by this over 4.
        sources: where each number comes from.
    """

    name: str = checked(_NAME)
    kind: str = checked(OneOf(DEVICE_KINDS))
    peak_flops: float = checked(Number(limits.MIN_FLOPS, limits.MAX_FLOPS, unit="FLOP/s"))
    efficiency: float = checked(Number(limits.MIN_FRACTION, 1))
    memory_bandwidth_Bps: float = checked(_RATE_BPS)
    memory_bytes: float = checked(Number(1, limits.MAX_BYTES, unit="bytes"))
    step_overhead_s: float = checked(_SECONDS)
    replica_dispatch_s: float = checked(_SECONDS, default=0.0)
    replica_variable_s: float = checked(_SECONDS, default=0.0)
    kernel_launch_s: float = checked(_SECONDS, default=0.0)
    activation_value_bytes: int = checked(OneOf((2, 4)), default=4)
    sources: dict = _sources()

    def __post_init__(self) -> None:
        check_fields(self, "Device")
        rules.check_device(lambda name: getattr(self, name), "Device")

    @property
    def effective_flops(self) -> float:
        return self.peak_flops * self.efficiency


def message_Bps(bandwidth_Bps, payload_fraction=1.0, stack_bandwidth_Bps=None):
    """Message bytes per second over a link (floats or NumPy arrays):
    ``min(bandwidth_Bps x payload_fraction, stack_bandwidth_Bps)``, the
    slower of the wire's payload rate and the hosts' network software.

    The two form a pipeline: gRPC and TCP move a message in pieces, and the
    software prepares the next piece while the NIC sends this one, so a long
    message goes at the slower stage's rate, not at the sum of both costs
    (the lab measurement behind it: ``data/measurements/README.md``, "Notes
    moved from docstrings"). ``stack_bandwidth_Bps`` of ``None`` or NaN means
    free."""
    wire_s_per_byte = 1.0 / (bandwidth_Bps * payload_fraction)
    if stack_bandwidth_Bps is None:
        return 1.0 / wire_s_per_byte
    stack = np.asarray(stack_bandwidth_Bps, dtype=float)
    # NaN (a None read into an array) costs nothing.
    stack_s_per_byte = np.where(np.isnan(stack), 0.0, 1.0 / np.where(np.isnan(stack), 1.0, stack))
    return 1.0 / np.maximum(wire_s_per_byte, stack_s_per_byte)


@dataclass(frozen=True)
class Link:
    """A link between devices (intra-worker) or hosts (inter-worker).

    Attributes:
        name: preset name or a label.
        bandwidth_Bps: one-direction bandwidth, bytes/s.
        latency_s: per-message latency (alpha), seconds.
        request_s: host time a parameter server spends on each request (a
            pull or a push: RPC handling, closure dispatch, per-variable ops)
            besides moving the bytes, seconds. A PS serves requests one at a
            time, so this is what makes workers queue. Only the
            parameter-server strategy uses it.
        payload_fraction: the share of ``bandwidth_Bps`` that carries the
            message (the rest is protocol headers), in (0, 1]. 1 when
            ``bandwidth_Bps`` is already a payload rate (fitted from message
            times); TCP over IPv4 over Ethernet with a 1500-byte MTU carries
            1448 of every 1514 bytes on the wire (0.956).
        stack_bandwidth_Bps: the hosts' network software (serialising,
            copying, the TCP stack) per byte, pipelined with the wire:
            a message of ``n`` bytes takes ``n / min(bandwidth_Bps x
            payload_fraction, stack_bandwidth_Bps)`` (:func:`message_Bps`).
            ``None``: free (or already part of ``bandwidth_Bps``).
        whole_message_bytes: the largest message that reaches a busy
            parameter server's NIC whole, bytes. Messages up to it are served
            one after another; longer ones stream, interleave with the other
            transfers and share the NIC (see
            :func:`distsim.engines.costs.fair_share_rate`). ``None``:
            every message is sent whole (one at a time).
        full_duplex: each direction has its own ``bandwidth_Bps`` (a switched
            NIC), so a parameter server in its own process receives pushes
            while it sends pulls; ``False``: one transfer at a time, either
            way (the model before this field existed).
        sources: where each number comes from.
    """

    name: str = checked(_NAME)
    bandwidth_Bps: float = checked(_RATE_BPS)
    latency_s: float = checked(_SECONDS)
    request_s: float = checked(_SECONDS, default=0.0)
    payload_fraction: float = checked(Number(limits.MIN_FRACTION, 1), default=1.0)
    stack_bandwidth_Bps: float | None = checked(Optional(_RATE_BPS, "free (part of bandwidth_Bps)"), default=None)
    whole_message_bytes: float | None = checked(
        Optional(Number(1, limits.MAX_BYTES, unit="bytes"), "every message is sent whole"), default=None)
    full_duplex: bool = checked(Boolean(), default=False)
    sources: dict = _sources()

    def __post_init__(self) -> None:
        check_fields(self, "Link")

    @property
    def effective_Bps(self) -> float:
        """Message bytes per second over this link (:func:`message_Bps`)."""
        return float(message_Bps(self.bandwidth_Bps, self.payload_fraction, self.stack_bandwidth_Bps))


@dataclass(frozen=True)
class Topology:
    """How the devices of one worker are wired to each other and to the host CPU.

    Attributes:
        name: preset name or a label.
        kind: one of :data:`TOPOLOGY_KINDS`.
        lane_bandwidth_Bps: achievable one-direction bandwidth of one
            device-to-device lane (one NVLink; the PCIe path for
            ``pcie_tree``), bytes/s.
        ring_lanes: ``[devices, lanes]`` pairs, by growing device count:
            rings among the first k devices of a worker use the lanes of the
            largest listed count <= k (the first entry below it). Ring
            all-reduces inside a worker run at ``lanes x lane_bandwidth_Bps``.
        host_links: PCIe uplinks between the devices and the host CPU; the
            devices share them evenly, so traffic to a parameter server on
            the CPU moves ``ceil(devices / host_links)`` messages per uplink.
        host_link_bandwidth_Bps: one-direction bandwidth of one uplink, bytes/s.
        max_devices: the GPUs one server of this design holds; a cluster
            with more devices per worker is another machine.
        sources: where each number comes from.
    """

    name: str = checked(_NAME)
    kind: str = checked(OneOf(TOPOLOGY_KINDS))
    lane_bandwidth_Bps: float = checked(_RATE_BPS)
    ring_lanes: tuple = checked(Sequence(Sequence(Integer(1, limits.MAX_DEVICES_PER_WORKER), 2),
                                         limits.MAX_DEVICES_PER_WORKER))
    host_links: int = checked(Integer(1, limits.MAX_DEVICES_PER_WORKER))
    host_link_bandwidth_Bps: float = checked(_RATE_BPS)
    max_devices: int = checked(Integer(1, limits.MAX_DEVICES_PER_WORKER))
    sources: dict = _sources()

    def __post_init__(self) -> None:
        check_fields(self, "Topology")
        counts = [pair[0] for pair in self.ring_lanes]
        if not self.ring_lanes or any(len(pair) != 2 for pair in self.ring_lanes) or counts != sorted(set(counts)):
            raise InputError("Topology.ring_lanes", [list(pair) for pair in self.ring_lanes],
                             "[devices, lanes] pairs with growing device counts, at least one")

    def lanes(self, devices: int) -> int:
        """Lanes per device of rings among ``devices`` devices of one worker."""
        below = [lanes for count, lanes in self.ring_lanes if count <= devices]
        return below[-1] if below else self.ring_lanes[0][1]


@dataclass(frozen=True)
class Cluster:
    """``num_workers`` hosts with ``devices_per_worker`` devices each.

    Attributes:
        device: the device every replica runs on.
        intra_link: between devices of one worker (PCIe, NVLink, memory).
        inter_link: between workers (Ethernet, InfiniBand, gRPC, ICI).
        num_workers: hosts (tasks).
        devices_per_worker: replicas per host.
        physical_cores: for CPU devices: the physical cores a worker's
            devices share. N logical CPU devices on 2 cores then split 2
            cores' worth of compute (no speedup); one device uses all of
            them. Fractional when worker processes share one host (3
            localhost workers on 2 cores: 2/3 each). In an ``in_process``
            parameter-server cluster (``Strategy.ps_cluster``) every task
            runs in one process: there it is that process's cores, not a
            share. ``None``: every device is its own hardware.
        host_input_speed: speed of each host's input-pipeline core relative
            to the core the workload's ``input_s_per_sample`` was measured on.
        topology: how a worker's devices are wired (NVLink mesh, NVSwitch,
            PCIe tree); ``None``: every device has one port on
            ``intra_link``.
        straggler_cores: for CPU devices: the cores the *last* worker gets
            instead of ``physical_cores`` (a CPU quota: cgroup
            ``cfs_quota_us / cfs_period_us`` in a real run), so its host work
            and compute run ``physical_cores / straggler_cores`` times slower
            (host work: ``1 / min(straggler_cores, 1)``). At most
            ``physical_cores``. ``None``: no straggler.
    """

    device: Device = checked(InstanceOf(Device, "a device preset name or an object of its fields"))
    intra_link: Link = checked(InstanceOf(Link, "a link preset name or an object of its fields"))
    inter_link: Link = checked(InstanceOf(Link, "a link preset name or an object of its fields"))
    num_workers: int = checked(Integer(1, limits.MAX_WORKERS), default=1)
    devices_per_worker: int = checked(Integer(1, limits.MAX_DEVICES_PER_WORKER), default=1)
    physical_cores: float | None = checked(Optional(_CORES, "each device is its own hardware"), default=None)
    host_input_speed: float = checked(Number(limits.MIN_SPEED, limits.MAX_SPEED), default=1.0)
    topology: Topology | None = checked(
        Optional(InstanceOf(Topology, "a topology preset name or an object of its fields"), "one port per device"),
        default=None)
    straggler_cores: float | None = checked(
        Optional(Number(limits.MIN_CORES, limits.MAX_CORES, unit="cores of the last worker"), "no straggler"),
        default=None)

    def __post_init__(self) -> None:
        check_fields(self, "Cluster")
        rules.check_cluster(lambda name: getattr(self, name), self.device.kind, "Cluster")
        if self.topology is not None and self.device.kind != "gpu":
            raise InputError("Cluster.topology", self.topology.name, f"null for a {self.device.kind} device "
                             "(topologies describe GPU servers)")
        if self.topology is not None and self.devices_per_worker > self.topology.max_devices:
            raise InputError("Cluster.devices_per_worker", self.devices_per_worker,
                             f"<= {self.topology.max_devices} for topology {self.topology.name!r} (the GPUs one such "
                             "server holds), or another topology")

    @property
    def num_replicas(self) -> int:
        return self.num_workers * self.devices_per_worker


@dataclass(frozen=True)
class Workload:
    """Model, dataset and input pipeline.

    Attributes:
        name: preset name or a label.
        num_params: trainable parameters (the summed gradient).
        bytes_per_param: bytes per weight and gradient element (4 for float32).
        flops_per_sample: training FLOPs per example (forward + backward).
        compute_s_per_sample: measured seconds per example on the scenario's
            device at full utilisation; replaces ``flops_per_sample /
            effective_flops`` when set.
        input_s_per_sample: serial input-pipeline seconds per example on the
            reference core (``Cluster.host_input_speed`` scales it).
        input_bytes_per_sample: bytes copied host -> accelerator per example.
        activation_bytes_per_sample: bytes of layer outputs one example keeps
            for the backward pass (device memory), counted as float32 values
            (4 bytes each); 0 when not known.
        num_examples: training-set size (epoch length).
        num_gradient_tensors: gradient tensors (variables); the gradient
            can be cut into at most this many buckets.
        tensor_params: parameters of each gradient tensor, in the order the
            model creates its variables (first layer first); empty when not
            known. They sum to ``num_params``.
        tensor_ready: for each tensor (same order), the fraction of the
            backward pass done when its gradient is ready, in (0, 1]: the
            last layer's come first, the first layer's at 1. Empty exactly
            when ``tensor_params`` is.
        sources: where each number comes from.
    """

    name: str = checked(_NAME)
    num_params: int = checked(Integer(1, limits.MAX_PARAMS))
    flops_per_sample: float = checked(Number(limits.MIN_FLOP, limits.MAX_FLOP, unit="FLOP"))
    num_examples: int = checked(Integer(1, limits.MAX_EXAMPLES))
    bytes_per_param: int = checked(Integer(1, 16), default=4)
    compute_s_per_sample: float | None = checked(
        Optional(Number(limits.MIN_SECONDS_PER_EXAMPLE, limits.MAX_SECONDS, unit="seconds"),
                 "derived from flops_per_sample"), default=None)
    input_s_per_sample: float = checked(_SECONDS, default=0.0)
    input_bytes_per_sample: int = checked(Integer(0, 10**12), default=0)
    activation_bytes_per_sample: float = checked(Number(0, limits.MAX_BYTES, unit="bytes"), default=0.0)
    num_gradient_tensors: int = checked(Integer(1, limits.MAX_GRADIENT_TENSORS), default=1)
    tensor_params: tuple = checked(Sequence(Integer(1, limits.MAX_PARAMS), limits.MAX_GRADIENT_TENSORS), default=())
    tensor_ready: tuple = checked(Sequence(Number(limits.MIN_FRACTION, 1), limits.MAX_GRADIENT_TENSORS), default=())
    sources: dict = _sources()

    def __post_init__(self) -> None:
        check_fields(self, "Workload")
        n = len(self.tensor_params)
        if n not in (0, self.num_gradient_tensors):
            raise InputError("Workload.tensor_params", f"<{n} tensors>",
                             f"one entry per gradient tensor (num_gradient_tensors={self.num_gradient_tensors}) or none")
        if len(self.tensor_ready) != n:
            raise InputError("Workload.tensor_ready", f"<{len(self.tensor_ready)} values>",
                             f"one value per entry of tensor_params ({n})")
        rules.check_workload(lambda name: getattr(self, name), "Workload")
        if any(later > earlier for earlier, later in zip(self.tensor_ready, self.tensor_ready[1:])):
            raise InputError("Workload.tensor_ready", "<not non-increasing>",
                             "values that never grow from the first layer to the last (backward runs last layer first)")

    @property
    def gradient_bytes(self) -> int:
        return self.num_params * self.bytes_per_param


@dataclass(frozen=True)
class Strategy:
    """A ``tf.distribute`` strategy (see :mod:`distsim.mechanics.strategies`
    for what each maps to).

    Attributes:
        name: one of :data:`STRATEGIES`.
        algorithm: gradient summation, one of :data:`ALGORITHMS`; ``None``
            takes TensorFlow's default for the strategy and device.
        mode: ``sync`` or ``async``; ``None`` is the strategy's default
            (async for parameter_server, sync otherwise).
        num_ps: parameter-server shards (parameter_server only).
        ps_cluster: how an asynchronous parameter-server cluster is hosted,
            one of :data:`PS_CLUSTERS`. ``"processes"``: every task is its
            own process (or machine), and a PS is busy only ``request_s`` +
            its share of the bytes per transfer. ``"in_process"``: one
            process hosts the PS and every worker (``distsim.real``'s
            default localhost cluster); that process handles one transfer
            at a time from start to end, latency included, and when the
            workers are CPU devices sharing ``physical_cores``, their
            compute in turn with the transfers, each on all of those cores
            (so set ``physical_cores`` to the process's cores, not a share).
        protocol: how collectives are priced, one of :data:`PROTOCOLS`:
            ``alpha_beta`` (the links' latency and bandwidth as given: TF's
            own RING collective, or any non-NCCL op) or ``nccl`` (NCCL's own
            tuning model: per-protocol latencies and bandwidth; GPUs only).
            ``None`` is TensorFlow's default implementation
            (:func:`distsim.mechanics.strategies.default_protocol`).
        inter_algorithm: the hierarchical all-reduce's algorithm between
            nodes, one of :data:`INTER_ALGORITHMS` (``algorithm`` must be
            ``hierarchical`` for any but ``ring``).
        ps_local_sum: each worker sums its devices' gradients on its CPU and
            pushes once (TF1's ``distributed_replicated`` and
            ``parameter_server`` with several GPUs per worker); ``False``:
            every replica pushes its own gradient. Synchronous only.
        ps_placement: where the PS shards live, one of
            :data:`PS_PLACEMENTS`: ``own_hosts`` (a host each),
            ``worker_hosts`` (shard s on worker s's host) or ``host_cpu``
            (the one worker's own CPU, reached over PCIe). Synchronous only.
    """

    name: str = checked(OneOf(STRATEGIES), default="mirrored")
    algorithm: str | None = checked(Optional(OneOf(ALGORITHMS), "TensorFlow's default"), default=None)
    mode: str | None = checked(Optional(OneOf(MODES), "the strategy's default"), default=None)
    num_ps: int = checked(Integer(1, 10_000), default=1)
    ps_cluster: str = checked(OneOf(PS_CLUSTERS), default="processes")
    protocol: str | None = checked(Optional(OneOf(PROTOCOLS), "TensorFlow's default"), default=None)
    inter_algorithm: str = checked(OneOf(INTER_ALGORITHMS), default="ring")
    ps_local_sum: bool = checked(Boolean(), default=False)
    ps_placement: str = checked(OneOf(PS_PLACEMENTS), default="own_hosts")

    def __post_init__(self) -> None:
        check_fields(self, "Strategy")
        rules.check_strategy(self.name, self.mode, "Strategy")
        if self.inter_algorithm != "ring" and self.algorithm != "hierarchical":
            raise InputError("Strategy.inter_algorithm", self.inter_algorithm,
                             "'ring' unless algorithm is 'hierarchical' (only it has an inter-node stage)")
        uses_ps = self.name == "parameter_server" or self.algorithm == "parameter_server"
        for field_, value, default in (("ps_local_sum", self.ps_local_sum, False),
                                       ("ps_placement", self.ps_placement, "own_hosts")):
            if value != default and not uses_ps:
                raise InputError(f"Strategy.{field_}", value, f"{default!r} unless gradients go through parameter servers")
            if value != default and self.resolved_mode == "async":
                raise InputError(f"Strategy.{field_}", value, f"{default!r} for asynchronous training "
                                 "(modelled for synchronous parameter servers only)")

    @property
    def resolved_mode(self) -> str:
        """``mode``, or the strategy's default: async for parameter_server, sync otherwise."""
        return rules.resolved_mode(self.name, self.mode)


@dataclass(frozen=True)
class Training:
    """Knobs of the run.

    Attributes:
        global_batch: examples per step over all replicas.
        drop_remainder: ``batch(..., drop_remainder=True)``.
        steps: steps the timeline simulates (or updates per worker, async).
        epochs: epochs (for the epoch time and the total).
        prefetch: overlap input with compute; ``None`` = TensorFlow 2.21's
            default, which prefetches with every strategy and without one
            (see :mod:`distsim.mechanics.strategies`).
        shuffle_buffer: ``shuffle(buffer)`` elements that must be read before
            the first batch of every epoch (0 = no shuffle).
        input_threads: parallel calls of the input map (1 = plain ``map``).
        num_buckets: gradient buckets (``grouping="buckets"``): equal
            pieces of the gradient; bucket k's all-reduce starts when k+1
            K-ths of the backward pass are done, overlapping the rest.
        grouping: how gradient tensors become collectives, one of
            :data:`GROUPINGS` (see :mod:`distsim.mechanics.gradients`):
            ``buckets`` (equal buckets), ``per_tensor`` (one collective per
            tensor as it becomes ready: TF1 graph mode), ``pack`` (TF2's
            ``CommunicationOptions(bytes_per_pack)`` packs in reverse
            order) or ``fusion`` (Horovod's fusion buffer, flushed every
            ``fusion_cycle_s``).
        bytes_per_pack: TF2's ``bytes_per_pack`` (0: one pack of every
            tensor), bytes. Only with ``grouping="pack"``.
        fusion_threshold_bytes: Horovod's fusion buffer
            (``HOROVOD_FUSION_THRESHOLD``; 0 disables fusion), bytes. Only
            with ``grouping="fusion"`` (any other grouping ignores it, so
            it must keep its default).
        fusion_cycle_s: Horovod's cycle time (``HOROVOD_CYCLE_TIME``),
            seconds; only with ``grouping="fusion"``, like the buffer.
        compute_distribution: per-device, per-step compute-time factor with
            mean 1: one of :data:`COMPUTE_DISTRIBUTIONS` (stragglers).
        compute_sigma: lognormal shape of that factor; only with
            ``compute_distribution="lognormal"`` (the others have no shape).
        backup_workers: aggregate the first N - b replicas, drop b stragglers.
        shard_policy: AutoShardPolicy, one of :data:`SHARD_POLICIES`.
        num_files: files of the dataset (``FILE`` policy).
        optimizer_bytes_per_param: device-memory bytes the update moves per
            parameter (SGD 12, momentum 20, Adam 28: it reads the weight,
            the gradient and each state slot, and writes the weight and
            each slot, 4 bytes each). The state it implies, ``(this - 3 x
            bytes_per_param) / 2`` per parameter, counts in device memory.
        metric_values: scalar metric variables Keras synchronises every step
            (each ``Mean`` metric keeps a total and a count: loss and
            accuracy make 4). Across worker processes
            (multi_worker_mirrored) each is its own small all-reduce after
            the gradient's, one after another; inside one process they cost
            no collective.
        seed: seed of every random draw.
    """

    global_batch: int = checked(Integer(1, limits.MAX_EXAMPLES), default=64)
    drop_remainder: bool = checked(Boolean(), default=False)
    steps: int = checked(Integer(1, limits.MAX_STEPS), default=20)
    epochs: int = checked(Integer(1, 1_000_000), default=1)
    prefetch: bool | None = checked(Optional(Boolean(), "the strategy's default"), default=None)
    shuffle_buffer: int = checked(Integer(0, limits.MAX_EXAMPLES), default=0)
    input_threads: int = checked(Integer(1, 4_096), default=1)
    num_buckets: int = checked(Integer(1, limits.MAX_GRADIENT_TENSORS), default=1)
    grouping: str = checked(OneOf(GROUPINGS), default="buckets")
    bytes_per_pack: int = checked(Integer(0, 10**15), default=0)
    fusion_threshold_bytes: int = checked(Integer(0, 10**15), default=rules.FUSION_THRESHOLD_BYTES)
    fusion_cycle_s: float = checked(Number(1e-6, 10, unit="seconds"), default=rules.FUSION_CYCLE_S)
    compute_distribution: str = checked(OneOf(COMPUTE_DISTRIBUTIONS), default="deterministic")
    compute_sigma: float = checked(Number(0, 10), default=rules.COMPUTE_SIGMA)
    backup_workers: int = checked(Integer(0, limits.MAX_REPLICAS), default=0)
    shard_policy: str = checked(OneOf(SHARD_POLICIES), default="DATA")
    num_files: int | None = checked(Optional(Integer(1, limits.MAX_EXAMPLES), "not stored in files"), default=None)
    optimizer_bytes_per_param: int = checked(Integer(0, 1_000), default=12)
    metric_values: int = checked(Integer(0, 10_000), default=4)
    seed: int = checked(Integer(0, 2**63 - 1), default=0)

    def __post_init__(self) -> None:
        check_fields(self, "Training")
        rules.check_training(lambda name: getattr(self, name), "Training")
