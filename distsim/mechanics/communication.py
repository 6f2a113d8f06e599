"""What one gradient collective costs on the scenario's hardware.

:class:`Communication` prices a collective of ``n`` bytes per replica for a
scenario, vectorised over sweep rows (the link fields arrive as arrays).
It combines the closed forms of :mod:`distsim.mechanics.collective_costs` with
the server's wiring and the framework's implementation:

* **Topology** (:class:`distsim.scenario.Topology`): a ring among the L
  devices of one worker runs at ``lanes(L) x lane_bandwidth`` (the NVLink
  lanes its rings use on a DGX-1 differ for 2, 4 and 8 GPUs; every GPU
  behind an NVSwitch gets all its links). Without a topology every device
  has one port on ``intra_link``.
* **Host CPU over PCIe**: devices send their gradients to the host (a
  parameter server on the CPU, CentralStorage's CPU, the worker's local sum)
  over ``host_links`` uplinks they share, so one direction costs
  ``alpha + ceil(L / host_links) n / B_host`` (without a topology: one
  uplink, the intra link: the root port of ``reduce_to_one``).
* **NCCL** (``Strategy.protocol="nccl"``): NCCL's own tuning model
  (NVIDIA/nccl ``src/graph/tuning.cc``, ``ncclTunerConstantsDefaults``): a
  ring costs ``base_P + steps x hwLat_P + bytes / (busBw x eff_P)`` for
  protocol P, and NCCL picks the faster protocol for each size. LL moves 8
  bytes with a flag per 16 (efficiency 0.5, low latency), Simple the full
  bandwidth with a higher latency: that is the small-message ramp of
  nccl-tests' bus bandwidth. LL128 is left out (NCCL enables it by default
  only on some generations and links).
  **The link's own latency under NCCL.** NCCL's ``hwLat`` per step is the
  software plus hardware latency of one chunk on the link class it was tuned
  on (tuning.cc: "Tree/Simple is the latency a 256kB chunk, which is ~ base
  lat + 256k/12GB/s"), so a link preset at or below the class's Simple
  ``hwLat`` (NVLink 3 us, PCIe 5 us, InfiniBand 2 us) adds nothing. A
  ``latency_s`` above it (TCP/gRPC Ethernet's 50 us against NET's 14 us, a
  what-if of 0.1 s) is wire or stack time NCCL's table does not hold, and
  every step of either protocol waits for it: each step costs ``hwLat_P +
  max(0, latency_s - hwLat_Simple)`` (:func:`nccl_step_s`). Step time never
  shrinks when a link's latency grows.
* **Hierarchical all-reduce**: reduce-scatter and all-gather over the L
  devices of a node, and between the M nodes the chosen
  ``Strategy.inter_algorithm`` on the whole message through each node's NIC
  (the L per-device pieces share it): ``ring``, ``halving_doubling``, the
  binomial ``tree``, or NCCL's pipelined double binary ``nccl_tree``, which
  NCCL's tuning model prices as ``2 log2(M)`` latencies and twice the
  bytes (its ring-to-tree bandwidth ratio is 0.5).
* **Parameter servers** with ``ps_local_sum``: each worker's devices send
  their gradients to its CPU, it pushes the sum once to the shards (own
  hosts, or co-located on the workers' hosts), pulls the variables back and
  copies them to its devices. With ``ps_placement="host_cpu"`` the shards
  are that one worker's CPU: only the PCIe part remains.
* **TF1 graph-mode parameter servers, one transfer per variable**
  (:func:`sharded_ps_exchange`): a variable lives whole on one PS task,
  placed by TensorFlow's ``GreedyLoadBalancingStrategy`` with
  ``byte_size_load_fn`` (tf_cnn_benchmarks ``variable_mgr.py``, its
  ``parameter_server`` mode): in creation order, each variable goes to the
  task with the fewest bytes so far. (Its ``distributed_replicated`` mode
  places round-robin and pulls each variable after its own barrier; the
  model prices it like ``parameter_server``: data/reference/README.md
  measures what that costs on the published cells.) Each
  gradient is summed over PCIe and pushed to its task as soon as it is
  ready; every NIC (each task's, and a worker's own) moves its bytes one
  transfer after another, the NICs side by side. The variables are read
  back once every push is in (synchronous training's barrier), at the
  start of the next step: that pull is not overlapped.
"""

