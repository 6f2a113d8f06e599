"""One scenario's numbers for the cost model, typed: :class:`StepCosts`.

Every engine (the closed form of :mod:`distsim.engines.steady`, the
timeline, the asynchronous PS engine, :func:`distsim.sweep`) prices a step
from the same :class:`StepCosts`, computed once per scenario by
:func:`step_costs`. Its numeric fields are NumPy arrays: 0-d for one
scenario, or columns that broadcast over the rows of a sweep, so the same
formulas serve one prediction and a million sweep rows. A field the scenario
leaves unset (``None``) is NaN; a boolean is 0.0 or 1.0.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from distsim.scenario import Scenario, message_Bps

#: The scenario path of each numeric field of :class:`StepCosts` (what a sweep may vary as arrays).
FIELD_PATHS: dict[str, str] = {
    "num_workers": "cluster.num_workers",
    "devices_per_worker": "cluster.devices_per_worker",
    "physical_cores": "cluster.physical_cores",
    "host_input_speed": "cluster.host_input_speed",
    "peak_flops": "cluster.device.peak_flops",
    "device_efficiency": "cluster.device.efficiency",
    "memory_bandwidth_Bps": "cluster.device.memory_bandwidth_Bps",
    "step_overhead_s": "cluster.device.step_overhead_s",
    "replica_dispatch_s": "cluster.device.replica_dispatch_s",
    "replica_variable_s": "cluster.device.replica_variable_s",
    "kernel_launch_s": "cluster.device.kernel_launch_s",
    "num_gradient_tensors": "workload.num_gradient_tensors",
    "intra_bandwidth_Bps": "cluster.intra_link.bandwidth_Bps",
    "intra_latency_s": "cluster.intra_link.latency_s",
    "inter_bandwidth_Bps": "cluster.inter_link.bandwidth_Bps",
    "inter_latency_s": "cluster.inter_link.latency_s",
    "inter_request_s": "cluster.inter_link.request_s",
    "intra_payload_fraction": "cluster.intra_link.payload_fraction",
    "intra_stack_bandwidth_Bps": "cluster.intra_link.stack_bandwidth_Bps",
    "inter_payload_fraction": "cluster.inter_link.payload_fraction",
    "inter_stack_bandwidth_Bps": "cluster.inter_link.stack_bandwidth_Bps",
    "straggler_cores": "cluster.straggler_cores",
    "inter_full_duplex": "cluster.inter_link.full_duplex",
    "num_params": "workload.num_params",
    "bytes_per_param": "workload.bytes_per_param",
    "flops_per_sample": "workload.flops_per_sample",
    "compute_s_per_sample": "workload.compute_s_per_sample",
    "input_s_per_sample": "workload.input_s_per_sample",
    "input_bytes_per_sample": "workload.input_bytes_per_sample",
    "num_examples": "workload.num_examples",
    "activation_bytes_per_sample": "workload.activation_bytes_per_sample",
    "memory_bytes": "cluster.device.memory_bytes",
    "activation_value_bytes": "cluster.device.activation_value_bytes",
    "global_batch": "training.global_batch",
    "drop_remainder": "training.drop_remainder",
    "num_files": "training.num_files",
    "shuffle_buffer": "training.shuffle_buffer",
    "input_threads": "training.input_threads",
    "num_buckets": "training.num_buckets",
    "optimizer_bytes_per_param": "training.optimizer_bytes_per_param",
    "metric_values": "training.metric_values",
}

#: The scenario paths of :data:`FIELD_PATHS`, in its order.
MODEL_FIELDS: tuple[str, ...] = tuple(FIELD_PATHS.values())

_ATTRIBUTE_OF: dict[str, str] = {path: name for name, path in FIELD_PATHS.items()}


@dataclass(frozen=True)
class StepCosts:
    """The numbers a scenario's step is priced from (arrays that broadcast).

    Attributes:
        device_kind: ``cluster.device.kind`` (``cpu``, ``gpu``, ``tpu``).
        shard_policy: ``training.shard_policy`` (``DATA``, ``FILE``, ``OFF``).
        num_workers: worker processes (hosts).
        devices_per_worker: replicas per worker.
        physical_cores: cores a CPU worker's replicas share; NaN: each
            device is its own hardware.
        host_input_speed: the host's input speed relative to the
            workload's reference host (dimensionless).
        peak_flops: one device's peak, FLOP/s.
        device_efficiency: share of ``peak_flops`` sustained (0..1).
        memory_bandwidth_Bps: device memory bandwidth, bytes/s.
        step_overhead_s: the host's fixed cost per step, seconds.
        replica_dispatch_s: the host's dispatch of one replica, seconds.
        replica_variable_s: the part of that dispatch serving the replica's
            own copy of the variables, seconds.
        kernel_launch_s: the host's launch of one kernel, seconds.
        num_gradient_tensors: gradient tensors (count).
        intra_bandwidth_Bps, inter_bandwidth_Bps: the intra- and
            inter-worker links' wire rates, bytes/s.
        intra_latency_s, inter_latency_s: their latency per message, seconds.
        inter_request_s: a PS host's own time per request, seconds.
        intra_payload_fraction, inter_payload_fraction: the wire's share
            that carries message bytes (0..1).
        intra_stack_bandwidth_Bps, inter_stack_bandwidth_Bps: the hosts'
            network software rate, bytes/s; NaN: free.
        straggler_cores: the last worker's cores; NaN: no straggler.
        inter_full_duplex: 1.0 when each direction of the inter-worker link
            has its own bandwidth, else 0.0.
        num_params: model parameters (count).
        bytes_per_param: bytes of one parameter and of its gradient.
        flops_per_sample: forward and backward FLOP per example.
        compute_s_per_sample: measured compute per example, seconds; NaN:
            derived from ``flops_per_sample``.
        input_s_per_sample: host input per example on the reference host, seconds.
        input_bytes_per_sample: bytes of one example copied to a device.
        num_examples: examples in the training set.
        activation_bytes_per_sample: float32 activation bytes per example.
        memory_bytes: one device's memory, bytes.
        activation_value_bytes: bytes per activation value on the device.
        global_batch: examples per step over all replicas.
        drop_remainder: 1.0 when the epoch's partial batch is dropped, else 0.0.
        num_files: the dataset's files (count); NaN: not in files.
        shuffle_buffer: examples in the shuffle buffer.
        input_threads: parallel calls of the input map (count).
        num_buckets: gradient buckets (count).
        optimizer_bytes_per_param: bytes the optimizer's update moves per
            parameter (weights, gradient, slots).
        metric_values: scalar metric variables all-reduced per step (count).
    """

    device_kind: str
    shard_policy: str
    num_workers: np.ndarray
    devices_per_worker: np.ndarray
    physical_cores: np.ndarray
    host_input_speed: np.ndarray
    peak_flops: np.ndarray
    device_efficiency: np.ndarray
    memory_bandwidth_Bps: np.ndarray
    step_overhead_s: np.ndarray
    replica_dispatch_s: np.ndarray
    replica_variable_s: np.ndarray
    kernel_launch_s: np.ndarray
    num_gradient_tensors: np.ndarray
    intra_bandwidth_Bps: np.ndarray
    intra_latency_s: np.ndarray
    inter_bandwidth_Bps: np.ndarray
    inter_latency_s: np.ndarray
    inter_request_s: np.ndarray
    intra_payload_fraction: np.ndarray
    intra_stack_bandwidth_Bps: np.ndarray
    inter_payload_fraction: np.ndarray
    inter_stack_bandwidth_Bps: np.ndarray
    straggler_cores: np.ndarray
    inter_full_duplex: np.ndarray
    num_params: np.ndarray
    bytes_per_param: np.ndarray
    flops_per_sample: np.ndarray
    compute_s_per_sample: np.ndarray
    input_s_per_sample: np.ndarray
    input_bytes_per_sample: np.ndarray
    num_examples: np.ndarray
    activation_bytes_per_sample: np.ndarray
    memory_bytes: np.ndarray
    activation_value_bytes: np.ndarray
    global_batch: np.ndarray
    drop_remainder: np.ndarray
    num_files: np.ndarray
    shuffle_buffer: np.ndarray
    input_threads: np.ndarray
    num_buckets: np.ndarray
    optimizer_bytes_per_param: np.ndarray
    metric_values: np.ndarray

    @property
    def gradient_bytes(self) -> np.ndarray:
        """Bytes of the whole gradient (and of the variables): ``num_params x bytes_per_param``."""
        return self.num_params * self.bytes_per_param

    @functools.cached_property
    def intra_Bps(self) -> np.ndarray:
        """Message bytes per second over the intra-worker link (:func:`distsim.scenario.message_Bps`)."""
        return message_Bps(self.intra_bandwidth_Bps, self.intra_payload_fraction, self.intra_stack_bandwidth_Bps)

    @functools.cached_property
    def inter_Bps(self) -> np.ndarray:
        """Message bytes per second over the inter-worker link (:func:`distsim.scenario.message_Bps`)."""
        return message_Bps(self.inter_bandwidth_Bps, self.inter_payload_fraction, self.inter_stack_bandwidth_Bps)

    def replace(self, **changes: Any) -> "StepCosts":
        """A copy with the given fields changed."""
        return dataclasses.replace(self, **changes)

    def value_at(self, path: str) -> np.ndarray:
        """The numeric field at scenario ``path`` (one of :data:`MODEL_FIELDS`)."""
        return getattr(self, _ATTRIBUTE_OF[path])

    def numeric(self) -> dict[str, np.ndarray]:
        """The numeric fields by name."""
        return {name: getattr(self, name) for name in FIELD_PATHS}

    def broadcast(self, shape) -> "StepCosts":
        """Every numeric field as a float array of ``shape`` (one value per sweep row)."""
        return self.replace(**{k: np.broadcast_to(v, shape).astype(float) for k, v in self.numeric().items()})

    def rows(self, shape, mask) -> "StepCosts":
        """The rows ``mask`` of every numeric field broadcast to ``shape``."""
        return self.replace(**{k: np.broadcast_to(v, shape)[mask] for k, v in self.numeric().items()})


def step_costs(scenario: Scenario, overrides: Mapping[str, Any] | None = None) -> StepCosts:
    """The :class:`StepCosts` of ``scenario``: each numeric field a 0-d
    float array, or the array ``overrides`` gives for its scenario path
    (:data:`MODEL_FIELDS`; a sweep's varied columns)."""
    overrides = overrides or {}
    numbers = {}
    for path, name in _ATTRIBUTE_OF.items():
        if path in overrides:
            numbers[name] = np.asarray(overrides[path], dtype=float)
            continue
        value = scenario
        for part in path.split("."):
            value = getattr(value, part)
        numbers[name] = np.asarray(np.nan if value is None else float(value))
    return StepCosts(device_kind=scenario.cluster.device.kind, shard_policy=scenario.training.shard_policy,
                     **numbers)
