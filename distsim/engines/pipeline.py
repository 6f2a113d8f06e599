"""Pipeline (model) parallelism: a model's layers cut into stages, one stage per device.

When a model is too big for one device, its layers are split: device ``s``
holds the contiguous layers ``[k_s, k_s + n_s)`` and passes its output
activations to device ``s + 1``; on the way back it receives the gradient with
respect to those activations and sends the gradient with respect to its own
input to device ``s - 1``. This module simulates one training step of such a
pipeline and returns a per-device :class:`~distsim.results.trace.Trace` plus the
numbers that decide whether it pays: step time, bubble fraction, throughput,
speedup over one device, and memory per stage.

Schedules (:data:`SCHEDULES`), with ``p`` stages and ``m`` micro-batches:

* ``"naive"``: micro-batches go through the whole model one after another
  (forward through every stage, then backward), so only one stage is ever
  busy. The bubble is ``(p-1)/p`` whatever ``m`` is.
* ``"gpipe"``: every stage runs all ``m`` forwards, then all ``m`` backwards
  (newest micro-batch first). Stages overlap on different micro-batches; the
  pipeline fills and drains once per step. With equal stages and free
  communication the bubble is ``(p-1)/(m+p-1)`` (GPipe, Huang et al. 2019).
* ``"1f1b"``: one-forward-one-backward (PipeDream-Flush, Narayanan et al.
  2021): stage ``s`` runs ``min(p-s-1, m)`` warm-up forwards, then alternates
  one forward and one backward. Same bubble as GPipe, but a stage stashes the
  activations of at most ``p-s`` micro-batches instead of ``m``.

Cost model:

* Compute: a stage's forward on a micro-batch of ``b`` examples takes
  ``b * (sum of its layers' forward FLOPs per example) / flops_per_s +
  overhead_s``; the backward likewise with the backward FLOPs.
* Communication (alpha-beta): sending ``n`` bytes between neighbouring stages
  takes ``link_latency_s + n / link_bandwidth_Bps``. Each direction of each
  link carries one message at a time (full duplex); sending does not stall the
  sender's compute.
* ``devices_share_cores=True`` models logical devices that share one
  processor (TensorFlow's logical CPUs on one machine): compute of all stages
  is serialised on one processor of ``flops_per_s``, first ready first served.
* The optimizer update is left out: it costs the same with or without a
  pipeline and is small next to forward and backward (a few FLOPs per
  parameter against about ``6 * batch`` per parameter).
* The side-by-side with data parallelism (:func:`data_parallel_estimate`)
  is priced as :func:`distsim.predict` prices a scenario: from the
  :class:`~distsim.mechanics.stepcosts.StepCosts` of the equivalent
  scenario (:func:`data_parallel_scenario`).

Memory per stage: the parameters times ``param_copies`` (weights, gradients,
optimizer slots) plus the activations it stashes for the backward pass: for
every micro-batch whose forward it has run and whose backward it has not, the
input of each of its layers (and, on the last stage, the logits).

Units: seconds, bytes, FLOPs, examples.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, replace
from typing import Any, Sequence

import numpy as np

from distsim.engines import steady
from distsim.mechanics.communication import Communication
from distsim.mechanics.stepcosts import StepCosts, step_costs
from distsim.mechanics.strategies import plan
from distsim.results.result import Result, Summary
from distsim.results.trace import EVENT_KINDS, Trace
from distsim.scenario import ALGORITHMS, Cluster, Device, Link, Scenario, Strategy, Training, Workload, limits
from distsim.validation import (Boolean, InputError, InstanceOf, Integer, Number, OneOf, Optional, Text,
                                check_fields, checked, default_of)

#: Pipeline schedules :func:`simulate_pipeline` knows.
SCHEDULES: tuple[str, ...] = ("naive", "gpipe", "1f1b")

#: Forward and backward passes one simulated step may hold (2 x stages x
#: micro-batches). Measured on this 2-core machine: 2,000,000 passes took 7 s
#: (8 or 64 stages alike), so the bound simulates in about 3.5 s.
MAX_PASSES = 1_000_000
#: Stages x layers x layers :func:`balanced_split` may search: its dynamic
#: programme compares up to ``layers`` candidates for each of ``stages x
#: layers`` cells. Measured here: 1,000 stages x 1,000 layers (10^9) took 2 s,
#: 100 x 10,000 (10^10) 13 s.
MAX_SPLIT_WORK = 2_000_000_000

_FORWARD, _BACKWARD = 0, 1

_COUNT = Integer(1)
_SECONDS = Number(0, unit="seconds")
_FLOP = Number(0, unit="FLOP per example")


@dataclass(frozen=True)
class _Bandwidth(Number):
    """A bandwidth > 0 bytes/s, or ``math.inf`` for free transfers."""

    def accepts(self, value: Any) -> bool:
        return value == math.inf or super().accepts(value)

    def allowed(self) -> str:
        return f"{super().allowed()}, or math.inf for free transfers"


_LINK_BANDWIDTH = _Bandwidth(0, low_open=True, unit="bytes/s")


def _as_tuple(path: str, value: Any, allowed: str) -> tuple:
    """``value`` as a non-empty tuple (from a list, tuple or array), or an
    :class:`InputError` at ``path``."""
    if isinstance(value, (str, bytes, dict)):
        raise InputError(path, value, allowed)
    try:
        items = tuple(value)
    except TypeError:
        raise InputError(path, value, allowed) from None
    if not items:
        raise InputError(path, value, allowed)
    return items


@dataclass(frozen=True)
class Layer:
    """Cost of one layer, per example.

    Attributes:
        name: a label, e.g. ``"dense_1"``.
        num_params: trainable parameters (values, not bytes).
        forward_flops: floating-point operations of the forward pass per example.
        backward_flops: FLOPs of the backward pass per example (about twice
            the forward for a matrix multiply: one product for the input
            gradient, one for the weight gradient).
        output_values: values in the layer's output per example; this is what
            crosses a link when the next layer lives on another device.
    """

    name: str = checked(Text(200))
    num_params: int = checked(Integer(0))
    forward_flops: float = checked(_FLOP)
    backward_flops: float = checked(_FLOP)
    output_values: int = checked(_COUNT)

    def __post_init__(self) -> None:
        check_fields(self, "Layer")


@dataclass(frozen=True)
class LayeredModel:
    """A model as a chain of layers.

    Attributes:
        input_values: values in one input example (784 for a flattened MNIST image).
        layers: the layers in order.
        bytes_per_value: bytes per parameter and activation value (4 for float32).
    """

    input_values: int = checked(_COUNT)
    layers: tuple[Layer, ...]
    bytes_per_value: int = checked(_COUNT, default=4)

    def __post_init__(self) -> None:
        check_fields(self, "LayeredModel")
        layers = _as_tuple("LayeredModel.layers", self.layers, "a non-empty sequence of Layer")
        for i, layer in enumerate(layers):
            InstanceOf(Layer, "a Layer")(f"LayeredModel.layers[{i}]", layer)
        object.__setattr__(self, "layers", layers)

    @property
    def num_layers(self) -> int:
        return len(self.layers)

    @property
    def num_params(self) -> int:
        return sum(layer.num_params for layer in self.layers)

    def input_values_of(self, i: int) -> int:
        """Values in layer ``i``'s input per example."""
        return self.input_values if i == 0 else self.layers[i - 1].output_values