from __future__ import annotations

import math
from functools import reduce
from dataclasses import dataclass

import numpy as np

from distsim.mechanics.collective_costs import cost_model
from distsim.mechanics.gradients import serial_chain_end
from distsim.mechanics.strategies import StrategyPlan
from distsim.mechanics.stepcosts import StepCosts
from distsim.scenario import Scenario, Topology

#: NCCL's ring latencies, seconds (tuning.cc: baseLatencies for Ring, and
#: hwLatencies per link type for Ring; LL and Simple).
NCCL_BASE_S = {"LL": 6.6e-6, "Simple": 8.4e-6}
NCCL_STEP_S = {
    "nvlink": {"LL": 0.6e-6, "Simple": 3.4e-6},
    "pcie": {"LL": 1.0e-6, "Simple": 5.7e-6},
    "net": {"LL": 2.7e-6, "Simple": 14.0e-6},
}
#: NCCL's tree (inter-node, one GPU per node) latencies: tuning.cc Tree rows.
NCCL_TREE_BASE_S = {"LL": 6.8e-6, "Simple": 8.4e-6}
NCCL_TREE_NET_STEP_S = {"LL": 5.0e-6, "Simple": 14.0e-6}
#: Share of the link bandwidth each protocol delivers (tuning.cc: LL halves busBw).
NCCL_EFFICIENCY = {"LL": 0.5, "Simple": 1.0}


def nccl_step_s(kind: str, proto: str, latency_s):
    """Seconds of one NCCL ring step over a link of class ``kind`` (``nvlink``,
    ``pcie``, ``net``) with protocol ``proto``: NCCL's ``hwLat`` plus the link's
    ``latency_s`` beyond the class's Simple ``hwLat`` (see the module docstring)."""
    return NCCL_STEP_S[kind][proto] + np.maximum(0.0, np.asarray(latency_s, dtype=float) - NCCL_STEP_S[kind]["Simple"])


def greedy_shards(tensor_bytes, num_shards: int) -> np.ndarray:
    """TensorFlow's ``GreedyLoadBalancingStrategy``: the PS task of each
    variable, in creation order (the least-loaded task so far, ties to the
    lowest index)."""
    loads = np.zeros(num_shards)
    out = np.empty(len(tensor_bytes), dtype=np.int64)
    for i, size in enumerate(tensor_bytes):
        out[i] = task = int(np.argmin(loads))
        loads[task] += size
    return out


def host_transfer_s(devices, message_bytes, latency_s, bandwidth_Bps, host_links: int = 1):
    """One direction between ``devices`` devices and their host CPU: each
    moves ``message_bytes`` over uplinks that ``ceil(devices / host_links)``
    devices share."""
    return latency_s + np.ceil(np.asarray(devices) / host_links) * message_bytes / bandwidth_Bps


