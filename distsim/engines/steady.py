"""The synchronous step in closed form: steady-state step and epoch times.

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
  (2/3). Seconds per example is the workload's measured
  ``compute_s_per_sample`` or ``flops_per_sample / (peak_flops x
  efficiency)``. Replicas on their own hardware compute side by side. CPU
  devices that share ``physical_cores`` take turns on those cores, each
  using all of them, so N logical devices on 2 cores compute no faster than
  one device on those 2 cores. The host's dispatch needs those cores too,
  so dispatch and compute take turns, replica after replica: with dispatch
  ``d`` and a replica's compute ``q`` on all the cores, L replicas take
  ``L (d + q)``. (A flow shop, where one replica's compute hides the next
  one's dispatch, ``L max(d, q) + min(d, q)``, is refuted on this machine:
  ``benchmarks/bench_dispatch_overlap.py``, ``data/measurements/README.md``.)
* **comm**: the gradient travels as the collectives of
  :mod:`distsim.mechanics.gradients` (equal buckets, one per tensor, TF2
  packs or Horovod fusion buffers), one at a time, each starting once every
  replica has produced its tensors and the previous one is done, so they
  overlap the rest of the backward pass. Each costs the strategy's
  collective for its bytes on the scenario's hardware
  (:class:`distsim.mechanics.communication.Communication`).
* **exposed communication** of a step: from the end of the last backward
  pass of any replica (with backup workers, of those the step sums) until
  the last gradient collective (and a parameter server's pull) ends: every
  replica waits for the gradient and none computes. Collectives that run
  while any replica still computes are hidden. With replicas dispatched one
  after another, that last backward pass need not be the last-dispatched
  replica's: an earlier replica with a larger batch may end later, while
  the later one's first tensors start the collectives and so set their end.
  ``comm_fraction`` is the run's exposed communication over its total time.
* **update**: ``num_params x optimizer_bytes_per_param /
  memory_bandwidth_Bps``.
* **metrics**: across worker processes (multi_worker_mirrored), Keras
  all-reduces each of its ``metric_values`` scalar metric variables after
  the update, one after another: latency-bound collectives of 4 bytes.

:func:`step_model` gives the deterministic steady-state step time and the
run's total time (:func:`run_time_s`: ``training.steps`` step-to-step
intervals, every epoch's fill and final step included, the one time that
throughput, the mean step and the epoch are defined from), vectorised over
NumPy arrays of the numeric fields (the sweep uses it);
:mod:`distsim.engines.timeline` simulates the same model step by step with
stragglers. With deterministic compute the two agree exactly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from distsim.mechanics import gradients, sharding
from distsim.mechanics.communication import Communication
from distsim.mechanics.stepcosts import StepCosts, step_costs
from distsim.mechanics.strategies import StrategyPlan, plan
from distsim.scenario import Scenario
from distsim.validation import InputError

def ceil_div(a, b):
    return -(-np.asarray(a) // np.asarray(b))


# ------------------------------------------------------------------ communication


@dataclass(frozen=True)
class Collectives:
    """The gradient's collectives in one step of a scenario.

    Attributes:
        comm: prices one collective.
        training: the scenario's training knobs (grouping and its settings).
        stream: the gradient tensors in backward order.
        gradient_bytes: the scenario's gradient bytes (cut points of packs
            and fusion buffers).
        backup_workers: whether the step aggregates only the first replicas
            (then the whole gradient is one collective).
    """

    comm: Communication
    training: object
    stream: gradients.TensorStream
    gradient_bytes: float
    backup_workers: bool = False

    @classmethod
    def of(cls, scenario: Scenario, plan_: StrategyPlan | None = None) -> "Collectives | None":
        """None when the strategy sums no gradients (one replica, or async)."""
        plan_ = plan_ or plan(scenario)
        n = scenario.num_replicas
        if plan_.mode == "async" or plan_.algorithm is None or n == 1 and plan_.algorithm != "parameter_server":
            return None
        return cls(Communication.of(scenario, plan_), scenario.training, gradients.tensor_stream(scenario.workload),
                   float(scenario.workload.gradient_bytes), scenario.training.backup_workers > 0)

    def duration_s(self, p: StepCosts, message_bytes) -> np.ndarray:
        """Seconds of one collective's part that the gradients wait for."""
        return self.comm.push_s(p, message_bytes)

    def pull_s(self, p: StepCosts) -> np.ndarray:
        """A parameter server's pull of all variables after the step's pushes (0 otherwise)."""
        return self.comm.pull_s(p, p.gradient_bytes)

    @property
    def fused(self) -> bool:
        """Whether the grouping depends on the step's timing (Horovod fusion)."""
        return self.training.grouping == "fusion" and not self.backup_workers

    @property
    def sharded(self) -> bool:
        """TF1 graph-mode parameter servers: one transfer per whole variable
        to its own PS task (see :func:`distsim.mechanics.communication.sharded_ps_exchange`)."""
        return self.comm.two_level_ps and self.training.grouping == "per_tensor" and not self.backup_workers

    def sharded_exchange_s(self, p: StepCosts, launch_s: list):
        """(end of the last push, the pull after it) for tensors ready at ``launch_s``."""
        return self.comm.sharded_exchange_s(p, launch_s, self.stream.share, self.stream.share[::-1],
                                            self.gradient_bytes)

    def static_groups(self) -> gradients.Groups:
        """The collectives when they do not depend on timing."""
        if self.backup_workers:
            return gradients.Groups(np.ones(1), np.ones(1))
        return gradients.static_groups(self.stream, self.training, self.gradient_bytes)

    def fused_groups(self, ready_s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Horovod's buffers for tensors ready at ``ready_s`` after the first tick."""
        t = self.training
        return gradients.fusion_groups(ready_s, self.stream.share, self.gradient_bytes, t.fusion_cycle_s,
                                       t.fusion_threshold_bytes)

    def chain_s(self, p: StepCosts, backward_s) -> np.ndarray:
        """Seconds from the start of the backward pass until the last
        collective ends, with every replica's backward taking ``backward_s``
        (arrays broadcast over a sweep), for collectives whose grouping does
        not depend on timing (fused buffers: :meth:`fused_chain_end_s`)."""
        grad = p.gradient_bytes
        bwd = np.asarray(backward_s, dtype=float)
        if self.sharded:
            push_end, pull = self.sharded_exchange_s(p, [r * bwd for r in self.stream.ready])
            return push_end + pull
        pull = self.pull_s(p)
        if self.training.grouping == "buckets" or self.backup_workers:
            # Equal buckets: max_k((k+1)/K bwd + (K-k) c) is attained at k = 0 or K-1.
            k = 1 if self.backup_workers else self.training.num_buckets
            c = self.duration_s(p, grad / k)
            return np.maximum(bwd / k + k * c, bwd + c) + pull
        groups = self.static_groups()
        return self._chain_end(p, groups.ready, bwd, groups.share) + pull

    def fused_chain_end_s(self, p: StepCosts, forward_ends: list, backwards: list) -> np.ndarray:
        """When the last fused collective (and a PS's pull) ends, for replicas
        whose backward passes start at ``forward_ends`` and last ``backwards``
        (one entry per replica, arrays broadcast over a sweep). As in the
        timeline, a tensor is ready once every replica has it, and Horovod's
        cycle ticks from the start of the last backward pass: the buffers
        follow the merged readiness, not any one replica's (an empty replica
        is ready at once, yet waits for the others)."""
        first_tick = np.maximum.reduce([np.asarray(f, dtype=float) for f in forward_ends])
        n = len(backwards)
        shape = np.broadcast_shapes(*(np.shape(x) for x in (*forward_ends, *backwards)), *_shapes(p))
        if not shape:
            launch, share = self._merged_groups([f - first_tick for f in forward_ends], backwards)
            return first_tick + self._chain_end(p, launch, 1.0, share) + self.pull_s(p)
        keys = [np.broadcast_to(x, shape).reshape(-1) for x in [f - first_tick for f in forward_ends] + list(backwards)]
        unique, inverse = np.unique(np.stack(keys, axis=-1), axis=0, return_inverse=True)
        inverse = inverse.reshape(shape)
        out = np.empty(shape)
        for u, key in enumerate(unique):  # the buffers depend on the replicas' timing
            rows = inverse == u
            launch, share = self._merged_groups(key[:n], key[n:])
            q = p.rows(shape, rows)
            out[rows] = self._chain_end(q, launch, 1.0, share) + self.pull_s(q)
        return first_tick + out

    def _merged_groups(self, offsets, lengths) -> tuple[np.ndarray, np.ndarray]:
        """Horovod's buffers when each tensor is ready at the latest of the
        replicas' ``offset + ready x length`` (seconds after the first tick)."""
        ready = np.max(np.reshape(offsets, (-1, 1)) + np.reshape(lengths, (-1, 1)) * self.stream.ready[None, :], axis=0)
        return self.fused_groups(ready)

    def _chain_end(self, p: StepCosts, ready, backward_s, share) -> np.ndarray:
        """:func:`~distsim.mechanics.gradients.serial_chain_end` of collectives of ``share`` of the gradient
        each, launched at ``ready x backward_s`` (``ready``, ``share``: one entry per collective). The
        collectives are priced and chained in one NumPy call each (a leading axis of collectives) while
        those arrays stay under :data:`_STACKED_VALUES` values, else one collective at a time."""
        grad = p.gradient_bytes
        rows = np.broadcast_shapes(*_shapes(p))
        lead = (-1,) + (1,) * max(len(rows), np.ndim(backward_s))
        if len(share) * math.prod(rows) <= _STACKED_VALUES:
            durations = self.duration_s(p, np.reshape(share, lead) * grad)
        else:
            durations = [self.duration_s(p, s * grad) for s in share]
        if len(ready) * math.prod(np.broadcast_shapes(rows, np.shape(backward_s))) <= _STACKED_VALUES:
            return gradients.serial_chain_end(np.reshape(ready, lead) * backward_s, durations)
        return gradients.serial_chain_end([r * backward_s for r in ready], durations)


#: Most values in one stacked array of :meth:`Collectives._chain_end` (32 MB of float64).
_STACKED_VALUES = 2**22


def _shapes(p: StepCosts) -> list[tuple[int, ...]]:
    """The shapes of ``p``'s numeric fields."""
    return [np.shape(v) for v in p.numeric().values()]


def metric_comm_s(p: StepCosts, comm: Communication) -> np.ndarray:
    """Seconds of the per-step metric all-reduces: ``metric_values`` 4-byte
    all-reduces one after another with the gradient's schedule, when the
    replicas span several worker processes (multi_worker_mirrored); 0
    otherwise."""
    one_process = np.all(p.num_workers == 1)
    if comm.plan.strategy != "multi_worker_mirrored" or comm.plan.algorithm is None or one_process:
        return np.zeros_like(p.metric_values)
    return p.metric_values * comm.time_s(p, 4.0)


# ------------------------------------------------------------------ host and compute


@dataclass
class StepParts:
    """Per-step costs of one global batch (arrays broadcast over a sweep).

    Attributes:
        replica_batch: examples on the busiest replica.
        input_s: host input time of the step on one worker, incl. the copy
            to the device.
        overhead_s: the worker host's fixed cost of the step.
        dispatch_s: from the end of that overhead until the step's replica
            (:func:`_step_replica`: the last to finish its backward pass
            when the step communicates, else the one that ends the step)
            starts computing: its own and earlier replicas' dispatch, and
            on shared cores the earlier replicas' compute.
        forward_s, backward_s: compute pieces of that replica.
        comm_chain_s: from the start of that replica's backward pass until
            the last gradient collective ends (0 without communication).
        update_s: optimizer update.
        metric_comm_s: the metric all-reduces after the update.
        host_dispatch_s: the host's dispatch of all its replicas; the step
            lasts at least that long after the overhead (it matters when
            backup workers end the step's compute before the last dispatch).
    """

    replica_batch: np.ndarray
    input_s: np.ndarray
    overhead_s: np.ndarray
    dispatch_s: np.ndarray
    forward_s: np.ndarray
    backward_s: np.ndarray
    comm_chain_s: np.ndarray
    update_s: np.ndarray
    metric_comm_s: np.ndarray
    host_dispatch_s: np.ndarray | float = 0.0

    @property
    def device_s(self) -> np.ndarray:
        """Device time of the step: host work, compute, exposed all-reduce, update, metrics."""
        replica = self.dispatch_s + self.forward_s + self.backward_s + self.exposed_comm_s
        return self.overhead_s + np.maximum(replica, self.host_dispatch_s) + self.update_s + self.metric_comm_s

    @property
    def exposed_comm_s(self) -> np.ndarray:
        """Gradient communication not hidden behind the backward pass: after
        the last backward pass of any replica (the module docstring)."""
        return np.where(self.comm_chain_s > 0, np.maximum(self.comm_chain_s - self.backward_s, 0.0), 0.0)


def shares_cores(p: StepCosts) -> np.ndarray:
    """Whether a worker's replicas share its physical cores (CPU devices with
    ``physical_cores`` set) rather than each having its own hardware."""
    return (p.device_kind == "cpu") & ~np.isnan(p.physical_cores)


def _worker_cores(p: StepCosts) -> np.ndarray:
    """Physical cores of a worker whose replicas share them; 1 (one device's own hardware) otherwise."""
    return np.where(shares_cores(p), p.physical_cores, 1.0)


def seconds_per_example(p: StepCosts) -> np.ndarray:
    """Compute seconds per example on one replica running alone on its
    hardware: all of the worker's cores for CPU devices that share them."""
    measured = p.compute_s_per_sample
    derived = p.flops_per_sample / (p.peak_flops * p.device_efficiency)
    return np.where(np.isnan(measured), derived, measured) / _worker_cores(p)


#: Kernels one replica launches per step, per gradient tensor: forward, backward, its collective, its
#: update (an upper bound: a fused batch norm's two tensors share one kernel each way; RULES.md rule 17).
KERNELS_PER_TENSOR = 4


def launch_s(p: StepCosts) -> np.ndarray:
    """Host seconds per step launching the kernels of a worker's other
    replicas, overlapped with compute: a replica's compute lasts at least this
    long (``data/reference/RULES.md`` rule 16; one replica's launches are in
    ``step_overhead_s``)."""
    others = p.devices_per_worker - 1
    return others * KERNELS_PER_TENSOR * p.num_gradient_tensors * p.kernel_launch_s


def host_slowdown(p: StepCosts) -> np.ndarray:
    """How much slower a worker's single-threaded host work runs: ``1 /
    physical_cores`` when its process has less than one core, else 1."""
    return 1.0 / np.minimum(_worker_cores(p), 1.0)


def straggler_costs(p: StepCosts) -> StepCosts:
    """``p`` for the last worker: its cores are ``cluster.straggler_cores``
    where one is set (a CPU-quota straggler), else unchanged."""
    straggler = p.straggler_cores
    return p.replace(physical_cores=np.where(np.isnan(straggler), p.physical_cores, straggler))


def host_costs_s(p: StepCosts, plan_: StrategyPlan) -> tuple[np.ndarray, np.ndarray]:
    """The worker host's seconds per step: (fixed overhead, dispatch of each replica).

    Both run ``host_slowdown`` times slower on less than one core. A strategy
    with one central copy of the variables (central_storage) moves the
    variables' share of the dispatch from every replica to the overhead.
    """
    slow = host_slowdown(p)
    once = p.replica_variable_s if plan_.strategy == "central_storage" else 0.0
    overhead = (p.step_overhead_s + once) * slow
    dispatch = (p.replica_dispatch_s - once) * slow
    return overhead, dispatch


def dispatch_wait_s(local, dispatch, compute, shared) -> np.ndarray:
    """Seconds from the end of the host's fixed overhead until the last of
    ``local`` replicas starts computing, each replica taking ``dispatch`` to
    dispatch and ``compute`` to compute.

    Own hardware: the last starts after all dispatches, ``L d``. Shared cores
    (each dispatch and each compute in turn): after every dispatch and the
    other replicas' compute, ``L d + (L - 1) q``.
    """
    return np.where(shared, local * dispatch + (local - 1) * compute, local * dispatch)


def input_s(p: StepCosts, global_examples) -> np.ndarray:
    """A worker host's input time for a step of ``global_examples``: reading
    them (its own share unless DATA sharding), and copying a replica's batch
    to its accelerator."""
    workers = p.num_workers
    replicas = workers * p.devices_per_worker
    read = np.where((workers == 1) | (p.shard_policy == "DATA"), global_examples, ceil_div(global_examples, workers))
    host_s = read * p.input_s_per_sample / (p.host_input_speed * p.input_threads)
    batch = ceil_div(global_examples, replicas)
    copy_s = 0.0 if p.device_kind == "cpu" else batch * p.input_bytes_per_sample / p.intra_Bps
    return host_s + copy_s


def update_s(p: StepCosts) -> np.ndarray:
    """The optimizer update on the device: its bytes over memory bandwidth."""
    return p.num_params * p.optimizer_bytes_per_param / p.memory_bandwidth_Bps


def replica_candidates(p: StepCosts, global_examples, dispatch, worker=0) -> list[tuple[np.ndarray, np.ndarray]]:
    """(start, compute) of each replica of ``worker`` that may end its part
    of the step (times from the end of its host's overhead).

    The global batch is split as :func:`distsim.mechanics.sharding.replica_batch_sizes`
    says: chunks of ``c = ceil(examples / replicas)`` in replica order, so
    worker 0 has at every local index at least the batch of any other worker
    with the same cores. A worker's replicas form three blocks (batch ``c``,
    the remainder, 0); in each the last-dispatched one ends last, so the
    worker ends at the latest of those three: ``start + forward +
    max(backward, chain)``, and its last backward pass is one of theirs. Backup workers: :func:`_backup_critical`.
    """
    workers, local = p.num_workers, p.devices_per_worker
    examples = np.asarray(global_examples, dtype=float)
    chunk = ceil_div(examples, workers * local).astype(float)
    first = worker * local  # the worker's first replica
    full = np.clip(examples // chunk - first, 0, local)  # its replicas with a whole chunk
    index = [np.maximum(full - 1.0, 0.0), np.minimum(full, local - 1.0), local - 1.0]
    per_example, launch = seconds_per_example(p), launch_s(p)
    shared = shares_cores(p)
    candidates = []
    ends_before = 0.0  # on shared cores: when the previous candidate's compute ends
    previous = -1.0
    for j in index:
        if np.all(j == previous):
            continue  # the previous candidate again (its start, compute and end): it cannot end later
        q = np.maximum(np.clip(examples - (first + j) * chunk, 0.0, chunk) * per_example, launch)
        # Shared cores: replicas previous+1..j (one block, compute q each) each take their dispatch, then
        # their compute, in turn after the previous candidate's compute.
        flow_end = np.where(j > previous, ends_before + (j - previous) * (dispatch + q), ends_before)
        start = np.where(shared, flow_end - q, (j + 1) * dispatch)
        ends_before, previous = flow_end, np.maximum(j, previous)
        candidates.append((start, q))
    return candidates


def _chains(p: StepCosts, collectives: Collectives | None, candidates: list) -> list[tuple[np.ndarray, np.ndarray]]:
    """Each candidate's (comm chain, end): the chain from the start of its
    backward pass until the last collective ends, and when its part of the
    step ends, from the end of its host's overhead (``candidates``: (costs,
    overhead, start, compute)). Fused buffers follow every candidate's
    readiness at once (:meth:`Collectives.fused_chain_end_s`), so their
    candidates share one end of communication; other chains are max-plus in
    the readiness, so each candidate's own chain gives the same latest end."""
    if collectives is not None and collectives.fused:
        forward_ends = [o + a + q / 3 for _, o, a, q in candidates]
        merged = collectives.fused_chain_end_s(p, forward_ends, [q * 2 / 3 for *_, q in candidates])
        return [(merged - f, np.maximum(merged - o, a + q)) for f, (_, o, a, q) in zip(forward_ends, candidates)]
    out = []
    for costs, _, start, q in candidates:
        chain = np.zeros_like(q) if collectives is None else collectives.chain_s(costs, q * 2 / 3) * np.ones_like(q)
        out.append((chain, start + q / 3 + np.where(chain > 0, np.maximum(chain, q * 2 / 3), q * 2 / 3)))
    return out


def step_parts(p: StepCosts, global_examples, plan_: StrategyPlan, collectives: Collectives | None = None,
               metric_comm=0.0, straggler: StepCosts | None = None) -> StepParts:
    """Costs of one step that carries ``global_examples`` examples, of the
    step's replica (:func:`_step_replica`): one of worker 0 (the largest
    batches) or, with ``straggler`` (the last worker's costs,
    :func:`straggler_costs`), of the last worker (:func:`replica_candidates`)."""
    workers = p.num_workers
    local = p.devices_per_worker
    b = ceil_div(global_examples, workers * local).astype(float)
    if collectives is not None and collectives.backup_workers:
        overhead, start, compute, chain, host = _backup_critical(p, straggler, global_examples, plan_, collectives)
    else:
        last = int(np.unique(workers).item()) - 1
        hosts = [(p, 0)] if straggler is None else [(straggler, last)] + ([(p, 0)] if last else [])
        candidates, host_ends = [], []
        for q_params, worker in hosts:
            overhead, dispatch = host_costs_s(q_params, plan_)
            for start, compute in replica_candidates(q_params, global_examples, dispatch, worker):
                candidates.append((q_params, overhead, start, compute))
                host_ends.append(local * dispatch)
        rows = [(overhead + np.maximum(end, host), overhead + start + q, overhead, host, start, q, chain)
                for (_, overhead, start, q), host, (chain, end) in zip(candidates, host_ends,
                                                                       _chains(p, collectives, candidates))]
        overhead, host, start, compute, chain = _step_replica(rows, collectives is not None)
    return StepParts(
        replica_batch=b,
        input_s=input_s(p, global_examples) * np.ones_like(b),
        overhead_s=overhead * np.ones_like(b),
        dispatch_s=start * np.ones_like(b),
        forward_s=compute / 3 * np.ones_like(b),
        backward_s=compute * 2 / 3 * np.ones_like(b),
        comm_chain_s=chain * np.ones_like(b),
        update_s=update_s(p) * np.ones_like(b),
        metric_comm_s=np.asarray(metric_comm, dtype=float) * np.ones_like(b),
        host_dispatch_s=host * np.ones_like(b),
    )


def _step_replica(rows: list, communicates: bool) -> tuple[np.ndarray, ...]:
    """(overhead, host dispatch, start, compute, comm chain) of the replica
    whose pieces make up the step, from each candidate's (step end, backward
    end, overhead, host dispatch, start, compute, comm chain); ends from the
    step's start.

    With collectives, the replica whose backward pass ends last, its chain
    running until the step's last collective ends (which another
    candidate's readiness may set): the step exposes the communication after
    the last backward pass of any replica, as the timeline counts it.
    Without, the replica that ends the step; of several, the last to finish
    its backward pass.
    """
    best = rows[0]
    for row in rows[1:]:
        later = row[1] > best[1]
        if not communicates:
            later = (row[0] > best[0]) | ((row[0] == best[0]) & later)
        best = tuple(np.where(later, new, old) for new, old in zip(row, best))
    _, _, overhead, host, start, compute, chain = best
    if communicates:  # each candidate's last collective ends its chain after its backward pass starts
        last = np.maximum.reduce([o + s + q / 3 + c for _, _, o, _, s, q, c in rows])
        chain = last - overhead - start - compute / 3
    return overhead, host, start, compute, chain


def _backup_critical(p: StepCosts, straggler: StepCosts | None, global_examples, plan_: StrategyPlan,
                     collectives: Collectives) -> tuple[np.ndarray, ...]:
    """(overhead, start, compute, comm chain, host dispatch) of a step with
    backup workers: the step sums the gradients of the first ``N - b``
    replicas to finish their backward pass, so its critical replica is the
    ``(N - b)``-th to finish among all replicas (every worker's, the last
    worker's with ``straggler``'s cores), each starting as
    :func:`replica_candidates` says (own hardware: after its dispatch; shared
    cores: its dispatch after the compute of the replica before it). A
    replica its host has not dispatched by then updates once dispatched:
    ``host dispatch`` is the last dispatch end, counted from the critical
    replica's host's overhead end."""
    workers = int(np.unique(p.num_workers).item())
    local = int(np.unique(p.devices_per_worker).item())
    examples = np.asarray(global_examples, dtype=float)
    chunk = ceil_div(examples, workers * local).astype(float)
    columns: list[tuple[np.ndarray, ...]] = []  # per replica: overhead, start, compute, the host's dispatch end
    for w in range(workers):
        q_params = straggler if straggler is not None and w == workers - 1 else p
        overhead, dispatch = host_costs_s(q_params, plan_)
        per_example, launch, shared = seconds_per_example(q_params), launch_s(q_params), shares_cores(q_params)
        previous_end = 0.0
        for j in range(local):
            q = np.maximum(np.clip(examples - (w * local + j) * chunk, 0.0, chunk) * per_example, launch)
            start = np.where(shared, previous_end + dispatch, (j + 1) * dispatch)
            previous_end = start + q
            columns.append((overhead, start, q, overhead + start))  # its dispatch ends as it starts computing
    shape = np.broadcast_shapes(*(np.shape(x) for col in columns for x in col))
    overhead, start, compute, host_end = (np.stack([np.broadcast_to(col[i], shape) for col in columns], axis=-1)
                                          for i in range(4))
    kept = workers * local - collectives.training.backup_workers
    k = np.argpartition(overhead + start + compute, kept - 1, axis=-1)[..., kept - 1:kept]
    pick = [np.take_along_axis(x, k, axis=-1)[..., 0] for x in (overhead, start, compute)]
    chain = pick[2] * 2 / 3 + collectives.chain_s(p, 0.0)  # the whole gradient's collective (and pull) after it
    return pick[0], pick[1], pick[2], chain, host_end.max(axis=-1) - pick[0]


def step_time_s(parts: StepParts, prefetch) -> np.ndarray:
    """Steady-state seconds per step: with prefetch the slower of host input
    and device work, without it their sum."""
    return np.where(prefetch, np.maximum(parts.input_s, parts.device_s), parts.input_s + parts.device_s)


def fill_s(p: StepCosts, prefetch) -> np.ndarray:
    """Seconds the first batch of an epoch waits for the shuffle buffer to
    fill (only exposed with prefetch; without it those reads are part of
    the per-step input time). A worker's buffer holds at most its stream:
    the whole dataset under DATA and OFF, its files under FILE."""
    workers = int(np.unique(p.num_workers).item())
    if p.shard_policy == "FILE":
        # Worker 0 holds the most files and the most examples.
        stream = sharding.stream_lengths(p.num_examples, workers, p.shard_policy, p.num_files,
                                         workers=0).reshape(np.shape(p.num_examples))
    else:
        stream = p.num_examples
    reads = np.minimum(p.shuffle_buffer, stream)
    t = reads * p.input_s_per_sample / (p.host_input_speed * p.input_threads)
    return np.where(prefetch, t, 0.0)


def run_time_s(full: StepParts, last: StepParts, steps_per_epoch, fill, prefetch: bool, steps: int) -> np.ndarray:
    """Total simulated time of a run of ``steps`` steps, seconds: from the
    start of its first step until the start of the step after its last
    (:func:`distsim.engines.timeline.run_time_s`), so each step counts one
    step-to-step interval.

    The steps follow the epoch (``steps_per_epoch - 1`` full steps, then the
    final one, ``last``; cycled from an epoch's first), and every epoch's
    first batch waits for the shuffle ``fill``. Without prefetch a step is
    its input then its device work. With prefetch the host reads step k's
    batch while step k-1's devices run, so step k starts ``max(input_k +
    fill_k, device_{k-1})`` after step k-1. The intervals are counted by
    kind; a run of whole epochs is that many times
    the steady epoch of :func:`distsim.engines.steady.step_model`'s parts.
    """
    n, S = int(steps), np.asarray(steps_per_epoch)
    finals = n // S  # steps in [0, n) that end an epoch (all of them when S == 1)
    if not prefetch:
        return (n - finals) * (full.input_s + full.device_s) + finals * (last.input_s + last.device_s)
    opener = np.where(S == 1, last.input_s, full.input_s) + fill
    openers = n // S  # steps k in [1, n] that open an epoch
    closers = np.where(S == 1, 0, (n + 1) // S)  # k in [1, n] that end one (S == 1: they are the openers)
    middle = np.where(S == 1, 0, n - openers - closers)
    return (openers * np.maximum(opener, last.device_s) + middle * np.maximum(full.input_s, full.device_s)
            + closers * np.maximum(last.input_s, full.device_s))


def run_steps(steps_per_epoch, steps: int) -> tuple[np.ndarray, np.ndarray]:
    """Of a run's ``steps`` steps: (full steps, epoch-final steps)."""
    finals = int(steps) // np.asarray(steps_per_epoch)
    return int(steps) - finals, finals


def epoch_plan(p: StepCosts) -> sharding.Epoch:
    """The epoch's steps, examples and final-step size (:func:`distsim.mechanics.sharding.epoch`)."""
    workers = int(np.unique(p.num_workers).item())
    local = int(np.unique(p.devices_per_worker).item())
    shard_policy = p.shard_policy
    files = p.num_files if shard_policy == "FILE" else None
    shape = sharding.epoch(p.num_examples, p.global_batch, workers, local,
                           p.drop_remainder > 0, shard_policy, files)
    empty = np.asarray(shape.steps == 0)
    if empty.any():
        batch = np.broadcast_to(p.global_batch, empty.shape)[empty].ravel()[0]
        raise InputError("training.global_batch", int(batch), "at most the examples of the longest worker's stream "
                         f"under {shard_policy} sharding when drop_remainder is true (otherwise an epoch has no step)")
    return shape


@dataclass
class ModelOutput:
    """Deterministic predictions of :func:`step_model` (arrays).

    The summary numbers share one time, the run's: ``training.steps``
    step-to-step intervals (:func:`run_time_s`), as :func:`distsim.predict`
    simulates them. Throughput is the examples the run's steps aggregate over
    that time, the mean step that time over the steps, and an epoch
    ``steps_per_epoch`` mean steps.

    Attributes:
        step_time_s: seconds per full step in the steady state (the step
            the pieces in ``parts`` make up).
        exposed_comm_s: all-reduce seconds per full step not hidden by the
            backward pass: after the last replica's backward pass ends.
        epoch_time_s: ``steps_per_epoch x mean_step_time_s``, seconds.
        steps_per_epoch: steps in one epoch.
        throughput_samples_per_s: the run's aggregated examples over its
            total time, examples/s.
        baseline_throughput_samples_per_s: one device of the same kind running
            one replica's batch (weak scaling's baseline) for the same steps, examples/s.
        strong_baseline_throughput_samples_per_s: one device running the
            whole global batch (strong scaling's baseline), examples/s.
        parts: the pieces of the slowest worker's full step (what
            :mod:`distsim.engines.bottleneck` names the bottleneck from).
        run_time_s: the run's total simulated time, seconds.
        mean_step_time_s: ``run_time_s / training.steps``, seconds.
        run_exposed_comm_s: the run's exposed all-reduce seconds, summed over its steps.
    """

    step_time_s: np.ndarray
    exposed_comm_s: np.ndarray
    epoch_time_s: np.ndarray
    steps_per_epoch: np.ndarray
    throughput_samples_per_s: np.ndarray
    baseline_throughput_samples_per_s: np.ndarray
    strong_baseline_throughput_samples_per_s: np.ndarray
    parts: StepParts
    run_time_s: np.ndarray
    mean_step_time_s: np.ndarray
    run_exposed_comm_s: np.ndarray

    @property
    def speedup(self) -> np.ndarray:
        """Weak scaling: throughput over one device running one replica's batch."""
        return self.throughput_samples_per_s / self.baseline_throughput_samples_per_s

    @property
    def strong_speedup(self) -> np.ndarray:
        """Strong scaling: throughput over one device running the global batch."""
        return self.throughput_samples_per_s / self.strong_baseline_throughput_samples_per_s


def step_model(scenario: Scenario, p: StepCosts | None = None) -> ModelOutput:
    """Closed-form steady-state step and epoch times of ``scenario``, for
    every entry of the (broadcast) numeric arrays in ``p`` (default: the
    scenario's own :func:`step_costs`). The replica layout comes from the
    scenario (the sweep groups rows by it), because the collectives depend
    on it."""
    p = step_costs(scenario) if p is None else p
    plan_ = plan(scenario)
    collectives = Collectives.of(scenario, plan_)
    metrics = metric_comm_s(p, Communication.of(scenario, plan_))
    batch = p.global_batch
    # Every worker waits for the slowest one (the straggler, when there is one) at the collectives.
    slowest = straggler_costs(p)
    parts = step_parts(p, batch, plan_, collectives, metrics, straggler=slowest)
    shape = epoch_plan(p)
    last_parts = step_parts(p, shape.last_examples, plan_, collectives, metrics, straggler=slowest)
    steps = scenario.training.steps
    run = run_time_s(parts, last_parts, shape.steps, fill_s(p, plan_.prefetch), plan_.prefetch, steps)
    n_full, n_final = run_steps(shape.steps, steps)
    examples = (n_full * batch + n_final * shape.last_examples) * aggregated_share(scenario)
    mean_step = run / steps
    return ModelOutput(
        step_time_s=step_time_s(parts, plan_.prefetch),
        exposed_comm_s=parts.exposed_comm_s,
        epoch_time_s=shape.steps * mean_step,
        steps_per_epoch=shape.steps,
        throughput_samples_per_s=examples / run,
        baseline_throughput_samples_per_s=_one_device_throughput(p, parts.replica_batch, plan_, steps),
        strong_baseline_throughput_samples_per_s=_one_device_throughput(p, batch, plan_, steps),
        parts=parts,
        run_time_s=run,
        mean_step_time_s=mean_step,
        run_exposed_comm_s=n_full * parts.exposed_comm_s + n_final * last_parts.exposed_comm_s,
    )


def aggregated_share(scenario: Scenario) -> float:
    """Share of a step's examples whose gradients the step applies: with
    ``b`` backup workers of ``N`` replicas, the first ``N - b`` replicas'
    gradients are summed and the rest dropped, so ``(N - b) / N`` (the mean
    share when the global batch does not split evenly). TensorFlow's
    ``SyncReplicasOptimizer`` takes ``replicas_to_aggregate`` gradients per
    variable from its accumulators and drops stale ones
    (``tensorflow/python/training/sync_replicas_optimizer.py``, lines 77-78
    and 280-282 in TF 2.21), each one replica's batch."""
    n = scenario.num_replicas
    return (n - scenario.training.backup_workers) / n


def one_device_costs(p: StepCosts, batch) -> StepCosts:
    """``p`` for one device of the same kind on the same host (one worker,
    one device, no straggler) running ``batch`` examples per step."""
    return p.replace(num_workers=np.ones_like(p.num_workers), devices_per_worker=np.ones_like(p.devices_per_worker),
                     global_batch=np.asarray(batch, dtype=float))


def _one_device_throughput(p: StepCosts, batch, plan_: StrategyPlan, steps: int) -> np.ndarray:
    """Examples/s of one device of the same kind on the same host running
    ``batch`` examples per step through the same input pipeline, for a run
    of ``steps`` steps of its own epoch (:func:`run_time_s`)."""
    one = one_device_costs(p, batch)
    shape = epoch_plan(one)
    full = step_parts(one, batch, plan_)
    last = step_parts(one, shape.last_examples, plan_)
    run = run_time_s(full, last, shape.steps, fill_s(one, plan_.prefetch), plan_.prefetch, steps)
    n_full, n_final = run_steps(shape.steps, steps)
    return (n_full * np.asarray(batch, dtype=float) + n_final * shape.last_examples) / run