def dense_model(sizes: Sequence[int], bytes_per_value: int = 4) -> LayeredModel:
    """A stack of Dense layers ``sizes[0] -> sizes[1] -> ... -> sizes[-1]``.

    A Dense layer from ``a`` to ``b`` values has ``a*b + b`` parameters, costs
    ``2ab`` FLOPs per example forward (a multiply and an add per weight) and
    ``4ab`` backward (input gradient and weight gradient).
    """
    allowed = "at least two sizes (the input and one layer), each an integer >= 1"
    sizes = _as_tuple("sizes", sizes, allowed)
    if len(sizes) < 2:
        raise InputError("sizes", sizes, allowed)
    sizes = [_COUNT(f"sizes[{i}]", size) for i, size in enumerate(sizes)]
    layers = tuple(
        Layer(
            name=f"dense_{i}",
            num_params=a * b + b,
            forward_flops=2.0 * a * b,
            backward_flops=4.0 * a * b,
            output_values=b,
        )
        for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:]))
    )
    return LayeredModel(input_values=sizes[0], layers=layers, bytes_per_value=bytes_per_value)


def even_split(num_layers: int, num_stages: int) -> tuple[int, ...]:
    """Layers per stage when ``num_layers`` are dealt out as evenly as
    possible by count (the first stages take one extra), like ``np.array_split``."""
    num_layers = _COUNT("num_layers", num_layers)
    num_stages = _stage_count(num_stages, num_layers)
    base, extra = divmod(num_layers, num_stages)
    return tuple(base + 1 if s < extra else base for s in range(num_stages))


def _stage_count(num_stages: Any, num_layers: int) -> int:
    return Integer(1, num_layers, f"num_layers={num_layers}: every stage needs a layer")("num_stages", num_stages)


def balanced_split(model: LayeredModel, num_stages: int) -> tuple[int, ...]:
    """Layers per stage that minimise the slowest stage's forward+backward
    FLOPs over all contiguous splits (exact, by dynamic programming)."""
    n = InstanceOf(LayeredModel, "a LayeredModel")("model", model).num_layers
    num_stages = _stage_count(num_stages, n)
    if num_stages * n * n > MAX_SPLIT_WORK:
        raise InputError("num_stages", num_stages, f"at most {MAX_SPLIT_WORK // (n * n):,} stages for {n:,} layers "
                         f"(stages x layers^2 <= {MAX_SPLIT_WORK:,}, searched in seconds); or use even_split")
    cost = np.array([layer.forward_flops + layer.backward_flops for layer in model.layers])
    prefix = np.concatenate([[0.0], np.cumsum(cost)])
    # best[k][i]: smallest max-stage cost for the first i layers in k stages.
    best = np.full((num_stages + 1, n + 1), np.inf)
    cut = np.zeros((num_stages + 1, n + 1), dtype=int)
    best[0][0] = 0.0
    for k in range(1, num_stages + 1):
        for i in range(k, n + 1):
            j = np.arange(k - 1, i)
            candidates = np.maximum(best[k - 1][j], prefix[i] - prefix[j])
            pick = int(np.argmin(candidates))
            best[k][i], cut[k][i] = candidates[pick], j[pick]
    counts, i = [], n
    for k in range(num_stages, 0, -1):
        counts.append(int(i - cut[k][i]))
        i = int(cut[k][i])
    return tuple(reversed(counts))


