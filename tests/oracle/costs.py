"""Plain closed forms the oracle's processes spend time on (seconds, bytes).

Every function cites the sentence of the docs it implements. Nothing here
comes from the engines' code.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from distsim.scenario import Scenario
from distsim.scenario.presets import load_preset


def link_rate_Bps(link) -> float:
    """``min(bandwidth_Bps x payload_fraction, stack_bandwidth_Bps)``
    (``Link`` docstring: the slower of the wire's payload rate and the hosts'
    network software; ``None`` is free)."""
    wire = link.bandwidth_Bps * link.payload_fraction
    return wire if link.stack_bandwidth_Bps is None else min(wire, link.stack_bandwidth_Bps)


@dataclass(frozen=True)
class Net:
    """The two link classes: (latency, bytes/s) inside a worker and between workers."""

    a1: float
    b1: float
    a2: float
    b2: float

    @classmethod
    def of(cls, s: Scenario) -> "Net":
        c = s.cluster
        return cls(c.intra_link.latency_s, link_rate_Bps(c.intra_link), c.inter_link.latency_s,
                   link_rate_Bps(c.inter_link))


def ring_s(n: float, workers: int, local: int, net: Net) -> float:
    """Ring all-reduce of ``n`` bytes per rank over ``workers x local`` ranks:
    2(p-1) steps, each moving n/p bytes per rank (DESIGN.md: 2(p-1)a +
    2(p-1)/p n/B). Every step prices its busiest port, alpha + bytes / B,
    "the slower link class when a step uses both" (collective_costs.py): in
    a ring every step sends over the intra link inside a node and, with
    several nodes, one rank per node over its NIC."""
    p = workers * local
    if p == 1:
        return 0.0
    steps = []
    if local > 1:
        steps.append(net.a1 + n / p / net.b1)
    if workers > 1:
        steps.append(net.a2 + n / p / net.b2)
    return 2 * (p - 1) * max(steps)


def _one_class(workers: int, local: int, net: Net) -> tuple[float, float]:
    """(latency, bandwidth) of a collective whose ranks are all on one node or one per node."""
    if workers == 1:
        return net.a1, net.b1
    if local == 1:
        return net.a2, net.b2
    raise ValueError("the oracle prices tree and halving-doubling only on one node or one rank per node")


def tree_s(n: float, workers: int, local: int, net: Net) -> float:
    """Binomial tree reduce then broadcast: 2 ceil(log2 p) steps, each moving
    the whole message over one port (DESIGN.md: about 2 log2(p) (a + n/B))."""
    p = workers * local
    a, b = _one_class(workers, local, net)
    return 2 * math.ceil(math.log2(p)) * (a + n / b) if p > 1 else 0.0


def halving_doubling_s(n: float, workers: int, local: int, net: Net) -> float:
    """Recursive halving (reduce-scatter) then doubling (all-gather) on p =
    2^k ranks: step i moves n / 2^i bytes, each step alpha + bytes / B
    (DESIGN.md: 2 log2(p) a + 2 (p-1)/p n/B)."""
    p = workers * local
    if p & (p - 1):
        raise ValueError("the oracle prices halving-doubling on a power of two ranks only")
    a, b = _one_class(workers, local, net)
    k = int(math.log2(p))
    return 2 * sum(a + n / 2**i / b for i in range(1, k + 1))


def hierarchical_s(n: float, workers: int, local: int, net: Net, inter_algorithm: str = "ring") -> float:
    """communication.py: reduce-scatter and all-gather over the L devices of
    a node (a ring's two halves: (L-1) steps of n/L each), and between the
    M nodes ``inter_algorithm`` on the whole message through each node's NIC
    (the L per-device pieces share it): a ring (2(M-1) steps of n/M),
    halving-doubling, the binomial tree, or NCCL's double binary tree,
    priced as ``2 log2(M)`` latencies and twice the bytes."""
    inside = 2 * (local - 1) * (net.a1 + n / local / net.b1) if local > 1 else 0.0
    nodes = Net(net.a2, net.b2, net.a2, net.b2)
    if workers == 1:
        between = 0.0
    elif inter_algorithm == "nccl_tree":
        between = 2 * math.ceil(math.log2(workers)) * net.a2 + 2 * n / net.b2
    else:
        between = ALL_REDUCE[inter_algorithm](n, workers, 1, nodes)
    return inside + between


def ps_direction_s(n: float, workers: int, shards: int, net: Net) -> float:
    """One direction (push or pull) of a synchronous parameter server with
    ``shards`` shards on their own hosts and ``workers`` one-device workers
    (DESIGN.md: max(n/B_worker, w n/(k B_ps)), plus a latency)."""
    return net.a2 + max(n / net.b2, workers * n / (shards * net.b2))


def central_reduce_s(n: float, workers: int, local: int, net: Net) -> float:
    """CentralStorage's ``reduce_to_one`` onto an extra root, the host CPU
    (collectives.py): every device sends its whole message to the root in one
    step, whose port takes all ``local`` of them, then the root sends the sum
    back the same way: 2 (alpha + L n / B) over the intra link."""
    if workers != 1:
        raise ValueError("central_storage runs on one worker")
    return 2 * (net.a1 + local * n / net.b1)


ALL_REDUCE = {"ring": ring_s, "reduce_to_one": central_reduce_s, "tree": tree_s, "halving_doubling": halving_doubling_s,
              "hierarchical": hierarchical_s}


def algorithm(s: Scenario) -> str | None:
    """The gradient summation the oracle prices: strategies.py's table
    (mirrored and multi_worker_mirrored default to ``ring``; parameter_server
    is ``parameter_server``), None for one replica or an async PS."""
    if s.strategy.name == "parameter_server":
        return None if s.strategy.resolved_mode == "async" else "parameter_server"
    if s.num_replicas == 1:
        return None
    if s.strategy.name == "central_storage":
        return s.strategy.algorithm or "reduce_to_one"
    return s.strategy.algorithm or "ring"


def collective_s(s: Scenario, n: float) -> float:
    """All of an all-reduce of ``n`` bytes; a PS's push (one of its two
    symmetric halves; communication.py ``push_s``)."""
    alg, c, net = algorithm(s), s.cluster, Net.of(s)
    if alg is None:
        return 0.0
    if alg == "parameter_server":
        return ps_direction_s(n, c.num_workers, s.strategy.num_ps, net)
    if alg == "hierarchical":
        return hierarchical_s(n, c.num_workers, c.devices_per_worker, net, s.strategy.inter_algorithm)
    return ALL_REDUCE[alg](n, c.num_workers, c.devices_per_worker, net)


def pull_s(s: Scenario) -> float:
    """A synchronous PS's pull of every variable after the step's pushes (0 for an all-reduce)."""
    if algorithm(s) != "parameter_server":
        return 0.0
    return ps_direction_s(gradient_bytes(s), s.cluster.num_workers, s.strategy.num_ps, Net.of(s))


def gradient_bytes(s: Scenario) -> float:
    return float(s.workload.num_params * s.workload.bytes_per_param)


def seconds_per_example(s: Scenario) -> float:
    """steady.py: the workload's ``compute_s_per_sample`` or ``flops_per_sample / (peak_flops x efficiency)``."""
    w, d = s.workload, s.cluster.device
    return w.compute_s_per_sample if w.compute_s_per_sample is not None else w.flops_per_sample / (
        d.peak_flops * d.efficiency)


