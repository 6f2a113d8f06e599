"""How a synchronous data-parallel step unfolds in time.

The model, per step and per replica (all times in seconds):

* **input** (on the worker's host): the pipeline reads the examples of the
  step, ``examples x input_s_per_sample / (host_input_speed x
  input_threads)``, then copies each replica's batch to its accelerator over
  the intra-worker link (not for CPU devices). Under ``DATA`` sharding every
  worker's pipeline reads the *whole* global batch (it discards the other
  workers' share only afterwards); under ``FILE``/``OFF`` its own share. With
  prefetch the host prepares step s+1 while the devices compute step s (one
  batch ahead), otherwise input and compute alternate. With prefetch and a
  shuffle buffer, the first batch of every epoch also waits for the buffer
  to fill.
* **host dispatch**: the worker's host spends ``step_overhead_s`` once per
  step, then dispatches its replicas one after another,
  ``replica_dispatch_s`` each; replica j starts computing when its dispatch
  is done. Part of that dispatch, ``replica_variable_s``, serves the
  replica's own copy of the variables; central_storage keeps one copy, so
  it pays that part once per step (with the overhead), not per replica. A
  worker process with less than one physical core (``physical_cores < 1``:
  more localhost processes than cores) runs this single-threaded host work
  ``1 / physical_cores`` times slower.
* **compute**: forward (1/3 of ``batch x seconds_per_example``) and backward
  (2/3) split into ``num_buckets`` gradient buckets. Seconds per example is
  the workload's measured ``compute_s_per_sample`` or ``flops_per_sample /
  (peak_flops x efficiency)``. Replicas on their own hardware compute side by
  side. CPU devices that share ``physical_cores`` take turns on those cores,
  each using all of them, so N logical devices on 2 cores compute no faster
  than one device on those 2 cores. One replica's compute then hides the
  next one's dispatch: with dispatch ``d`` and a replica's compute ``q`` on
  all the cores, L replicas take ``L max(d, q) + min(d, q)`` (a two-stage
  flow shop).
* **comm**: bucket k's all-reduce starts once every replica has finished
  bucket k and bucket k-1's all-reduce is done, so it overlaps the remaining
  backward. Its duration is the alpha-beta cost of the strategy's schedule
  (:func:`distsim.mechanics.collectives.cost_model`) for ``gradient_bytes / num_buckets``.
* **update**: ``num_params x optimizer_bytes_per_param /
  memory_bandwidth_Bps``.
* **metrics**: across worker processes (multi_worker_mirrored), Keras
  all-reduces each of its ``metric_values`` scalar metric variables after
  the update, one after another: latency-bound collectives of 4 bytes.
* **stragglers**: each (step, replica) compute time is multiplied by a seeded
  factor with mean 1. With ``backup_workers = b`` the all-reduce (one bucket)
  starts when the (N - b)-th replica is done; the slower ones are cut off.

:func:`step_model` gives the deterministic steady-state step time in closed
form (vectorised; the sweep uses it), :func:`simulate` the full timeline as a
columnar :class:`~distsim.results.trace.Trace`. With deterministic compute the two
agree exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from distsim.mechanics import sharding, stragglers
from distsim.validation import InputError
from distsim.mechanics.collectives import cost_model
from distsim.scenario import Scenario, message_Bps
from distsim.mechanics.strategies import StrategyPlan, plan
from distsim.results.trace import EVENT_KINDS, Trace

#: Scenario fields the vectorised model reads (numeric; None becomes NaN).
MODEL_FIELDS: tuple[str, ...] = (
    "cluster.num_workers",
    "cluster.devices_per_worker",
    "cluster.physical_cores",
    "cluster.host_input_speed",
    "cluster.device.peak_flops",
    "cluster.device.efficiency",
    "cluster.device.memory_bandwidth_Bps",
    "cluster.device.step_overhead_s",
    "cluster.device.replica_dispatch_s",
    "cluster.device.replica_variable_s",
    "cluster.intra_link.bandwidth_Bps",
    "cluster.intra_link.latency_s",
    "cluster.inter_link.bandwidth_Bps",
    "cluster.inter_link.latency_s",
    "cluster.inter_link.request_s",
    "cluster.intra_link.payload_fraction",
    "cluster.intra_link.stack_bandwidth_Bps",
    "cluster.inter_link.payload_fraction",
    "cluster.inter_link.stack_bandwidth_Bps",
    "cluster.straggler_cores",
    "workload.num_params",
    "workload.bytes_per_param",
    "workload.flops_per_sample",
    "workload.compute_s_per_sample",
    "workload.input_s_per_sample",
    "workload.input_bytes_per_sample",
    "workload.num_examples",
    "workload.activation_bytes_per_sample",
    "cluster.device.memory_bytes",
    "training.global_batch",
    "training.drop_remainder",
    "training.num_files",
    "training.shuffle_buffer",
    "training.input_threads",
    "training.num_buckets",
    "training.optimizer_bytes_per_param",
    "training.metric_values",
)


def model_params(scenario: Scenario) -> dict[str, np.ndarray]:
    """The :data:`MODEL_FIELDS` of a scenario as 0-d float arrays."""
    out = {}
    for path in MODEL_FIELDS:
        value = scenario
        for part in path.split("."):
            value = getattr(value, part)
        out[path] = np.asarray(np.nan if value is None else float(value))
    return out


def link_Bps(p: dict, link: str) -> np.ndarray:
    """Message bytes per second over ``link`` (``"intra_link"`` or ``"inter_link"``):
    its wire rate times its payload fraction, in series with its hosts'
    network stack (:func:`distsim.scenario.message_Bps`)."""
    return message_Bps(p[f"cluster.{link}.bandwidth_Bps"], p[f"cluster.{link}.payload_fraction"],
                       p[f"cluster.{link}.stack_bandwidth_Bps"])


def _ceil_div(a, b):
    return -(-np.asarray(a) // np.asarray(b))


@dataclass
class StepParts:
    """Per-step costs of one global batch (arrays broadcast over a sweep).

    Attributes:
        replica_batch: examples on the busiest replica.
        input_s: host input time of the step on one worker, incl. the copy
            to the device.
        overhead_s: the worker host's fixed cost of the step.
        dispatch_s: from the end of that overhead until the last replica
            starts computing: its own and earlier replicas' dispatch, and on
            shared cores the earlier replicas' compute.
        forward_s, backward_s: compute pieces of the last replica.
        bucket_comm_s: all-reduce time of one bucket (0 without communication).
        num_buckets: buckets.
        update_s: optimizer update.
        metric_comm_s: the metric all-reduces after the update.
    """

    replica_batch: np.ndarray
    input_s: np.ndarray
    overhead_s: np.ndarray
    dispatch_s: np.ndarray
    forward_s: np.ndarray
    backward_s: np.ndarray
    bucket_comm_s: np.ndarray
    num_buckets: np.ndarray
    update_s: np.ndarray
    metric_comm_s: np.ndarray

    @property
    def device_s(self) -> np.ndarray:
        """Device time of the step: host work, compute, exposed all-reduce, update, metrics."""
        return (self.overhead_s + self.dispatch_s + self.forward_s + self.backward_s + self.exposed_comm_s
                + self.update_s + self.metric_comm_s)

    @property
    def exposed_comm_s(self) -> np.ndarray:
        """All-reduce time not hidden behind the backward pass.

        Bucket k is ready at ``(k+1)/K`` of the backward; the chain of
        all-reduces ends at ``max_k(ready_k + (K-k) c)``, which is attained at
        k = 0 or k = K-1.
        """
        k, c, bwd = self.num_buckets, self.bucket_comm_s, self.backward_s
        chain_end = np.maximum(bwd / k + k * c, bwd + c)
        return np.where(c > 0, chain_end - bwd, 0.0)


def shares_cores(p: dict, device_kind: str) -> np.ndarray:
    """Whether a worker's replicas share its physical cores (CPU devices with
    ``physical_cores`` set) rather than each having its own hardware."""
    return (device_kind == "cpu") & ~np.isnan(p["cluster.physical_cores"])


def _worker_cores(p: dict, device_kind: str) -> np.ndarray:
    """Physical cores of a worker whose replicas share them; 1 (one device's own hardware) otherwise."""
    return np.where(shares_cores(p, device_kind), p["cluster.physical_cores"], 1.0)


def seconds_per_example(p: dict, device_kind: str) -> np.ndarray:
    """Compute seconds per example on one replica running alone on its
    hardware: all of the worker's cores for CPU devices that share them."""
    measured = p["workload.compute_s_per_sample"]
    derived = p["workload.flops_per_sample"] / (p["cluster.device.peak_flops"] * p["cluster.device.efficiency"])
    return np.where(np.isnan(measured), derived, measured) / _worker_cores(p, device_kind)


def host_slowdown(p: dict, device_kind: str) -> np.ndarray:
    """How much slower a worker's single-threaded host work runs: ``1 /
    physical_cores`` when its process has less than one core, else 1."""
    return 1.0 / np.minimum(_worker_cores(p, device_kind), 1.0)


def straggler_params(p: dict) -> dict:
    """``p`` for the last worker: its cores are ``cluster.straggler_cores``
    where one is set (a CPU-quota straggler), else unchanged."""
    slow = dict(p)
    straggler = p["cluster.straggler_cores"]
    slow["cluster.physical_cores"] = np.where(np.isnan(straggler), p["cluster.physical_cores"], straggler)
    return slow


def host_costs_s(p: dict, plan_: StrategyPlan, device_kind: str) -> tuple[np.ndarray, np.ndarray]:
    """The worker host's seconds per step: (fixed overhead, dispatch of each replica).

    Both run ``host_slowdown`` times slower on less than one core. A strategy
    with one central copy of the variables (central_storage) moves the
    variables' share of the dispatch from every replica to the overhead.
    """
    slow = host_slowdown(p, device_kind)
    once = p["cluster.device.replica_variable_s"] if plan_.strategy == "central_storage" else 0.0
    overhead = (p["cluster.device.step_overhead_s"] + once) * slow
    dispatch = (p["cluster.device.replica_dispatch_s"] - once) * slow
    return overhead, dispatch


def dispatch_wait_s(local, dispatch, compute, shared) -> np.ndarray:
    """Seconds from the end of the host's fixed overhead until the last of
    ``local`` replicas starts computing, each replica taking ``dispatch`` to
    dispatch and ``compute`` to compute.

    Own hardware: the last starts after all dispatches, ``L d``. Shared cores
    (replicas take turns): the flow shop ends at ``L max(d, q) + min(d, q)``,
    and the last replica's own compute ``q`` is its final part.
    """
    flow_end = local * np.maximum(dispatch, compute) + np.minimum(dispatch, compute)
    return np.where(shared, flow_end - compute, local * dispatch)


def step_parts(p: dict, global_examples, plan_: StrategyPlan, device_kind: str, shard_policy: str,
               comm_s_per_bucket, metric_comm_s=0.0) -> StepParts:
    """Costs of one step that carries ``global_examples`` examples."""
    workers = p["cluster.num_workers"]
    local = p["cluster.devices_per_worker"]
    replicas = workers * local
    b = _ceil_div(global_examples, replicas).astype(float)
    compute = b * seconds_per_example(p, device_kind)
    overhead, dispatch = host_costs_s(p, plan_, device_kind)
    read = np.where((workers == 1) | (shard_policy == "DATA"), global_examples, _ceil_div(global_examples, workers))
    host_s = read * p["workload.input_s_per_sample"] / (p["cluster.host_input_speed"] * p["training.input_threads"])
    copy_s = 0.0 if device_kind == "cpu" else b * p["workload.input_bytes_per_sample"] / link_Bps(p, "intra_link")
    update = p["workload.num_params"] * p["training.optimizer_bytes_per_param"] / p["cluster.device.memory_bandwidth_Bps"]
    return StepParts(
        replica_batch=b,
        input_s=host_s + copy_s,
        overhead_s=overhead * np.ones_like(b),
        dispatch_s=dispatch_wait_s(local, dispatch, compute, shares_cores(p, device_kind)) * np.ones_like(b),
        forward_s=compute / 3,
        backward_s=compute * 2 / 3,
        bucket_comm_s=np.asarray(comm_s_per_bucket, dtype=float) * np.ones_like(b),
        num_buckets=p["training.num_buckets"] * np.ones_like(b),
        update_s=update * np.ones_like(b),
        metric_comm_s=np.asarray(metric_comm_s, dtype=float) * np.ones_like(b),
    )


def metric_comm_s(p: dict, plan_: StrategyPlan, num_replicas: int) -> np.ndarray:
    """Seconds of the per-step metric all-reduces: ``metric_values`` 4-byte
    all-reduces one after another with the gradient's schedule, when the
    replicas span several worker processes (multi_worker_mirrored); 0
    otherwise."""
    one_process = np.all(p["cluster.num_workers"] == 1)
    if plan_.strategy != "multi_worker_mirrored" or plan_.algorithm is None or one_process:
        return np.zeros_like(p["training.metric_values"])
    model = cost_model(plan_.algorithm, int(num_replicas), **plan_.options)
    one = model.time_s(4.0, p["cluster.intra_link.latency_s"], link_Bps(p, "intra_link"),
                       p["cluster.inter_link.latency_s"], link_Bps(p, "inter_link"))
    return p["training.metric_values"] * one


def bucket_comm_s(p: dict, plan_: StrategyPlan, num_replicas: int) -> np.ndarray:
    """All-reduce seconds of one gradient bucket (0 without communication)."""
    if plan_.algorithm is None or num_replicas == 1 and plan_.algorithm != "parameter_server":
        return np.zeros_like(p["training.num_buckets"])
    model = cost_model(plan_.algorithm, int(num_replicas), **plan_.options)
    bucket_bytes = p["workload.num_params"] * p["workload.bytes_per_param"] / p["training.num_buckets"]
    return model.time_s(
        bucket_bytes,
        p["cluster.intra_link.latency_s"],
        link_Bps(p, "intra_link"),
        p["cluster.inter_link.latency_s"],
        link_Bps(p, "inter_link"),
    )


def step_time_s(parts: StepParts, prefetch) -> np.ndarray:
    """Steady-state seconds per step: with prefetch the slower of host input
    and device work, without it their sum."""
    return np.where(prefetch, np.maximum(parts.input_s, parts.device_s), parts.input_s + parts.device_s)


def fill_s(p: dict, prefetch, shard_policy: str) -> np.ndarray:
    """Seconds the first batch of an epoch waits for the shuffle buffer to
    fill (only exposed with prefetch; without it those reads are part of
    the per-step input time). A worker's buffer holds at most its stream:
    the whole dataset under DATA and OFF, its files under FILE."""
    workers = int(np.unique(p["cluster.num_workers"]).item())
    if shard_policy == "FILE":
        stream = sharding.stream_lengths(p["workload.num_examples"], workers, shard_policy,
                                         p["training.num_files"]).max(axis=0).reshape(np.shape(p["workload.num_examples"]))
    else:
        stream = p["workload.num_examples"]
    reads = np.minimum(p["training.shuffle_buffer"], stream)
    t = reads * p["workload.input_s_per_sample"] / (p["cluster.host_input_speed"] * p["training.input_threads"])
    return np.where(prefetch, t, 0.0)


def epoch_plan(p: dict, shard_policy: str) -> sharding.Epoch:
    """The epoch's steps, examples and final-step size (:func:`distsim.mechanics.sharding.epoch`)."""
    workers = int(np.unique(p["cluster.num_workers"]).item())
    local = int(np.unique(p["cluster.devices_per_worker"]).item())
    files = p["training.num_files"] if shard_policy == "FILE" else None
    try:
        shape = sharding.epoch(p["workload.num_examples"], p["training.global_batch"], workers, local,
                               p["training.drop_remainder"] > 0, shard_policy, files)
    except InputError as exc:
        raise exc.rebased("num_workers", "cluster.num_workers") from None
    empty = np.asarray(shape.steps == 0)
    if empty.any():
        batch = np.broadcast_to(p["training.global_batch"], empty.shape)[empty].ravel()[0]
        raise InputError("training.global_batch", int(batch), "at most the examples of the longest worker's stream "
                         f"under {shard_policy} sharding when drop_remainder is true (otherwise an epoch has no step)")
    return shape


@dataclass
class ModelOutput:
    """Deterministic predictions of :func:`step_model` (arrays).

    Attributes:
        step_time_s: seconds per full step.
        exposed_comm_s: all-reduce seconds per step not hidden by the backward pass.
        epoch_time_s: seconds per epoch (shuffle fill, full steps, final step).
        steps_per_epoch: steps in one epoch.
        throughput_samples_per_s: examples per second in a full step.
        baseline_throughput_samples_per_s: one device of the same kind running
            one replica's batch (weak scaling's baseline), examples/s.
        strong_baseline_throughput_samples_per_s: one device running the
            whole global batch (strong scaling's baseline), examples/s.
    """

    step_time_s: np.ndarray
    exposed_comm_s: np.ndarray
    epoch_time_s: np.ndarray
    steps_per_epoch: np.ndarray
    throughput_samples_per_s: np.ndarray
    baseline_throughput_samples_per_s: np.ndarray
    strong_baseline_throughput_samples_per_s: np.ndarray

    @property
    def speedup(self) -> np.ndarray:
        """Weak scaling: throughput over one device running one replica's batch."""
        return self.throughput_samples_per_s / self.baseline_throughput_samples_per_s

    @property
    def strong_speedup(self) -> np.ndarray:
        """Strong scaling: throughput over one device running the global batch."""
        return self.throughput_samples_per_s / self.strong_baseline_throughput_samples_per_s


def step_model(p: dict, plan_: StrategyPlan, device_kind: str, shard_policy: str) -> ModelOutput:
    """Closed-form steady-state step and epoch times for every entry of the
    (broadcast) arrays in ``p``. ``cluster.num_workers`` and
    ``cluster.devices_per_worker`` must be uniform here (the sweep groups by
    them), because the collective's schedule depends on them."""
    replicas = int(np.unique(p["cluster.num_workers"] * p["cluster.devices_per_worker"]).item())
    comm = bucket_comm_s(p, plan_, replicas)
    metrics = metric_comm_s(p, plan_, replicas)
    batch = p["training.global_batch"]
    # Every worker waits for the slowest one (the straggler, when there is one) at the all-reduce.
    slowest = straggler_params(p)
    parts = step_parts(slowest, batch, plan_, device_kind, shard_policy, comm, metrics)
    step = step_time_s(parts, plan_.prefetch)
    shape = epoch_plan(p, shard_policy)
    last_parts = step_parts(slowest, shape.last_examples, plan_, device_kind, shard_policy, comm, metrics)
    epoch = fill_s(p, plan_.prefetch, shard_policy) + (shape.steps - 1) * step + step_time_s(last_parts, plan_.prefetch)
    return ModelOutput(
        step_time_s=step,
        exposed_comm_s=parts.exposed_comm_s,
        epoch_time_s=epoch,
        steps_per_epoch=shape.steps,
        throughput_samples_per_s=batch / step,
        baseline_throughput_samples_per_s=_one_device_throughput(p, parts.replica_batch, plan_, device_kind, shard_policy),
        strong_baseline_throughput_samples_per_s=_one_device_throughput(p, batch, plan_, device_kind, shard_policy),
    )


def _one_device_throughput(p: dict, batch, plan_: StrategyPlan, device_kind: str, shard_policy: str) -> np.ndarray:
    """Examples/s of one device of the same kind on the same host running
    ``batch`` examples per step through the same input pipeline."""
    one = dict(p)
    one["cluster.num_workers"] = np.ones_like(p["cluster.num_workers"])
    one["cluster.devices_per_worker"] = np.ones_like(p["cluster.devices_per_worker"])
    one["training.global_batch"] = batch
    base = step_parts(one, batch, plan_, device_kind, shard_policy, 0.0)
    return batch / step_time_s(base, plan_.prefetch)


# ------------------------------------------------------------------ timeline


@dataclass
class Timeline:
    """What :func:`simulate` produced.

    Attributes:
        trace: every event (columnar).
        step_times_s: wall time of each step (last replica's update end minus
            the previous one's).
        exposed_comm_s: all-reduce time after the last replica's backward, per step.
        global_examples: examples in each simulated step.
        epoch_start: whether each step starts an epoch.
    """

    trace: Trace
    step_times_s: np.ndarray
    exposed_comm_s: np.ndarray
    global_examples: np.ndarray
    epoch_start: np.ndarray


def _step_sizes(scenario: Scenario, p: dict) -> tuple[np.ndarray, np.ndarray]:
    """Global examples in each simulated step (the epoch's sequence: full
    steps, then its final step; cycled), and which steps open an epoch."""
    t = scenario.training
    shape = epoch_plan(p, t.shard_policy)
    per_epoch, last = int(shape.steps), int(shape.last_examples)
    position = np.arange(t.steps) % per_epoch
    return np.where(position == per_epoch - 1, last, t.global_batch), position == 0


class _Columns:
    """Collects trace events as arrays (no per-event Python objects)."""

    def __init__(self) -> None:
        self.labels: list[str] = []
        self.parts: list[tuple[np.ndarray, ...]] = []

    def add(self, device, kind: str, start, end, step, label: str, keep=None) -> None:
        device, start, end, step = (np.asarray(x).ravel() for x in np.broadcast_arrays(device, start, end, step))
        mask = end > start if keep is None else np.asarray(keep).ravel() & (end > start)
        if label not in self.labels:
            self.labels.append(label)
        lab = self.labels.index(label)
        n = int(mask.sum())
        self.parts.append((device[mask], np.full(n, EVENT_KINDS.index(kind), np.int8), start[mask], end[mask],
                           step[mask], np.full(n, lab, np.int32)))

    def trace(self, devices: list[str]) -> Trace:
        cols = [np.concatenate(c) if self.parts else np.zeros(0) for c in zip(*self.parts)]
        return Trace(devices=devices, labels=self.labels, device=cols[0].astype(np.int32),
                     kind=cols[1].astype(np.int8), start_s=cols[2].astype(float), end_s=cols[3].astype(float),
                     step=cols[4].astype(np.int64), label=cols[5].astype(np.int32))


def simulate(scenario: Scenario) -> Timeline:
    """Simulate ``training.steps`` synchronous steps event by event.

    Returns the per-device trace (tracks ``w<i>/input`` for each host,
    ``w<i>/r<j>`` for each replica's compute and ``w<i>/r<j>/comm`` for its
    all-reduce stream) and the per-step times.
    """
    plan_ = plan(scenario)
    if plan_.mode != "sync":
        raise ValueError(f"strategy mode={plan_.mode!r}; simulate() handles 'sync' (use distsim.predict for async)")
    c, t = scenario.cluster, scenario.training
    workers, local = c.num_workers, c.devices_per_worker
    replicas = workers * local
    p = model_params(scenario)
    kind = c.device.kind
    sizes, epoch_start = _step_sizes(scenario, p)
    n_steps = len(sizes)
    k_buckets = 1 if t.backup_workers else t.num_buckets
    p_buckets = dict(p, **{"training.num_buckets": np.asarray(float(k_buckets))})
    comm = float(bucket_comm_s(p_buckets, plan_, replicas))
    # Per worker: the last one may be a straggler with fewer cores.
    slow = straggler_params(p)
    per_example_w = np.array([float(seconds_per_example(p, kind))] * (workers - 1)
                             + [float(seconds_per_example(slow, kind))])
    host_w = np.array([[float(x) for x in host_costs_s(p, plan_, kind)]] * (workers - 1)
                      + [[float(x) for x in host_costs_s(slow, plan_, kind)]])
    shared = bool(shares_cores(p, kind))
    metrics = float(metric_comm_s(p, plan_, replicas))
    update = float(p["workload.num_params"] * p["training.optimizer_bytes_per_param"] / p["cluster.device.memory_bandwidth_Bps"])
    fill = float(fill_s(p, plan_.prefetch, t.shard_policy))
    rng = np.random.default_rng(t.seed)
    factor = stragglers.factors(rng, t.compute_distribution, (n_steps, replicas), t.compute_sigma)
    # Per-step, per-replica batch sizes and per-worker input times.
    rep_batch = np.array([sharding.replica_batch_sizes(int(g), replicas) for g in sizes], dtype=float)
    input_s = np.empty((n_steps, workers))
    for s, g in enumerate(sizes):
        parts = step_parts(p, float(g), plan_, kind, t.shard_policy, comm)
        input_s[s] = float(parts.input_s)
    input_s += np.where(epoch_start, fill, 0.0)[:, None]
    aggregate = replicas - t.backup_workers
    worker_of = np.repeat(np.arange(workers), local)
    local_index = np.tile(np.arange(local), workers)
    per_example = per_example_w[worker_of]
    overhead, dispatch = host_w[worker_of, 0], host_w[worker_of, 1]

    # Outputs, shape (steps, replicas) unless noted.
    in_start = np.zeros((n_steps, workers))
    in_end = np.zeros((n_steps, workers))
    host_start = np.zeros((n_steps, workers))
    disp_end = np.zeros((n_steps, replicas))
    c_start = np.zeros((n_steps, replicas))
    fwd_end = np.zeros((n_steps, replicas))
    ready = np.zeros((n_steps, k_buckets, replicas))
    comm_start = np.zeros((n_steps, k_buckets))
    comm_end = np.zeros((n_steps, k_buckets))
    upd_start = np.zeros((n_steps, replicas))
    upd_end = np.zeros((n_steps, replicas))
    step_end = np.zeros(n_steps)
    dev_free = np.zeros(replicas)
    prev_in_end = np.zeros(workers)
    prev_step_end = 0.0
    prev_host_start = np.zeros(workers)
    fractions = (np.arange(k_buckets) + 1) / k_buckets
    for s in range(n_steps):
        gate = prev_host_start if plan_.prefetch else np.full(workers, prev_step_end)
        in_start[s] = np.maximum(prev_in_end, gate if s else 0.0)
        in_end[s] = in_start[s] + input_s[s]
        host_start[s] = np.maximum(in_end[s], dev_free.reshape(workers, local).max(axis=1))
        disp_end[s] = host_start[s][worker_of] + overhead + (local_index + 1) * dispatch
        work = rep_batch[s] * per_example * factor[s]
        if shared:  # the worker's replicas take turns on its cores, in dispatch order
            turn = disp_end[s].reshape(workers, local).copy()
            busy = work.reshape(workers, local)
            for j in range(1, local):
                turn[:, j] = np.maximum(turn[:, j], turn[:, j - 1] + busy[:, j - 1])
            c_start[s] = turn.ravel()
        else:
            c_start[s] = disp_end[s]
        fwd_end[s] = c_start[s] + work / 3
        ready[s] = fwd_end[s][None, :] + fractions[:, None] * (2 * work / 3)[None, :]
        if comm > 0:
            if aggregate < replicas:
                gather = np.partition(ready[s], aggregate - 1, axis=1)[:, aggregate - 1]
                ready[s] = np.minimum(ready[s], gather[:, None])  # stragglers are cut off
            else:
                gather = ready[s].max(axis=1)
            end = 0.0
            for k in range(k_buckets):
                comm_start[s, k] = max(gather[k], end)
                end = comm_end[s, k] = comm_start[s, k] + comm
            upd_start[s] = end
        else:
            upd_start[s] = ready[s, -1]
        upd_end[s] = upd_start[s] + update
        step_end[s] = upd_end[s].max() + metrics  # the metric all-reduces wait for every replica
        dev_free = np.full(replicas, step_end[s]) if metrics > 0 else upd_end[s]
        prev_in_end = in_end[s]
        prev_host_start = host_start[s]  # the step took its batch: the next one may be read
        prev_step_end = step_end[s]

    step_times = np.diff(np.concatenate([[0.0], step_end]))
    exposed = np.where(comm > 0, comm_end[:, -1] - ready[:, -1, :].max(axis=1), 0.0)

    devices = [f"w{w}/input" for w in range(workers)]
    devices += [f"w{w}/r{r}" for w in range(workers) for r in range(local)]
    devices += [f"w{w}/r{r}/comm" for w in range(workers) for r in range(local)]
    host_dev = np.arange(workers)[None, :]
    rep_dev = workers + np.arange(replicas)[None, :]
    comm_dev = workers + replicas + np.arange(replicas)[None, :]
    step_col = np.arange(n_steps)[:, None]
    cols = _Columns()
    cols.add(host_dev, "input", in_start, in_end, step_col, "input pipeline")
    free = np.where(metrics > 0, step_end[:, None], upd_end)
    prev_free = np.vstack([np.zeros((1, replicas)), free[:-1]])
    host_begin = host_start[:, worker_of]
    cols.add(rep_dev, "idle", prev_free, host_begin, step_col, "wait for input")
    cols.add(rep_dev, "idle", host_begin, disp_end, step_col, "host overhead + dispatch")
    cols.add(rep_dev, "idle", disp_end, c_start, step_col, "wait for shared cores")
    cols.add(rep_dev, "compute", c_start, fwd_end, step_col, "forward")
    starts = np.concatenate([fwd_end[:, None, :], ready[:, :-1, :]], axis=1)
    for k in range(k_buckets):
        cols.add(rep_dev, "compute", starts[:, k], ready[:, k], step_col, f"backward {k}" if k_buckets > 1 else "backward")
    cols.add(rep_dev, "idle", ready[:, -1], upd_start, step_col, "wait for all-reduce")
    for k in range(k_buckets):
        cols.add(comm_dev, "comm", comm_start[:, k, None] * np.ones((1, replicas)), comm_end[:, k, None] * np.ones((1, replicas)),
                 step_col, f"all-reduce {k}" if k_buckets > 1 else "all-reduce")
    cols.add(rep_dev, "update", upd_start, upd_end, step_col, "update")
    if metrics > 0:
        cols.add(comm_dev, "comm", upd_end.max(axis=1)[:, None] * np.ones((1, replicas)),
                 step_end[:, None] * np.ones((1, replicas)), step_col, "metric all-reduces")
    return Timeline(trace=cols.trace(devices), step_times_s=step_times, exposed_comm_s=exposed,
                    global_examples=sizes, epoch_start=epoch_start)
