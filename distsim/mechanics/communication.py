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
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from distsim.mechanics.collective_costs import cost_model
from distsim.mechanics.strategies import StrategyPlan
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
        return cls(plan_, c.num_workers, c.devices_per_worker, c.topology, s.protocol, s.inter_algorithm,
                   s.ps_local_sum, s.ps_placement)

    @property
    def num_replicas(self) -> int:
        return self.num_workers * self.devices_per_worker

    def intra(self, p: dict) -> tuple:
        """(latency, bandwidth) of device-to-device transfers inside a worker."""
        bw = p["cluster.intra_link.bandwidth_Bps"]
        if self.topology is not None:
            bw = self.topology.lanes(self.devices_per_worker) * self.topology.lane_bandwidth_Bps
        return p["cluster.intra_link.latency_s"], bw

    def host(self, p: dict) -> tuple:
        """(latency, bandwidth, uplinks) of device-to-host-CPU transfers."""
        if self.topology is None:
            return p["cluster.intra_link.latency_s"], p["cluster.intra_link.bandwidth_Bps"], 1
        return p["cluster.intra_link.latency_s"], self.topology.host_link_bandwidth_Bps, self.topology.host_links

    def time_s(self, p: dict, message_bytes) -> np.ndarray:
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

    def _links(self, p: dict, proto: str | None) -> tuple:
        """(intra latency, intra bandwidth, inter latency, inter bandwidth) under a protocol."""
        a1, b1 = self.intra(p)
        a2, b2 = p["cluster.inter_link.latency_s"], p["cluster.inter_link.bandwidth_Bps"]
        if proto is None:
            return a1, b1, a2, b2
        kind = "pcie" if self.topology is None or self.topology.kind == "pcie_tree" else "nvlink"
        eff = NCCL_EFFICIENCY[proto]
        return NCCL_STEP_S[kind][proto], b1 * eff, NCCL_STEP_S["net"][proto], b2 * eff

    def _all_reduce_s(self, p: dict, n, proto: str | None) -> np.ndarray:
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
            step = latency_s if proto is None else NCCL_TREE_NET_STEP_S[proto]
            return 2 * math.ceil(math.log2(nodes)) * step + 2 * n / bandwidth_Bps
        model = cost_model(self.inter_algorithm, nodes, ranks_per_node=1)
        return model.time_s(n, latency_s, bandwidth_Bps, latency_s, bandwidth_Bps)

    def _two_level_ps_s(self, p: dict, n) -> np.ndarray:
        """Devices -> worker CPU (sum) -> PS shards -> worker CPU -> devices."""
        lat, bw, links = self.host(p)
        local = host_transfer_s(self.devices_per_worker, n, lat, bw, links)
        if self.ps_placement == "host_cpu":
            return 2 * local
        shards = cost_model("parameter_server", self.num_workers, num_shards=self.plan.options["num_shards"],
                            ps_on_worker_nodes=self.ps_placement == "worker_hosts")
        network = shards.time_s(n, p["cluster.intra_link.latency_s"], p["cluster.intra_link.bandwidth_Bps"],
                                p["cluster.inter_link.latency_s"], p["cluster.inter_link.bandwidth_Bps"])
        return 2 * local + network