def worker_cores(s: Scenario, worker: int) -> float | None:
    """The physical cores worker ``worker``'s replicas take turns on (CPU
    devices with ``physical_cores`` set; the last worker gets
    ``straggler_cores`` when set: Cluster docstring), None when every device
    is its own hardware."""
    c = s.cluster
    if c.device.kind != "cpu" or c.physical_cores is None:
        return None
    last = worker == c.num_workers - 1
    return c.straggler_cores if last and c.straggler_cores is not None else c.physical_cores


def worker_seconds_per_example(s: Scenario, worker: int) -> float:
    """One replica of ``worker`` computing alone: on all its worker's shared
    cores (steady.py: N logical devices on 2 cores compute no faster than one
    device on those 2 cores), or on its own hardware."""
    cores = worker_cores(s, worker)
    return seconds_per_example(s) / (1.0 if cores is None else cores)


def host_costs_s(s: Scenario, worker: int) -> tuple[float, float]:
    """(the host's fixed overhead per step, its dispatch per replica), slower
    below one core. Device docstring: ``replica_variable_s`` is the part of
    the dispatch that serves a replica's own copy of the variables;
    central_storage keeps one copy and pays it once per step."""
    d, slow = s.cluster.device, host_slowdown(s, worker)
    once = d.replica_variable_s if s.strategy.name == "central_storage" else 0.0
    return (d.step_overhead_s + once) * slow, (d.replica_dispatch_s - once) * slow