def stage_layer_ranges(layers_per_stage: Sequence[int]) -> list[tuple[int, int]]:
    """``[(k, k + n), ...]``: the half-open layer range each stage holds."""
    edges = np.concatenate([[0], np.cumsum(layers_per_stage)]).astype(int)
    return [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:])]


def bubble_fraction_closed_form(num_stages, num_microbatches):
    """``(p - 1) / (m + p - 1)``: the idle share of a GPipe or 1F1B step with
    equal stages and free communication (vectorised over arrays)."""
    p = np.asarray(num_stages, dtype=float)
    m = np.asarray(num_microbatches, dtype=float)
    return (p - 1) / (m + p - 1)


def gpipe_step_closed_form_s(forward_s: Sequence[float], backward_s: Sequence[float], num_microbatches: int) -> float:
    """GPipe step time with free communication, in seconds:
    ``sum(f) + (m-1) max(f) + sum(b) + (m-1) max(b)``.

    The forward phase is a flow shop of ``m`` identical jobs through the
    stages (the first job takes ``sum(f)``; the slowest stage then releases
    one job every ``max(f)``), and the backward phase is the same in reverse.
    With ``p`` equal stages this is ``(m + p - 1)(f + b)``.
    """
    f, b = np.asarray(forward_s, dtype=float), np.asarray(backward_s, dtype=float)
    m = num_microbatches
    return float(f.sum() + (m - 1) * f.max() + b.sum() + (m - 1) * b.max())


@dataclass(frozen=True)
class PipelineConfig:
    """One pipeline-parallel training step.

    Attributes:
        model: the layers and their costs.
        layers_per_stage: how many consecutive layers each stage (device)
            holds; stage ``s`` holds layers ``[k_s, k_s + n_s)``. Must add up
            to the model's layer count.
        global_batch: examples per training step.
        num_microbatches: micro-batches the global batch is cut into; must
            divide ``global_batch``.
        flops_per_s: sustained FLOP/s of one device (or, with
            ``devices_share_cores``, of the one processor all stages share).
        link_latency_s: latency of one transfer between neighbouring stages.
        link_bandwidth_Bps: message bytes per second between neighbouring
            stages (``math.inf`` for free transfers).
        overhead_s: fixed cost of each forward or backward pass of one stage
            on one micro-batch (kernel launches, framework dispatch), seconds.
        schedule: one of :data:`SCHEDULES`.
        param_copies: copies of the parameters a stage keeps (2 for plain
            SGD: weights and gradients; 4 for Adam: plus two moment slots).
        devices_share_cores: the stages are logical devices on one processor.
        device_memory_bytes: memory of one device, to say which stages fit;
            ``None`` if unknown.
    """

    model: LayeredModel = checked(InstanceOf(LayeredModel, "a LayeredModel (see dense_model)"))
    layers_per_stage: tuple[int, ...]
    global_batch: int = checked(_COUNT)
    num_microbatches: int = checked(_COUNT, default=1)
    flops_per_s: float = checked(Number(0, low_open=True, unit="FLOP/s"), default=1e12)
    link_latency_s: float = checked(_SECONDS, default=0.0)
    link_bandwidth_Bps: float = checked(_LINK_BANDWIDTH, default=math.inf)
    overhead_s: float = checked(_SECONDS, default=0.0)
    schedule: str = checked(OneOf(SCHEDULES), default="gpipe")
    param_copies: int = checked(_COUNT, default=2)
    # A cluster's default: each device is its own hardware (Cluster.physical_cores=None).
    devices_share_cores: bool = checked(Boolean(), default=default_of(Cluster, "physical_cores") is not None)
    device_memory_bytes: float | None = checked(Optional(Number(0, low_open=True, unit="bytes"), "unknown"),
                                                default=None)

    def __post_init__(self) -> None:
        check_fields(self, "PipelineConfig")
        object.__setattr__(self, "layers_per_stage", _check_split(self.layers_per_stage, self.model.num_layers))
        if self.global_batch % self.num_microbatches:
            raise InputError("PipelineConfig.num_microbatches", self.num_microbatches,
                             f"a divisor of global_batch={self.global_batch}")
        max_microbatches = MAX_PASSES // (2 * self.num_stages)
        if self.num_microbatches > max_microbatches:
            raise InputError("PipelineConfig.num_microbatches", self.num_microbatches,
                             f"at most {max_microbatches:,} with {self.num_stages} stages (2 x stages x "
                             f"micro-batches <= {MAX_PASSES:,} passes, simulated in seconds)")

    @property
    def num_stages(self) -> int:
        return len(self.layers_per_stage)

    @property
    def microbatch_size(self) -> int:
        """Examples per micro-batch."""
        return self.global_batch // self.num_microbatches

    def stage_ranges(self) -> list[tuple[int, int]]:
        """Half-open layer range ``(k, k + n)`` of each stage."""
        return stage_layer_ranges(self.layers_per_stage)

    def stage_times_s(self) -> tuple[np.ndarray, np.ndarray]:
        """``(forward_s, backward_s)``: seconds each stage needs for one
        micro-batch's forward and backward pass, overhead included."""
        layers = self.model.layers
        fwd = np.array([sum(layers[i].forward_flops for i in range(a, b)) for a, b in self.stage_ranges()])
        bwd = np.array([sum(layers[i].backward_flops for i in range(a, b)) for a, b in self.stage_ranges()])
        scale = self.microbatch_size / self.flops_per_s
        return fwd * scale + self.overhead_s, bwd * scale + self.overhead_s

    def boundary_bytes(self) -> np.ndarray:
        """Bytes sent from stage ``s`` to ``s + 1`` per micro-batch (activations
        forward; the gradient going back has the same size), one per boundary."""
        ends = [b for _, b in self.stage_ranges()[:-1]]
        values = np.array([self.model.layers[b - 1].output_values for b in ends], dtype=np.int64)
        return values * self.microbatch_size * self.model.bytes_per_value

    def transfer_s(self) -> np.ndarray:
        """Seconds of one transfer across each stage boundary (alpha-beta)."""
        return self.link_latency_s + self.boundary_bytes() / self.link_bandwidth_Bps

    def param_bytes(self) -> np.ndarray:
        """Bytes of parameter state per stage: parameters x ``param_copies``."""
        layers = self.model.layers
        params = np.array([sum(layers[i].num_params for i in range(a, b)) for a, b in self.stage_ranges()])
        return params.astype(np.int64) * self.model.bytes_per_value * self.param_copies

    def stash_bytes_per_microbatch(self) -> np.ndarray:
        """Bytes each stage keeps per micro-batch between its forward and its
        backward: the input of every layer it holds (plus the logits on the last stage)."""
        out = []
        for a, b in self.stage_ranges():
            values = sum(self.model.input_values_of(i) for i in range(a, b))
            if b == self.model.num_layers:
                values += self.model.layers[-1].output_values
            out.append(values)
        return np.array(out, dtype=np.int64) * self.microbatch_size * self.model.bytes_per_value


