"""The whole experiment as one small, validated, serialisable state.

A :class:`Scenario` is a cluster (workers x devices, links), a workload (model,
dataset, input pipeline), a strategy and the training knobs. It round-trips
through JSON with a schema version, and every invalid field raises a
``ValueError`` naming the field path, the value and what is allowed, e.g.
``cluster.inter_link.bandwidth_Bps=-1.0; allowed: a number > 0 (bytes/s)``.

Hardware and workloads come from preset files (``distsim/presets/*.json``),
where every number carries its source. In scenario JSON a device, link or
workload is given as

* a preset name: ``"device": "gtx_1080_ti"``;
* a preset with overrides: ``"device": {"preset": "k80", "efficiency": 0.4}``;
* or inline, every field spelled out (what :meth:`Scenario.to_dict` writes, so a
  saved scenario does not change when presets do).

User presets: files with the same layout in :func:`user_preset_dir`
(``$DISTSIM_PRESET_DIR``, default ``~/.config/distsim/presets``) add to and
override the built-in ones. ``distsim.real.calibrate()`` writes the measured
"this machine" device and links there with :func:`write_user_preset`;
afterwards ``"device": "this_machine"`` works in any scenario.

Units: seconds, bytes, bytes/s, FLOP/s, examples.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.resources
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from distsim.jsonfile import read_json, write_json

SCHEMA_VERSION = 1

#: Preset kinds and the file each lives in.
PRESET_FILES: dict[str, str] = {"device": "devices.json", "link": "links.json", "workload": "workloads.json"}
PRESET_DIR_ENV = "DISTSIM_PRESET_DIR"

DEVICE_KINDS: tuple[str, ...] = ("cpu", "gpu", "tpu")

#: Strategy names: ``default`` is plain Keras without a strategy (no
#: distributed iterator, so no prefetch unless the pipeline has one).
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

#: Gradient-summation algorithms (see :mod:`distsim.collectives`).
ALGORITHMS: tuple[str, ...] = (
    "ring",
    "tree",
    "halving_doubling",
    "hierarchical",
    "reduce_to_one",
    "parameter_server",
    "torus2d",
)

#: ``tf.data.experimental.AutoShardPolicy`` values (see :mod:`distsim.sharding`).
SHARD_POLICIES: tuple[str, ...] = ("DATA", "FILE", "OFF")
#: Compute-time factor shapes, each with mean 1 (see :mod:`distsim.stragglers`).
COMPUTE_DISTRIBUTIONS: tuple[str, ...] = ("deterministic", "exponential", "lognormal")

#: Links a cluster gets when the scenario names none, by device kind.
DEFAULT_LINKS: dict[str, tuple[str, str]] = {
    "cpu": ("shared_memory", "localhost_grpc"),
    "gpu": ("pcie3_x16", "ethernet_10g"),
    "tpu": ("tpu_ici", "tpu_ici"),
}


class FieldError(ValueError):
    """A ValueError about one field: ``<path>.<field>=<value>; allowed: ...``."""

    def __init__(self, path: str, name: str, value: Any, allowed: str):
        self.path, self.name, self.value, self.allowed = path, name, value, allowed
        super().__init__(f"{path}.{name}={value!r}; allowed: {allowed}")

    def at(self, path: str) -> "FieldError":
        """The same error reported under another path."""
        return FieldError(path, self.name, self.value, self.allowed)


# --------------------------------------------------------------------- checks


def _number(path, name, value, low=None, high=None, low_open=False, unit="") -> None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if ok and low is not None:
        ok = value > low if low_open else value >= low
    if ok and high is not None:
        ok = value <= high
    if not ok:
        bound = []
        if low is not None:
            bound.append(f"{'>' if low_open else '>='} {low:g}")
        if high is not None:
            bound.append(f"<= {high:g}")
        raise FieldError(path, name, value, f"a number {' and '.join(bound)}{f' ({unit})' if unit else ''}".strip())


def _integer(path, name, value, low=1) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise FieldError(path, name, value, f"an integer >= {low}")


def _choice(path, name, value, allowed) -> None:
    if value not in allowed:
        raise FieldError(path, name, value, f"one of {tuple(allowed)}")


# --------------------------------------------------------------- components


@dataclass(frozen=True)
class Device:
    """One compute device (a replica runs on one).

    Attributes:
        name: preset name or a label.
        kind: ``cpu``, ``gpu`` or ``tpu``.
        peak_flops: dense peak rate for training math, FLOP/s.
        efficiency: achieved fraction of the peak (0..1].
        memory_bandwidth_Bps: device memory bandwidth (optimizer update), bytes/s.
        memory_bytes: device memory, bytes.
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
        sources: where each number comes from.
    """

    name: str
    kind: str
    peak_flops: float
    efficiency: float
    memory_bandwidth_Bps: float
    memory_bytes: float
    step_overhead_s: float
    replica_dispatch_s: float = 0.0
    replica_variable_s: float = 0.0
    sources: dict = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        self.check("Device")

    def check(self, path: str) -> None:
        _choice(path, "kind", self.kind, DEVICE_KINDS)
        _number(path, "peak_flops", self.peak_flops, 0, low_open=True, unit="FLOP/s")
        _number(path, "efficiency", self.efficiency, 0, 1, low_open=True)
        _number(path, "memory_bandwidth_Bps", self.memory_bandwidth_Bps, 0, low_open=True, unit="bytes/s")
        _number(path, "memory_bytes", self.memory_bytes, 0, low_open=True, unit="bytes")
        _number(path, "step_overhead_s", self.step_overhead_s, 0, unit="seconds")
        _number(path, "replica_dispatch_s", self.replica_dispatch_s, 0, unit="seconds")
        _number(path, "replica_variable_s", self.replica_variable_s, 0, self.replica_dispatch_s,
                unit="seconds; the bound is replica_dispatch_s")

    @property
    def effective_flops(self) -> float:
        return self.peak_flops * self.efficiency


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
        sources: where each number comes from.
    """

    name: str
    bandwidth_Bps: float
    latency_s: float
    request_s: float = 0.0
    sources: dict = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        self.check("Link")

    def check(self, path: str) -> None:
        _number(path, "bandwidth_Bps", self.bandwidth_Bps, 0, low_open=True, unit="bytes/s")
        _number(path, "latency_s", self.latency_s, 0, unit="seconds")
        _number(path, "request_s", self.request_s, 0, unit="seconds")


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
            localhost workers on 2 cores: 2/3 each). ``None``: every device
            is its own hardware.
        host_input_speed: speed of each host's input-pipeline core relative
            to the core the workload's ``input_s_per_sample`` was measured on.
    """

    device: Device
    intra_link: Link
    inter_link: Link
    num_workers: int = 1
    devices_per_worker: int = 1
    physical_cores: float | None = None
    host_input_speed: float = 1.0

    def __post_init__(self) -> None:
        self.check("Cluster")

    def check(self, path: str) -> None:
        _integer(path, "num_workers", self.num_workers)
        _integer(path, "devices_per_worker", self.devices_per_worker)
        if self.physical_cores is not None:
            _number(path, "physical_cores", self.physical_cores, 0, low_open=True, unit="cores per worker")
            if self.device.kind != "cpu":
                raise FieldError(
                    path, "physical_cores", self.physical_cores, f"null for a {self.device.kind} device (CPU devices only)"
                )
        _number(path, "host_input_speed", self.host_input_speed, 0, low_open=True)

    @property
    def num_replicas(self) -> int:
        return self.num_workers * self.devices_per_worker


@dataclass(frozen=True)
class Workload:
    """Model, dataset and input pipeline.

    Attributes:
        name: preset name or a label.
        num_params: trainable parameters (the summed gradient).
        bytes_per_param: bytes per gradient element (4 for float32).
        flops_per_sample: training FLOPs per example (forward + backward).
        compute_s_per_sample: measured seconds per example on the scenario's
            device at full utilisation; replaces ``flops_per_sample /
            effective_flops`` when set.
        input_s_per_sample: serial input-pipeline seconds per example on the
            reference core (``Cluster.host_input_speed`` scales it).
        input_bytes_per_sample: bytes copied host -> accelerator per example.
        num_examples: training-set size (epoch length).
        num_gradient_tensors: gradient tensors (variables); the gradient
            can be cut into at most this many buckets.
        sources: where each number comes from.
    """

    name: str
    num_params: int
    flops_per_sample: float
    num_examples: int
    bytes_per_param: int = 4
    compute_s_per_sample: float | None = None
    input_s_per_sample: float = 0.0
    input_bytes_per_sample: int = 0
    num_gradient_tensors: int = 1
    sources: dict = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        self.check("Workload")

    def check(self, path: str) -> None:
        _integer(path, "num_params", self.num_params)
        _integer(path, "bytes_per_param", self.bytes_per_param)
        _number(path, "flops_per_sample", self.flops_per_sample, 0, low_open=True, unit="FLOP")
        _integer(path, "num_examples", self.num_examples)
        if self.compute_s_per_sample is not None:
            _number(path, "compute_s_per_sample", self.compute_s_per_sample, 0, low_open=True, unit="seconds")
        _number(path, "input_s_per_sample", self.input_s_per_sample, 0, unit="seconds")
        _integer(path, "input_bytes_per_sample", self.input_bytes_per_sample, low=0)
        _integer(path, "num_gradient_tensors", self.num_gradient_tensors)

    @property
    def gradient_bytes(self) -> int:
        return self.num_params * self.bytes_per_param


@dataclass(frozen=True)
class Strategy:
    """A ``tf.distribute`` strategy (see :mod:`distsim.strategies` for what
    each maps to).

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
            at a time from start to end, latency included.
    """

    name: str = "mirrored"
    algorithm: str | None = None
    mode: str | None = None
    num_ps: int = 1
    ps_cluster: str = "processes"

    def __post_init__(self) -> None:
        self.check("Strategy")

    def check(self, path: str) -> None:
        _choice(path, "name", self.name, STRATEGIES)
        if self.algorithm is not None:
            _choice(path, "algorithm", self.algorithm, ALGORITHMS)
        if self.mode is not None:
            _choice(path, "mode", self.mode, MODES)
            if self.mode == "async" and self.name != "parameter_server":
                raise FieldError(path, "mode", self.mode, "'sync' (only parameter_server trains asynchronously)")
        _integer(path, "num_ps", self.num_ps)
        _choice(path, "ps_cluster", self.ps_cluster, PS_CLUSTERS)


@dataclass(frozen=True)
class Training:
    """Knobs of the run.

    Attributes:
        global_batch: examples per step over all replicas.
        drop_remainder: ``batch(..., drop_remainder=True)``.
        steps: steps the timeline simulates (or updates per worker, async).
        epochs: epochs (for the epoch time and the total).
        prefetch: overlap input with compute; ``None`` = the strategy's
            default (tf.distribute's distributed iterator prefetches, plain
            Keras without a strategy does not).
        shuffle_buffer: ``shuffle(buffer)`` elements that must be read before
            the first batch of every epoch (0 = no shuffle).
        input_threads: parallel calls of the input map (1 = plain ``map``).
        num_buckets: gradient buckets; bucket k's all-reduce starts when its
            backward is done, overlapping the rest of the backward pass.
        compute_distribution: per-device, per-step compute-time factor with
            mean 1: one of :data:`COMPUTE_DISTRIBUTIONS` (stragglers).
        compute_sigma: lognormal shape of that factor.
        backup_workers: aggregate the first N - b replicas, drop b stragglers.
        shard_policy: AutoShardPolicy, one of :data:`SHARD_POLICIES`.
        num_files: files of the dataset (``FILE`` policy).
        optimizer_bytes_per_param: device-memory bytes the update moves per
            parameter (SGD 12, momentum 20, Adam 28).
        metric_values: scalar metric variables Keras synchronises every step
            (each ``Mean`` metric keeps a total and a count: loss and
            accuracy make 4). Across worker processes
            (multi_worker_mirrored) each is its own small all-reduce after
            the gradient's, one after another; inside one process they cost
            no collective.
        seed: seed of every random draw.
    """

    global_batch: int = 64
    drop_remainder: bool = False
    steps: int = 20
    epochs: int = 1
    prefetch: bool | None = None
    shuffle_buffer: int = 0
    input_threads: int = 1
    num_buckets: int = 1
    compute_distribution: str = "deterministic"
    compute_sigma: float = 0.1
    backup_workers: int = 0
    shard_policy: str = "DATA"
    num_files: int | None = None
    optimizer_bytes_per_param: int = 12
    metric_values: int = 4
    seed: int = 0

    def __post_init__(self) -> None:
        self.check("Training")

    def check(self, path: str) -> None:
        _integer(path, "global_batch", self.global_batch)
        if not isinstance(self.drop_remainder, bool):
            raise FieldError(path, "drop_remainder", self.drop_remainder, "true or false")
        _integer(path, "steps", self.steps)
        _integer(path, "epochs", self.epochs)
        if self.prefetch is not None and not isinstance(self.prefetch, bool):
            raise FieldError(path, "prefetch", self.prefetch, "true, false or null (strategy default)")
        _integer(path, "shuffle_buffer", self.shuffle_buffer, low=0)
        _integer(path, "input_threads", self.input_threads)
        _integer(path, "num_buckets", self.num_buckets)
        _choice(path, "compute_distribution", self.compute_distribution, COMPUTE_DISTRIBUTIONS)
        _number(path, "compute_sigma", self.compute_sigma, 0)
        _integer(path, "backup_workers", self.backup_workers, low=0)
        _choice(path, "shard_policy", self.shard_policy, SHARD_POLICIES)
        if self.num_files is not None:
            _integer(path, "num_files", self.num_files)
        _integer(path, "optimizer_bytes_per_param", self.optimizer_bytes_per_param, low=0)
        _integer(path, "metric_values", self.metric_values, low=0)
        _integer(path, "seed", self.seed, low=0)


@dataclass(frozen=True)
class Scenario:
    """Cluster + workload + strategy + training knobs.

    Cross-field rules (each reported at the field path):
    one_device/default need exactly one replica; mirrored and central_storage
    one worker; tpu a TPU device; drop_remainder needs a global batch of at
    least one example per replica; FILE sharding at least one file per
    worker; fewer backup workers than replicas; no more gradient buckets
    than gradient tensors.
    """

    cluster: Cluster
    workload: Workload
    strategy: Strategy = field(default_factory=Strategy)
    training: Training = field(default_factory=Training)
    name: str = ""
    notes: str = ""

    def __post_init__(self) -> None:
        self.cluster.check("cluster")
        self.cluster.device.check("cluster.device")
        self.cluster.intra_link.check("cluster.intra_link")
        self.cluster.inter_link.check("cluster.inter_link")
        self.workload.check("workload")
        self.strategy.check("strategy")
        self.training.check("training")
        self._check_combination()

    def _check_combination(self) -> None:
        c, s, t = self.cluster, self.strategy, self.training
        n = c.num_replicas
        if s.name in ("default", "one_device") and n != 1:
            raise FieldError(
                "strategy", "name", s.name, f"a multi-replica strategy for {c.num_workers} x {c.devices_per_worker} devices"
            )
        if s.name in ("mirrored", "central_storage") and c.num_workers != 1:
            raise FieldError("cluster", "num_workers", c.num_workers, f"1 for strategy {s.name!r} (one machine)")
        if s.name == "tpu" and c.device.kind != "tpu":
            raise FieldError("cluster.device", "kind", c.device.kind, "'tpu' for strategy 'tpu'")
        if t.drop_remainder and t.global_batch < n:
            raise FieldError(
                "training", "global_batch", t.global_batch, f">= {n} replicas when drop_remainder is true"
            )
        if t.shard_policy == "FILE" and (t.num_files is None or t.num_files < c.num_workers):
            raise FieldError("training", "num_files", t.num_files, f"an integer >= num_workers={c.num_workers} for FILE sharding")
        if t.backup_workers >= n and t.backup_workers:
            raise FieldError("training", "backup_workers", t.backup_workers, f"< {n} replicas")
        if t.num_buckets > self.workload.num_gradient_tensors:
            raise FieldError(
                "training", "num_buckets", t.num_buckets,
                f"<= workload.num_gradient_tensors={self.workload.num_gradient_tensors} (a bucket holds whole tensors)",
            )

    # ------------------------------------------------------------ properties

    @property
    def num_replicas(self) -> int:
        return self.cluster.num_replicas

    @property
    def per_replica_batch(self) -> int:
        """Largest per-replica batch of a full step (tf.distribute's ceil split)."""
        return -(-self.training.global_batch // self.num_replicas)

    # ------------------------------------------------------------------ JSON

    def to_dict(self) -> dict:
        """JSON-ready dict with every preset inlined and a schema version."""
        return {
            "schema_version": SCHEMA_VERSION,
            "name": self.name,
            "notes": self.notes,
            "cluster": {
                "num_workers": self.cluster.num_workers,
                "devices_per_worker": self.cluster.devices_per_worker,
                "physical_cores": self.cluster.physical_cores,
                "host_input_speed": self.cluster.host_input_speed,
                "device": dataclasses.asdict(self.cluster.device),
                "intra_link": dataclasses.asdict(self.cluster.intra_link),
                "inter_link": dataclasses.asdict(self.cluster.inter_link),
            },
            "workload": dataclasses.asdict(self.workload),
            "strategy": dataclasses.asdict(self.strategy),
            "training": dataclasses.asdict(self.training),
        }

    @classmethod
    def from_dict(cls, d: dict) -> "Scenario":
        """Build and validate a scenario from JSON data (presets resolved)."""
        if not isinstance(d, dict):
            raise ValueError(f"scenario must be a JSON object; got {type(d).__name__}")
        version = d.get("schema_version")
        if version != SCHEMA_VERSION:
            raise FieldError("scenario", "schema_version", version, f"{SCHEMA_VERSION}")
        _no_unknown("scenario", d, {"schema_version", "name", "notes", "cluster", "workload", "strategy", "training"})
        for key in ("cluster", "workload"):
            if key not in d:
                raise FieldError("scenario", key, None, f"a {key} object (required)")
        cluster = _cluster_from(d["cluster"], "cluster")
        workload = _component_from(Workload, "workload", d["workload"], "workload")
        strategy = _plain_from(Strategy, d.get("strategy", {}), "strategy")
        training = _plain_from(Training, d.get("training", {}), "training")
        return cls(cluster, workload, strategy, training, name=str(d.get("name", "")), notes=str(d.get("notes", "")))

    def save(self, path: str | Path) -> Path:
        return write_json(path, self.to_dict(), indent=2)

    @classmethod
    def load(cls, path: str | Path) -> "Scenario":
        return cls.from_dict(read_json(path, "scenario file"))

    def replace(self, path: str, value: Any) -> "Scenario":
        """A copy with one field changed, by dotted path
        (``"cluster.devices_per_worker"``, ``"training.global_batch"``,
        ``"cluster.inter_link.bandwidth_Bps"``). Preset names are accepted for
        ``cluster.device``, ``cluster.*_link`` and ``workload``."""
        parts = path.split(".")
        if hasattr(value, "item") and getattr(value, "shape", None) == ():
            # A NumPy scalar (from a sweep grid or a slider): store the plain
            # Python number, which validates and serialises like any other.
            value = value.item()
        if isinstance(value, (str, dict)) and path in ("cluster.device", "cluster.intra_link", "cluster.inter_link", "workload"):
            kind = {"cluster.device": "device", "workload": "workload"}.get(path, "link")
            cls_ = {"device": Device, "link": Link, "workload": Workload}[kind]
            value = _component_from(cls_, kind, value, path)
        return _replace_path(self, parts, value, "")


def _replace_path(obj: Any, parts: list[str], value: Any, done: str) -> Any:
    name = parts[0]
    here = f"{done}.{name}" if done else name
    if not dataclasses.is_dataclass(obj) or name not in {f.name for f in dataclasses.fields(obj)} or name == "sources":
        allowed = [f.name for f in dataclasses.fields(obj) if f.name != "sources"] if dataclasses.is_dataclass(obj) else []
        raise ValueError(f"no field {here!r} in a scenario; allowed at this level: {allowed}")
    if len(parts) == 1:
        new = value
    else:
        new = _replace_path(getattr(obj, name), parts[1:], value, here)
    try:
        return dataclasses.replace(obj, **{name: new})
    except FieldError as exc:
        if exc.path == type(obj).__name__:  # the component's own check: report at its path
            raise exc.at(done) from None
        raise


# ------------------------------------------------------------------ presets


def user_preset_dir() -> Path:
    """Where user presets live: ``$DISTSIM_PRESET_DIR`` or
    ``~/.config/distsim/presets``."""
    env = os.environ.get(PRESET_DIR_ENV)
    return Path(env) if env else Path.home() / ".config" / "distsim" / "presets"


def _read_preset_file(text: str, where: str, kind: str) -> dict:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"preset file {where} is not valid JSON: {exc}") from None
    if data.get("schema_version") != SCHEMA_VERSION or data.get("kind") != kind or not isinstance(
        data.get("presets"), dict
    ):
        raise ValueError(
            f"preset file {where}: needs schema_version={SCHEMA_VERSION}, kind={kind!r} and a 'presets' object"
        )
    return data["presets"]


def _all_presets(kind: str) -> dict[str, dict]:
    if kind not in PRESET_FILES:
        raise ValueError(f"preset kind={kind!r}; allowed: {tuple(PRESET_FILES)}")
    filename = PRESET_FILES[kind]
    presets = dict(_builtin_presets(kind))
    user = user_preset_dir() / filename
    if user.is_file():
        presets.update(_user_presets(str(user), user.stat().st_mtime_ns, kind))
    return presets


@functools.lru_cache(maxsize=None)
def _builtin_presets(kind: str) -> dict:
    filename = PRESET_FILES[kind]
    text = (importlib.resources.files("distsim") / "presets" / filename).read_text()
    return _read_preset_file(text, f"distsim/presets/{filename}", kind)


@functools.lru_cache(maxsize=64)
def _user_presets(path: str, mtime_ns: int, kind: str) -> dict:
    """A user preset file, re-read whenever it changes (``mtime_ns``)."""
    return _read_preset_file(Path(path).read_text(), path, kind)


def preset_names(kind: str) -> list[str]:
    """Names of the ``kind`` presets (``device``, ``link``, ``workload``)."""
    return sorted(_all_presets(kind))


def load_preset(kind: str, name: str) -> tuple[dict, dict]:
    """(values, sources) of one preset; raises ``ValueError`` for an unknown name."""
    presets = _all_presets(kind)
    if name not in presets:
        raise ValueError(f"unknown {kind} preset {name!r}; allowed: {sorted(presets)}")
    values, sources = {}, {}
    for key, entry in presets[name].items():
        if isinstance(entry, dict) and "value" in entry:
            values[key] = entry["value"]
            sources[key] = str(entry.get("source", ""))
        else:
            values[key] = entry
    return values, sources


def write_user_preset(
    kind: str, name: str, values: dict, sources: dict, directory: str | Path | None = None
) -> Path:
    """Add or replace preset ``name`` in the user preset file of ``kind``.

    ``values`` holds the fields (for a device: kind, peak_flops, efficiency,
    memory_bandwidth_Bps, memory_bytes, step_overhead_s), ``sources`` a note
    per numeric field. The entry is validated by building the component.
    Returns the file written.
    """
    cls_ = {"device": Device, "link": Link, "workload": Workload}.get(kind)
    if cls_ is None:
        raise ValueError(f"preset kind={kind!r}; allowed: {tuple(PRESET_FILES)}")
    cls_(name=name, **values)  # validates
    directory = Path(directory) if directory is not None else user_preset_dir()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / PRESET_FILES[kind]
    data = {"schema_version": SCHEMA_VERSION, "kind": kind, "presets": {}}
    if path.is_file():
        data["presets"] = _read_preset_file(path.read_text(), str(path), kind)
    entry = {}
    for key, value in values.items():
        entry[key] = {"value": value, "source": sources[key]} if key in sources else value
    data["presets"][name] = entry
    path.write_text(json.dumps(data, indent=2) + "\n")
    return path


def _no_unknown(path: str, d: dict, allowed: set[str]) -> None:
    unknown = sorted(set(d) - allowed)
    if unknown:
        raise ValueError(f"{path} has unknown field(s) {unknown}; allowed: {sorted(allowed)}")


def _component_from(cls_, kind: str, spec: Any, path: str):
    """Device/Link/Workload from a preset name, {"preset": ..., overrides} or inline."""
    names = {f.name for f in dataclasses.fields(cls_)}
    if isinstance(spec, str):
        spec = {"preset": spec}
    if not isinstance(spec, dict):
        raise ValueError(f"{path}={spec!r}; allowed: a {kind} preset name or an object")
    if "preset" in spec:
        try:
            values, sources = load_preset(kind, spec["preset"])
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None
        overrides = {k: v for k, v in spec.items() if k not in ("preset", "sources")}
        _no_unknown(path, overrides, names - {"name", "sources"})
        sources.update({k: "scenario override" for k in overrides})
        sources.update(spec.get("sources", {}))
        values = {**values, **overrides, "name": spec["preset"]}
        values["sources"] = sources
    else:
        _no_unknown(path, spec, names)
        values = dict(spec)
    missing = sorted(f.name for f in dataclasses.fields(cls_) if f.name not in values and _required(f))
    if missing:
        raise ValueError(f"{path} is missing field(s) {missing}")
    try:
        return cls_(**values)
    except FieldError as exc:
        raise exc.at(path) from None
    except TypeError as exc:
        raise ValueError(f"{path}: {exc}") from None


def _required(f: dataclasses.Field) -> bool:
    return f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING


def _plain_from(cls_, spec: Any, path: str):
    if not isinstance(spec, dict):
        raise ValueError(f"{path}={spec!r}; allowed: an object")
    _no_unknown(path, spec, {f.name for f in dataclasses.fields(cls_)})
    try:
        return cls_(**spec)
    except FieldError as exc:
        raise exc.at(path) from None


def _cluster_from(spec: Any, path: str) -> Cluster:
    if not isinstance(spec, dict):
        raise ValueError(f"{path}={spec!r}; allowed: an object")
    _no_unknown(path, spec, {f.name for f in dataclasses.fields(Cluster)})
    if "device" not in spec:
        raise FieldError(path, "device", None, "a device preset name or object (required)")
    device = _component_from(Device, "device", spec["device"], f"{path}.device")
    intra_default, inter_default = DEFAULT_LINKS[device.kind]
    intra = _component_from(Link, "link", spec.get("intra_link", intra_default), f"{path}.intra_link")
    inter = _component_from(Link, "link", spec.get("inter_link", inter_default), f"{path}.inter_link")
    rest = {k: v for k, v in spec.items() if k not in ("device", "intra_link", "inter_link")}
    try:
        return Cluster(device=device, intra_link=intra, inter_link=inter, **rest)
    except FieldError as exc:
        raise exc.at(path) from None


def make_scenario(
    device: str | dict = "gtx_1080_ti",
    workload: str | dict = "mnist_mlp",
    strategy: str = "mirrored",
    num_workers: int = 1,
    devices_per_worker: int = 1,
    *,
    intra_link: str | dict | None = None,
    inter_link: str | dict | None = None,
    physical_cores: float | None = None,
    host_input_speed: float = 1.0,
    algorithm: str | None = None,
    mode: str | None = None,
    num_ps: int = 1,
    ps_cluster: str = "processes",
    name: str = "",
    **training: Any,
) -> Scenario:
    """Build a scenario from preset names in one call, e.g.
    ``make_scenario("v100", "resnet50_224", "mirrored", devices_per_worker=8,
    global_batch=256)``. Extra keywords are :class:`Training` fields."""
    cluster: dict[str, Any] = {
        "device": device,
        "num_workers": num_workers,
        "devices_per_worker": devices_per_worker,
        "physical_cores": physical_cores,
        "host_input_speed": host_input_speed,
    }
    if intra_link is not None:
        cluster["intra_link"] = intra_link
    if inter_link is not None:
        cluster["inter_link"] = inter_link
    return Scenario.from_dict(
        {
            "schema_version": SCHEMA_VERSION,
            "name": name,
            "cluster": cluster,
            "workload": workload,
            "strategy": {"name": strategy, "algorithm": algorithm, "mode": mode, "num_ps": num_ps,
                         "ps_cluster": ps_cluster},
            "training": training,
        }
    )