@dataclass(frozen=True)
class Communication:
    """How a scenario's gradient collectives are priced (see the module docstring).

    Attributes:
        plan: the resolved strategy.
        num_workers, devices_per_worker: the replica layout.
        topology: the servers' wiring, or None.
        protocol, inter_algorithm, ps_local_sum, ps_placement: the strategy's choices.
    """

    plan: StrategyPlan
    num_workers: int
    devices_per_worker: int
    topology: Topology | None
    protocol: str
    inter_algorithm: str
    ps_local_sum: bool
    ps_placement: str

    @classmethod
    def of(cls, scenario: Scenario, plan_: StrategyPlan) -> "Communication":
        c, s = scenario.cluster, scenario.strategy
        return cls(plan_, c.num_workers, c.devices_per_worker, c.topology, plan_.protocol, s.inter_algorithm,
                   s.ps_local_sum, s.ps_placement)

    @property
    def num_replicas(self) -> int:
        return self.num_workers * self.devices_per_worker

    def intra(self, p: StepCosts) -> tuple:
        """(latency, bandwidth) of device-to-device transfers inside a worker."""
        bw = p.intra_Bps
        if self.topology is not None:
            bw = self.topology.lanes(self.devices_per_worker) * self.topology.lane_bandwidth_Bps
        return p.intra_latency_s, bw

    def host(self, p: StepCosts) -> tuple:
        """(latency, bandwidth, uplinks) of device-to-host-CPU transfers."""
        if self.topology is None:
            return p.intra_latency_s, p.intra_Bps, 1
        return p.intra_latency_s, self.topology.host_link_bandwidth_Bps, self.topology.host_links

    @property
    def uses_ps(self) -> bool:
        return self.plan.algorithm == "parameter_server"

    def push_s(self, p: StepCosts, message_bytes) -> np.ndarray:
        """The part of a collective that gradients need: all of an
        all-reduce; a parameter server's push (the first of its two
        symmetric halves)."""
        t = self.time_s(p, message_bytes)
        return t / 2 if self.uses_ps else t

    def pull_s(self, p: StepCosts, message_bytes) -> np.ndarray:
        """A parameter server's pull of the variables (after every push of
        the step is in; 0 for an all-reduce)."""
        t = self.time_s(p, message_bytes)
        return t / 2 if self.uses_ps else np.zeros(np.shape(t))

    def time_s(self, p: StepCosts, message_bytes) -> np.ndarray:
        """Seconds of one collective of ``message_bytes`` per replica (0 when
        nothing is communicated), broadcast with the rows of ``p``."""
        plan_ = self.plan
        n = np.asarray(message_bytes, dtype=float)
        if plan_.algorithm is None or self.num_replicas == 1 and plan_.algorithm != "parameter_server":
            return np.zeros(np.shape(n))
        if plan_.algorithm == "parameter_server" and (self.ps_local_sum or self.ps_placement == "host_cpu"):
            return self._two_level_ps_s(p, n)
        if plan_.algorithm == "reduce_to_one" and plan_.options.get("extra_root") and self.topology is not None:
            lat, bw, links = self.host(p)
            return 2 * host_transfer_s(self.devices_per_worker, n, lat, bw, links)
        if self.protocol == "nccl":
            return np.minimum(*(self._all_reduce_s(p, n, proto) for proto in ("LL", "Simple")))
        return self._all_reduce_s(p, n, None)

    def _links(self, p: StepCosts, proto: str | None) -> tuple:
        """(intra latency, intra bandwidth, inter latency, inter bandwidth) under a protocol."""
        a1, b1 = self.intra(p)
        a2, b2 = p.inter_latency_s, p.inter_Bps
        if proto is None:
            return a1, b1, a2, b2
        kind = "pcie" if self.topology is None or self.topology.kind == "pcie_tree" else "nvlink"
        eff = NCCL_EFFICIENCY[proto]
        return nccl_step_s(kind, proto, a1), b1 * eff, nccl_step_s("net", proto, a2), b2 * eff

    def _all_reduce_s(self, p: StepCosts, n, proto: str | None) -> np.ndarray:
        a1, b1, a2, b2 = self._links(p, proto)
        base = 0.0 if proto is None else NCCL_BASE_S[proto]
        plan_ = self.plan
        if plan_.algorithm == "hierarchical" and self.inter_algorithm != "ring":
            inside = cost_model("ring", self.devices_per_worker).time_s(n, a1, b1)
            return base + inside + self._inter_node_s(n, a2, b2, proto)
        model = cost_model(plan_.algorithm, self.num_replicas, **plan_.options)
        return base + model.time_s(n, a1, b1, a2, b2)

    def _inter_node_s(self, n, latency_s, bandwidth_Bps, proto: str | None) -> np.ndarray:
        """The hierarchical all-reduce's stage between the nodes: the whole
        message through each node's NIC."""
        nodes = self.num_workers
        if nodes == 1:
            return np.zeros(np.shape(n))
        if self.inter_algorithm == "nccl_tree":
            # latency_s is NCCL's ring step under proto: keep the link's excess, swap the ring's hwLat for the tree's.
            step = latency_s if proto is None else NCCL_TREE_NET_STEP_S[proto] + latency_s - NCCL_STEP_S["net"][proto]
            return 2 * math.ceil(math.log2(nodes)) * step + 2 * n / bandwidth_Bps
        model = cost_model(self.inter_algorithm, nodes, ranks_per_node=1)
        return model.time_s(n, latency_s, bandwidth_Bps, latency_s, bandwidth_Bps)

    @property
    def two_level_ps(self) -> bool:
        """Whether gradients are summed on each worker's CPU before the PS."""
        return self.plan.algorithm == "parameter_server" and (self.ps_local_sum or self.ps_placement == "host_cpu")

    def sharded_exchange_s(self, p: StepCosts, launch_s: list, share, creation_share, gradient_bytes: float):
        """(end of the last push, the pull after it) of a step whose tensors
        (``share`` of the gradient each, in ready order) reach their workers'
        CPUs' PCIe at ``launch_s`` (one array per tensor). ``creation_share``
        (creation order) places the variables on the PS tasks."""
        shards = self.plan.options["num_shards"] if self.ps_placement != "host_cpu" else 1
        shard_of = greedy_shards(np.asarray(creation_share) * gradient_bytes, shards)[::-1]
        lat, bw, links = self.host(p)
        grad = p.gradient_bytes
        return sharded_ps_exchange(
            launch_s, [s_ * grad for s_ in share], shard_of, self.devices_per_worker,
            pcie=(lat, bw, links), workers=self.num_workers, shards=shards, placement=self.ps_placement,
            network=(p.inter_latency_s, p.inter_Bps))

    def _two_level_ps_s(self, p: StepCosts, n) -> np.ndarray:
        """Devices -> worker CPU (sum) -> PS shards -> worker CPU -> devices."""
        lat, bw, links = self.host(p)
        local = host_transfer_s(self.devices_per_worker, n, lat, bw, links)
        if self.ps_placement == "host_cpu":
            return 2 * local
        shards = cost_model("parameter_server", self.num_workers, num_shards=self.plan.options["num_shards"],
                            ps_on_worker_nodes=self.ps_placement == "worker_hosts")
        network = shards.time_s(n, p.intra_latency_s, p.intra_Bps,
                                p.inter_latency_s, p.inter_Bps)
        return 2 * local + network