def _check_split(layers_per_stage: Any, num_layers: int) -> tuple[int, ...]:
    """``layers_per_stage`` as a tuple of counts >= 1 that add up to ``num_layers``."""
    path = "PipelineConfig.layers_per_stage"
    allowed = f"one layer count (>= 1) per stage, adding up to the model's {num_layers} layers"
    split = tuple(_COUNT(f"{path}[{s}]", n) for s, n in enumerate(_as_tuple(path, layers_per_stage, allowed)))
    if sum(split) != num_layers:
        raise InputError(path, split, allowed)
    return split


def stage_order(schedule: str, num_stages: int, num_microbatches: int, stage: int) -> list[tuple[int, int]]:
    """The order in which ``stage`` runs its passes: a list of
    ``(direction, micro-batch)`` with direction 0 = forward, 1 = backward."""
    m = num_microbatches
    schedule = OneOf(SCHEDULES)("schedule", schedule)
    if schedule == "naive":
        return [(d, j) for j in range(m) for d in (_FORWARD, _BACKWARD)]
    if schedule == "gpipe":
        return [(_FORWARD, j) for j in range(m)] + [(_BACKWARD, j) for j in reversed(range(m))]
    warmup = min(num_stages - stage - 1, m)  # 1f1b
    order = [(_FORWARD, j) for j in range(warmup)]
    for i in range(m - warmup):
        order += [(_FORWARD, warmup + i), (_BACKWARD, i)]
    return order + [(_BACKWARD, j) for j in range(m - warmup, m)]