def host_slowdown(s: Scenario, worker: int) -> float:
    """steady.py: a worker process with less than one physical core runs its
    single-threaded host work ``1 / physical_cores`` times slower."""
    cores = worker_cores(s, worker)
    return 1.0 if cores is None else 1.0 / min(cores, 1.0)


def replica_batch(s: Scenario, examples: int | None = None) -> int:
    """Examples on the busiest replica: ``ceil(examples / replicas)`` (default: the global batch)."""
    examples = s.training.global_batch if examples is None else examples
    return -(-examples // s.num_replicas)


def replica_batches(s: Scenario, examples: int | None = None) -> list[int]:
    """Each replica's examples of a step of ``examples`` (default: the global
    batch), per sharding.py ``replica_batch_sizes``, the DATA rule
    tf.distribute applies to a global batch: chunks of ``ceil(examples /
    replicas)`` in replica order, the last non-empty chunk holding the
    remainder, any later replicas 0."""
    left = s.training.global_batch if examples is None else examples
    chunk = replica_batch(s, left)
    out = []
    for _ in range(s.num_replicas):
        out.append(min(chunk, left))
        left -= out[-1]
    return out


def read_s(s: Scenario, examples: int) -> float:
    """steady.py: reading ``examples`` on one host, ``examples x
    input_s_per_sample / (host_input_speed x input_threads)``."""
    return examples * s.workload.input_s_per_sample / (s.cluster.host_input_speed * s.training.input_threads)


def copy_s(s: Scenario, examples: int) -> float:
    """steady.py: copying a replica's ``examples`` to its accelerator over the intra link (not for CPUs)."""
    if s.cluster.device.kind == "cpu":
        return 0.0
    return examples * s.workload.input_bytes_per_sample / link_rate_Bps(s.cluster.intra_link)


def sync_input_s(s: Scenario, examples: int | None = None) -> float:
    """steady.py: for a step of ``examples`` (default: the global batch) the
    worker reads them all under DATA sharding (or with one worker), its own
    share under FILE/OFF; then each replica's batch goes to its accelerator
    (the replicas' own copies side by side)."""
    g, w = (s.training.global_batch if examples is None else examples), s.cluster.num_workers
    read = g if w == 1 or s.training.shard_policy == "DATA" else -(-g // w)
    return read_s(s, read) + copy_s(s, replica_batch(s, g))


def fill_s(s: Scenario) -> float:
    """steady.py: with a shuffle buffer the first batch of every epoch waits
    for the buffer to fill: reading ``min(shuffle_buffer, examples)``
    (DATA sharding: every worker's stream is the whole dataset)."""
    return read_s(s, min(s.training.shuffle_buffer, s.workload.num_examples))


def epoch_steps(s: Scenario) -> list[int]:
    """The global examples of each step of one epoch under DATA sharding:
    full batches, then the remainder (dropped with ``drop_remainder``)."""
    n, g = s.workload.num_examples, s.training.global_batch
    full, rest = divmod(n, g)
    return [g] * full + ([rest] if rest and not s.training.drop_remainder else [])


def update_s(s: Scenario) -> float:
    """steady.py: ``num_params x optimizer_bytes_per_param / memory_bandwidth_Bps``."""
    return s.workload.num_params * s.training.optimizer_bytes_per_param / s.cluster.device.memory_bandwidth_Bps


def prefetch(s: Scenario) -> bool:
    """strategies.py: ``Training.prefetch``, else True: "every strategy's
    default prefetches, plain Keras included" (tf_keras ``fit`` ends with
    ``prefetch(AUTOTUNE)``, tf.data injects one)."""
    return s.training.prefetch if s.training.prefetch is not None else True


#: RULES.md rule 17: kernels one replica launches per step, per gradient
#: tensor (forward, backward, its collective, its optimizer apply).
KERNELS_PER_TENSOR = 4


def launch_s(s: Scenario) -> float:
    """RULES.md rule 16 (``Device.kernel_launch_s``): a process driving ``L``
    devices launches the other ``L - 1`` replicas' ``4 x
    num_gradient_tensors`` kernels each, ``kernel_launch_s`` apiece, while
    they compute; a replica's compute ``q`` becomes ``max(q, launches)``."""
    others = s.cluster.devices_per_worker - 1
    return others * KERNELS_PER_TENSOR * s.workload.num_gradient_tensors * s.cluster.device.kernel_launch_s


def metric_s(s: Scenario) -> float:
    """steady.py: across worker processes (multi_worker_mirrored), each of
    ``metric_values`` is a 4-byte all-reduce after the update, one after another."""
    if s.strategy.name != "multi_worker_mirrored" or s.cluster.num_workers == 1 or algorithm(s) is None:
        return 0.0
    return s.training.metric_values * collective_s(s, 4.0)


@dataclass(frozen=True)
class AsyncCosts:
    """prediction.py ``async_costs``: per-update costs of one async PS worker (seconds).

    Attributes:
        compute_s: the worker's mean time per update besides its transfers
            (:meth:`own_s` at a factor of 1).
        input_s: its input (read, then copy of its own batch), not random.
        host_s: its host's step overhead and dispatch, not random.
        work_s: its device's forward and backward at the mean, the only
            random part (asyncps.py ``simulate_async``: "its k-th compute is
            ``compute_mean_s`` times a random factor with mean 1").
        prefetch: the input overlaps the host and the device.
        transfer_s: a transfer's bytes to an idle PS, ``latency + request_s +
            gradient / bandwidth`` (pull or push).
        shard_s: what one PS shard is busy with per transfer of its piece
            (``request_s + (gradient / num_ps) / bandwidth``).
        apply_s: one shard's apply of a pushed gradient (its share of the
            optimizer's update; 0 without ``apply_at_ps``), held after the
            push's bytes are in (issue 24).
        in_process: ``ps_cluster="in_process"``: one process is the PS's one
            server, busy for a whole transfer (``shard_s = transfer_s``).
        served: that one server also serves the worker's own time, in turn with
            the transfers and applies (prediction.py ``async_costs``: an in-process
            cluster of CPU devices sharing ``cluster.physical_cores``).
    """

    compute_s: float
    transfer_s: float
    shard_s: float
    apply_s: float
    input_s: float
    host_s: float
    work_s: float
    prefetch: bool
    in_process: bool = False
    served: bool = False

    def own_s(self, factor: float) -> float:
        """The worker's time outside its transfers when its compute takes
        ``factor`` times the mean (asyncps.py ``simulate_async``, ``prefetch``:
        ``max(input, host + compute)``, without it ``input + host + compute``)."""
        device = self.host_s + self.work_s * factor
        return max(self.input_s, device) if self.prefetch else self.input_s + device


def ps_host_memory_Bps(s: Scenario) -> float:
    """prediction.py ``ps_apply_s``: a PS host's memory bandwidth is the
    device's own for CPU workers ("the same kind of machine"), and the CPU
    preset ``this_machine_core``'s when the workers' devices are
    accelerators (TensorFlow applies a PS task's update on its CPU)."""
    d = s.cluster.device
    if d.kind == "cpu":
        return d.memory_bandwidth_Bps
    return float(load_preset("device", "this_machine_core")[0]["memory_bandwidth_Bps"])


def async_costs(s: Scenario, apply_at_ps: bool = True, worker: int = 0) -> AsyncCosts:
    """Worker ``worker`` computes one replica batch (input prefetched: its own
    batch only, read then copied; on CPU devices sharing cores, on all of its
    cores, its host slower below one core: :func:`worker_seconds_per_example`,
    :func:`host_costs_s`), then the transfers of prediction.py's
    ``async_costs``. ``apply_at_ps``: the PS applies the optimizer update,
    ``num_params x optimizer_bytes_per_param`` over its host's memory bandwidth
    (:func:`ps_host_memory_Bps`), divided over the shards (issue 24, item 3).
    In an ``in_process`` cluster the one process holds each whole transfer,
    latency included, and on shared CPU cores the worker's own time too."""
    link = s.cluster.inter_link
    b = replica_batch(s)
    own_input = read_s(s, b) + copy_s(s, b)
    host, work = sum(host_costs_s(s, worker)), b * worker_seconds_per_example(s, worker)
    compute = max(own_input, host + work) if prefetch(s) else own_input + host + work
    k, grad, rate = s.strategy.num_ps, gradient_bytes(s), link_rate_Bps(link)
    apply = s.workload.num_params * s.training.optimizer_bytes_per_param / ps_host_memory_Bps(s) / k
    apply = apply if apply_at_ps else 0.0
    whole = link.latency_s + link.request_s + grad / rate
    in_process = s.strategy.ps_cluster == "in_process"
    shard = whole if in_process else link.request_s + grad / k / rate
    served = in_process and worker_cores(s, worker) is not None
    return AsyncCosts(compute, whole, shard, apply, own_input, host, work, prefetch(s), in_process, served)