def sharded_ps_exchange(launch_s: list, tensor_bytes: list, shard_of, devices: int, *, pcie: tuple, workers: int,
                        shards: int, placement: str, network: tuple):
    """The push/pull of a synchronous PS step, one transfer per variable.

    Args:
        launch_s: when each tensor's gradient is ready (arrays, ready order).
        tensor_bytes: each tensor's bytes (arrays or numbers).
        shard_of: the PS task of each tensor (same order).
        devices: devices per worker, summed over PCIe first.
        pcie: (latency, bandwidth, uplinks) to the host CPU.
        workers, shards, placement: the cluster (``worker_hosts``: task s on
            worker ``s mod workers``'s host; ``own_hosts``; ``host_cpu``: the
            one worker's CPU, no network).
        network: (latency, bandwidth) of the inter-worker link.

    Returns:
        (end of the last push, seconds of the pull after it).
    """
    lat, bw, links = pcie
    pcie_s = [host_transfer_s(devices, t, lat, bw, links) for t in tensor_bytes]
    # Stage 1: each tensor's copies to the CPU, one after another on the uplinks.
    end, summed = 0.0, []
    for launch, d in zip(launch_s, pcie_s):
        end = np.maximum(end, launch) + d
        summed.append(end)
    back = host_transfer_s(devices, sum(tensor_bytes), lat, bw, links)
    if placement == "host_cpu":
        return end, back
    a, b = network
    co_located = placement == "worker_hosts"
    senders = workers - 1 if co_located else workers  # a task's own host's copy stays local
    # The worker that hosts the fewest tasks (the last) sends the most over its NIC.
    local = {s for s in range(shards) if co_located and s % workers == workers - 1}
    push_end = 0.0
    for task in range(shards):
        mine = [i for i in range(len(tensor_bytes)) if shard_of[i] == task]
        if senders and mine:
            push_end = np.maximum(push_end, serial_chain_end([summed[i] for i in mine],
                                                             [a + senders * tensor_bytes[i] / b for i in mine]))
    remote = [i for i in range(len(tensor_bytes)) if shard_of[i] not in local]
    if remote:
        push_end = np.maximum(push_end, serial_chain_end([summed[i] for i in remote],
                                                         [a + tensor_bytes[i] / b for i in remote]))
    push_end = np.maximum(push_end, end)
    task_bytes = [sum(tensor_bytes[i] for i in range(len(tensor_bytes)) if shard_of[i] == task)
                  for task in range(shards)]
    received = sum(tensor_bytes[i] for i in remote) if remote else 0.0
    # reduce(np.maximum, ...), not max(...): in a sweep each tensor's bytes are a column, one value per row.
    pull = a + np.maximum(reduce(np.maximum, (senders * t for t in task_bytes)), received) / b
    return push_end, pull + back