@dataclass
class PipelineRun:
    """What :func:`simulate_pipeline` predicts for one step.

    Attributes:
        config: the simulated configuration.
        trace: per-stage timeline (compute, comm, idle), seconds from step start.
        step_time_s: wall time of the step, seconds.
        forward_s, backward_s: per-stage seconds of one micro-batch's pass.
        forward_end_s, backward_end_s: ``[stage, micro-batch]`` end times, seconds.
        bubble_fraction: share of the stages' time (``p x step_time_s``) not
            spent computing, 0..1.
        single_device_step_s: the same step on one device of the same kind,
            whole batch at once, seconds.
        stashed_microbatches: per stage, the most micro-batches whose
            activations it holds at once.
        param_bytes, activation_bytes: per-stage memory, bytes.
        single_device_bytes: memory the whole model needs on one device, bytes.
    """

    config: PipelineConfig
    trace: Trace
    step_time_s: float
    forward_s: np.ndarray
    backward_s: np.ndarray
    forward_end_s: np.ndarray
    backward_end_s: np.ndarray
    bubble_fraction: float
    single_device_step_s: float
    stashed_microbatches: np.ndarray
    param_bytes: np.ndarray
    activation_bytes: np.ndarray
    single_device_bytes: int

    @property
    def memory_bytes(self) -> np.ndarray:
        """Per-stage memory: parameter state plus peak stashed activations, bytes."""
        return self.param_bytes + self.activation_bytes

    @property
    def throughput_samples_per_s(self) -> float:
        return self.config.global_batch / self.step_time_s

    @property
    def speedup(self) -> float:
        """Single-device step time over pipelined step time."""
        return self.single_device_step_s / self.step_time_s

    @property
    def fits(self) -> np.ndarray | None:
        """Per stage, whether its memory fits ``device_memory_bytes`` (None if unknown)."""
        if self.config.device_memory_bytes is None:
            return None
        return self.memory_bytes <= self.config.device_memory_bytes

    @property
    def single_device_fits(self) -> bool | None:
        """Whether the whole model fits on one device (None if the memory is unknown)."""
        if self.config.device_memory_bytes is None:
            return None
        return bool(self.single_device_bytes <= self.config.device_memory_bytes)

    def to_result(self) -> Result:
        """The run as a predicted :class:`~distsim.results.result.Result`; ``num_replicas``
        is the number of stages (devices), and ``comm_fraction`` is the share
        of the step that free communication would save."""
        cfg = self.config
        free_comm = replace(cfg, link_latency_s=0.0, link_bandwidth_Bps=math.inf)
        step_free_s = _schedule_times(free_comm)[0] if cfg.num_stages > 1 else self.step_time_s
        return Result(
            source="predicted",
            strategy=f"pipeline_{cfg.schedule}",
            num_replicas=cfg.num_stages,
            global_batch=cfg.global_batch,
            summary=Summary(
                step_time_s=self.step_time_s,
                throughput_samples_per_s=self.throughput_samples_per_s,
                speedup=self.speedup,
                efficiency=self.speedup / cfg.num_stages,
                comm_fraction=max(0.0, 1.0 - step_free_s / self.step_time_s),
            ),
            step_times_s=np.array([self.step_time_s]),
            trace=self.trace,
            meta={
                "label": f"{cfg.schedule}, {cfg.num_stages} stages, {cfg.num_microbatches} micro-batches (predicted)",
                "layers_per_stage": ",".join(map(str, cfg.layers_per_stage)),
                "num_microbatches": str(cfg.num_microbatches),
                "bubble_fraction": repr(self.bubble_fraction),
            },
        )


def _schedule_times(cfg: PipelineConfig):
    """Run the schedule: returns ``(step_s, fwd_start, fwd_end, bwd_start,
    bwd_end, sends)``, times as ``[stage, micro-batch]`` arrays and ``sends``
    a list of ``(stage, direction, micro-batch, start_s, end_s)``.

    Each stage runs its passes in :func:`stage_order`. A pass can start when
    its stage is free and its input has arrived (and, with shared cores, when
    the processor is free: the ready pass that became ready first goes next).
    """
    p, m = cfg.num_stages, cfg.num_microbatches
    fwd_s, bwd_s = cfg.stage_times_s()
    hop_s = cfg.transfer_s()
    orders = [stage_order(cfg.schedule, p, m, s) for s in range(p)]
    start = np.full((2, p, m), np.nan)
    end = np.full((2, p, m), np.nan)
    # arrive[d, s, j]: when the input of pass (d, s, j) is on stage s.
    arrive = np.full((2, p, m), np.nan)
    arrive[_FORWARD, 0, :] = 0.0
    link_free = np.zeros((2, max(p - 1, 1)))
    sends: list[tuple[int, int, int, float, float]] = []
    stage_free = np.zeros(p)
    pos = [0] * p
    processor_free = 0.0
    ready: list[tuple[float, int]] = []  # (ready time, stage) of stages whose next pass can run

    def enqueue(s: int) -> None:
        if pos[s] < len(orders[s]):
            d, j = orders[s][pos[s]]
            if not np.isnan(arrive[d, s, j]):
                heapq.heappush(ready, (max(stage_free[s], arrive[d, s, j]), s))

    for s in range(p):
        enqueue(s)
    done = 0
    while ready:
        t_ready, s = heapq.heappop(ready)
        d, j = orders[s][pos[s]]
        t0 = max(t_ready, processor_free) if cfg.devices_share_cores else t_ready
        t1 = t0 + (fwd_s[s] if d == _FORWARD else bwd_s[s])
        start[d, s, j], end[d, s, j] = t0, t1
        stage_free[s] = t1
        processor_free = t1
        pos[s] += 1
        done += 1
        if d == _FORWARD and s == p - 1:
            arrive[_BACKWARD, s, j] = t1
        else:
            dst = s + 1 if d == _FORWARD else s - 1
            if 0 <= dst < p:
                link = min(s, dst)
                send0 = max(t1, link_free[d, link])
                send1 = send0 + hop_s[link]
                link_free[d, link] = send1
                arrive[d, dst, j] = send1
                sends.append((s, d, j, send0, send1))
                if pos[dst] < len(orders[dst]) and orders[dst][pos[dst]] == (d, j):
                    enqueue(dst)
        enqueue(s)
    if done != 2 * p * m:
        raise RuntimeError(f"pipeline schedule {cfg.schedule!r} stalled after {done} of {2 * p * m} passes")
    step_s = float(max(np.nanmax(end), max((e for *_, e in sends), default=0.0)))
    return step_s, start[0], end[0], start[1], end[1], sends


def _peak_stash(order: list[tuple[int, int]]) -> int:
    held = np.cumsum([1 if d == _FORWARD else -1 for d, _ in order])
    return int(held.max())


def _build_trace(cfg: PipelineConfig, step_s: float, fs, fe, bs, be, sends) -> Trace:
    p, m = cfg.num_stages, cfg.num_microbatches
    devices = [f"stage{s}: layers [{a},{b})" for s, (a, b) in enumerate(cfg.stage_ranges())]
    labels = [f"forward mb {j}" for j in range(m)] + [f"backward mb {j}" for j in range(m)]
    labels += [f"activations mb {j}" for j in range(m)] + [f"gradients mb {j}" for j in range(m)]
    labels.append("waiting")
    stage_idx = np.repeat(np.arange(p), m)
    mb_idx = np.tile(np.arange(m), p)
    compute_dev = np.concatenate([stage_idx, stage_idx])
    compute_start = np.concatenate([fs.ravel(), bs.ravel()])
    compute_end = np.concatenate([fe.ravel(), be.ravel()])
    compute_label = np.concatenate([mb_idx, m + mb_idx])
    # Idle: gaps between a stage's passes, and from its last pass to the end of the step.
    order = np.lexsort((compute_start, compute_dev))
    dev_sorted, s_sorted, e_sorted = compute_dev[order], compute_start[order], compute_end[order]
    first = np.r_[True, dev_sorted[1:] != dev_sorted[:-1]]
    last = np.r_[dev_sorted[1:] != dev_sorted[:-1], True]
    prev_end = np.r_[0.0, e_sorted[:-1]]
    prev_end[first] = 0.0
    gap = s_sorted > prev_end
    tail = last & (e_sorted < step_s)
    idle_dev = np.concatenate([dev_sorted[gap], dev_sorted[tail]])
    idle_start = np.concatenate([prev_end[gap], e_sorted[tail]])
    idle_end = np.concatenate([s_sorted[gap], np.full(int(tail.sum()), step_s)])
    comm = np.array([(s, d, j, a, b) for s, d, j, a, b in sends if b > a], dtype=float).reshape(-1, 5)
    comm_label = 2 * m + comm[:, 1].astype(int) * m + comm[:, 2].astype(int)
    kinds = {k: np.int8(EVENT_KINDS.index(k)) for k in ("compute", "comm", "idle")}
    n_c, n_m, n_i = len(compute_dev), len(comm), len(idle_dev)
    return Trace(
        devices=devices,
        labels=labels,
        device=np.concatenate([compute_dev, comm[:, 0], idle_dev]).astype(np.int32),
        kind=np.concatenate([np.full(n_c, kinds["compute"]), np.full(n_m, kinds["comm"]),
                             np.full(n_i, kinds["idle"])]).astype(np.int8),
        start_s=np.concatenate([compute_start, comm[:, 3], idle_start]),
        end_s=np.concatenate([compute_end, comm[:, 4], idle_end]),
        step=np.zeros(n_c + n_m + n_i, dtype=np.int64),
        label=np.concatenate([compute_label, comm_label, np.full(n_i, len(labels) - 1)]).astype(np.int32),
    )


def simulate_pipeline(config: PipelineConfig) -> PipelineRun:
    """Simulate one pipeline-parallel training step (deterministic: no randomness).

    Returns:
        A :class:`PipelineRun` with the trace and the summary numbers.
    """
    cfg = InstanceOf(PipelineConfig, "a PipelineConfig")("config", config)
    p = cfg.num_stages
    step_s, fs, fe, bs, be, sends = _schedule_times(cfg)
    fwd_s, bwd_s = cfg.stage_times_s()
    busy_s = float(np.sum(fe - fs) + np.sum(be - bs))
    stashed = np.array([_peak_stash(stage_order(cfg.schedule, p, cfg.num_microbatches, s)) for s in range(p)])
    whole = replace(cfg, layers_per_stage=(cfg.model.num_layers,), num_microbatches=1, schedule="gpipe",
                    devices_share_cores=False)
    whole_f, whole_b = whole.stage_times_s()
    single_bytes = int(whole.param_bytes()[0] + whole.stash_bytes_per_microbatch()[0])
    return PipelineRun(
        config=cfg,
        trace=_build_trace(cfg, step_s, fs, fe, bs, be, sends),
        step_time_s=step_s,
        forward_s=fwd_s,
        backward_s=bwd_s,
        forward_end_s=fe,
        backward_end_s=be,
        bubble_fraction=1.0 - busy_s / (p * step_s),
        single_device_step_s=float(whole_f[0] + whole_b[0]),
        stashed_microbatches=stashed,
        param_bytes=cfg.param_bytes(),
        activation_bytes=stashed * cfg.stash_bytes_per_microbatch(),
        single_device_bytes=single_bytes,
    )


def config_for_hardware(
    model: LayeredModel,
    layers_per_stage: Sequence[int],
    global_batch: int,
    num_microbatches: int,
    device,
    link,
    *,
    physical_cores: int | None = None,
    **options,
) -> PipelineConfig:
    """A :class:`PipelineConfig` on preset hardware.

    Args:
        device: a :class:`distsim.scenario.Device` (its ``effective_flops``
            and ``memory_bytes`` are used).
        link: a :class:`distsim.scenario.Link` between neighbouring stages
            (its message rate, :attr:`~distsim.scenario.Link.effective_Bps`:
            the wire's payload share or the hosts' network software).
        physical_cores: for logical devices that share one processor: the
            stages then share ``physical_cores`` x ``device``'s compute
            (``devices_share_cores=True``), as one device alone would use it
            all. Logical CPUs share the machine's cores (pass their number,
            ``device`` being one core); logical GPUs cut from one GPU share
            it (pass 1). ``None``: every stage is its own hardware.
        options: further :class:`PipelineConfig` fields (``schedule``,
            ``overhead_s``, ``param_copies``).
    """
    InstanceOf(Device, "a distsim.scenario.Device")("device", device)
    InstanceOf(Link, "a distsim.scenario.Link")("link", link)
    physical_cores = Optional(_COUNT, "every stage is its own hardware")("physical_cores", physical_cores)
    shared = physical_cores is not None
    return PipelineConfig(
        model=model,
        layers_per_stage=tuple(layers_per_stage),
        global_batch=global_batch,
        num_microbatches=num_microbatches,
        flops_per_s=device.effective_flops * (physical_cores if shared else 1),
        link_latency_s=link.latency_s,
        link_bandwidth_Bps=link.effective_Bps,  # payload fraction and host stack, as every other engine
        devices_share_cores=shared,
        device_memory_bytes=device.memory_bytes,
        **options,
    )


@dataclass(frozen=True)
class DataParallelEstimate:
    """The same model, batch and devices trained with synchronous data parallelism.

    Attributes:
        num_replicas: devices, each holding the whole model.
        compute_s: forward and backward of one replica's share of the batch,
            one ``overhead_s`` per pass (on shared cores: every replica's,
            one after another), seconds.
        allreduce_s: summing the gradients over the link (the collective
            ``algorithm`` as :class:`~distsim.mechanics.communication.Communication`
            prices it), not overlapped with compute, seconds.
        step_time_s: ``compute_s + allreduce_s``.
        memory_bytes: per device: all parameters x ``param_copies`` plus the
            activations of its ``global_batch / num_replicas`` examples, bytes.
        fits: whether ``memory_bytes`` fits the device (None if unknown).
    """

    num_replicas: int
    compute_s: float
    allreduce_s: float
    step_time_s: float
    memory_bytes: int
    fits: bool | None


def data_parallel_scenario(config: PipelineConfig, algorithm: str = "ring") -> Scenario:
    """``config``'s devices, model and batch as a data-parallel :class:`~distsim.scenario.Scenario`:
    MirroredStrategy with ``algorithm`` over ``num_stages`` devices of one worker.

    A device computes ``flops_per_s`` (efficiency 1; with ``devices_share_cores``
    CPU devices sharing one physical core of that speed); the link between
    devices (both links: there is one worker) carries ``link_bandwidth_Bps``
    message bytes/s with ``link_latency_s`` (payload fraction 1, no host
    stack: :func:`config_for_hardware` gives the effective rate already). A
    free link (``math.inf``) is no Scenario's: the link is at the largest
    rate a Scenario holds, and :func:`data_parallel_costs` makes it free. The
    pipeline leaves out the input pipeline, the host's per-step costs and
    the optimizer update, so the scenario has none (no input time, no
    overhead or dispatch, the largest memory bandwidth: a free update); its
    dataset is one global batch.

    Raises:
        InputError: an ``algorithm`` not in :data:`distsim.scenario.ALGORITHMS`,
            or a number a Scenario does not hold (at the config's field).
    """
    cfg = InstanceOf(PipelineConfig, "a PipelineConfig")("config", config)
    algorithm = OneOf(ALGORITHMS)("algorithm", algorithm)
    try:
        return _data_parallel_scenario(cfg, algorithm)
    except InputError as error:  # a number a Scenario bounds tighter: name the config's field it came from
        path = _CONFIG_FIELD_OF.get(error.path, error.path)
        raise InputError(path, error.value, f"{error.allowed} (data_parallel_estimate prices it as a Scenario's "
                                            f"{error.path})", problem=error.problem) from None


#: The PipelineConfig field behind each scenario field :func:`data_parallel_scenario` fills from it.
_CONFIG_FIELD_OF: dict[str, str] = {
    "Device.peak_flops": "PipelineConfig.flops_per_s",
    "Device.memory_bytes": "PipelineConfig.device_memory_bytes",
    "Link.latency_s": "PipelineConfig.link_latency_s",
    "Cluster.devices_per_worker": "PipelineConfig.layers_per_stage",
    "cluster.devices_per_worker": "PipelineConfig.layers_per_stage",
    "Workload.num_params": "PipelineConfig.model.num_params",
    "Workload.flops_per_sample": "PipelineConfig.model (forward + backward FLOP per example)",
    "Workload.bytes_per_param": "PipelineConfig.model.bytes_per_value",
}


def _data_parallel_scenario(cfg: PipelineConfig, algorithm: str) -> Scenario:
    model = cfg.model
    shared = cfg.devices_share_cores
    device = Device(name="pipeline device", kind="cpu", peak_flops=cfg.flops_per_s, efficiency=1.0,
                    memory_bandwidth_Bps=limits.MAX_BYTES_PER_S,
                    memory_bytes=limits.MAX_BYTES if cfg.device_memory_bytes is None else cfg.device_memory_bytes,
                    step_overhead_s=0.0)
    link = Link(name="pipeline link", latency_s=cfg.link_latency_s,
                bandwidth_Bps=min(cfg.link_bandwidth_Bps, limits.MAX_BYTES_PER_S))
    flops = sum(layer.forward_flops + layer.backward_flops for layer in model.layers)
    return Scenario(
        cluster=Cluster(device=device, intra_link=link, inter_link=link, num_workers=1,
                        devices_per_worker=cfg.num_stages, physical_cores=1.0 if shared else None),
        workload=Workload(name="pipeline model", num_params=model.num_params, flops_per_sample=flops,
                          num_examples=cfg.global_batch, bytes_per_param=model.bytes_per_value),
        strategy=Strategy(name="mirrored", algorithm=algorithm),
        training=Training(global_batch=cfg.global_batch, steps=1),
    )


def data_parallel_costs(config: PipelineConfig, scenario: Scenario) -> StepCosts:
    """The :class:`~distsim.mechanics.stepcosts.StepCosts` of ``scenario``
    (:func:`data_parallel_scenario` of ``config``), its links free when
    ``config``'s are (``link_bandwidth_Bps=math.inf``)."""
    free = config.link_bandwidth_Bps == math.inf
    paths = ("cluster.intra_link.bandwidth_Bps", "cluster.inter_link.bandwidth_Bps")
    return step_costs(scenario, {path: math.inf for path in paths} if free else None)


def data_parallel_estimate(config: PipelineConfig, algorithm: str = "ring") -> DataParallelEstimate:
    """What data parallelism over the same ``config.num_stages`` devices
    would cost, for a side-by-side with the pipeline.

    Priced from the :class:`~distsim.mechanics.stepcosts.StepCosts` of
    :func:`data_parallel_scenario`, as :func:`distsim.predict` prices any
    scenario: seconds per example (:func:`distsim.engines.steady.seconds_per_example`),
    replicas taking turns on shared cores (:func:`distsim.engines.steady.dispatch_wait_s`),
    and the all-reduce of the whole gradient at the link's message rate
    (:class:`~distsim.mechanics.communication.Communication`). Only
    ``overhead_s``, a cost per pass, is the pipeline's own. Memory is the
    pipeline's accounting (the layers' stashed inputs), not a StepCosts cost.

    Raises:
        InputError: ``global_batch`` not divisible by the number of devices;
            see also :func:`data_parallel_scenario`.
    """
    p = InstanceOf(PipelineConfig, "a PipelineConfig")("config", config).num_stages
    if config.global_batch % p:
        raise InputError("PipelineConfig.global_batch", config.global_batch,
                         f"a multiple of the {p} devices (data parallelism gives each the same share)")
    scenario = data_parallel_scenario(config, algorithm)
    costs = data_parallel_costs(config, scenario)
    replica_s = costs.global_batch / p * steady.seconds_per_example(costs) + 2 * config.overhead_s
    # Own hardware: the replicas compute side by side; shared cores: each waits for the ones before it.
    compute_s = float(steady.dispatch_wait_s(p, 0.0, replica_s, steady.shares_cores(costs)) + replica_s)
    with np.errstate(divide="ignore"):  # a free link: message_Bps takes 1 / (1 / inf)
        allreduce_s = float(Communication.of(scenario, plan(scenario)).time_s(costs, costs.gradient_bytes))
    local = replace(config, layers_per_stage=(config.model.num_layers,), global_batch=config.global_batch // p,
                    num_microbatches=1, schedule="gpipe")
    memory = int(local.param_bytes()[0] + local.stash_bytes_per_microbatch()[0])
    fits = None if config.device_memory_bytes is None else memory <= config.device_memory_bytes
    return DataParallelEstimate(p, compute_s, allreduce_s, compute_s + allreduce_s, memory, fits)
