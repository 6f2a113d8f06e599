"""mechanics.communication: topology, NCCL, hierarchical stages and two-level
parameter servers against hand derivations."""

import math

import numpy as np
import pytest

from distsim.engines.costs import step_costs
from distsim.mechanics.collectives import cost_model
from distsim.mechanics.communication import Communication, host_transfer_s
from distsim.mechanics.strategies import plan
from distsim.scenario import make_scenario
from distsim.validation import InputError

N = 100 * 2**20  # a 100 MiB gradient


def _comm(scn):
    return Communication.of(scn, plan(scn)), step_costs(scn)


def test_ring_on_the_dgx1_mesh_uses_the_lanes_of_its_gpu_count():
    # dgx1_v100: 6 lanes for 8 GPUs, 4 for GPUs 0-3, 1 for a pair; 20 GB/s a lane (NCCL's figure).
    for gpus, lanes in ((8, 6), (4, 4), (2, 1)):
        scn = make_scenario("v100", "resnet50_224", "mirrored", 1, gpus, intra_link="nvlink2", global_batch=64 * gpus,
                            protocol="alpha_beta").replace("cluster.topology", "dgx1_v100")
        comm, p = _comm(scn)
        alpha = scn.cluster.intra_link.latency_s
        ring = 2 * (gpus - 1) * alpha + 2 * (gpus - 1) / gpus * N / (lanes * 20e9)
        assert float(comm.time_s(p, N)) == pytest.approx(ring, rel=1e-12)


def test_two_level_ps_bytes_per_nic():
    # 4 workers x 8 GPUs, 4 shards on the workers' hosts, local sum first.
    scn = make_scenario("k80", "resnet50_224", "parameter_server", 4, 8, mode="sync", num_ps=4,
                        inter_link="ethernet_10g", global_batch=2048, ps_local_sum=True,
                        ps_placement="worker_hosts").replace("cluster.topology", "pcie_k80_boards")
    comm, p = _comm(scn)
    a_pcie, a_net, b_net = scn.cluster.intra_link.latency_s, 5e-5, 1.25e9
    # PCIe: 8 GPUs on 4 uplinks of 12 GB/s, 2 gradients an uplink, each way.
    local = a_pcie + 2 * N / 12e9
    # A node's NIC sends the 3 shards it does not host (3/4 N) and receives 3 workers'
    # quarter for its own shard (3 x N/4): 3/4 N each way, push then pull.
    network = 2 * (a_net + 0.75 * N / b_net)
    # The co-located shard's quarter moves inside the node (intra link, 12 GB/s) alongside.
    assert float(comm.time_s(p, N)) == pytest.approx(2 * local + network, rel=1e-12)
    # Every replica pushing its own gradient to 4 shards on their own hosts instead:
    # a shard's NIC takes 32 quarters each way.
    flat = make_scenario("k80", "resnet50_224", "parameter_server", 4, 8, mode="sync", num_ps=4,
                         inter_link="ethernet_10g", global_batch=2048)
    comm, p = _comm(flat)
    assert float(comm.time_s(p, N)) == pytest.approx(2 * (a_net + 32 * N / 4 / b_net), rel=1e-12)


def test_a_ps_on_the_host_cpu_costs_only_pcie():
    scn = make_scenario("p100", "resnet50_224", "parameter_server", 1, 8, mode="sync", global_batch=512,
                        ps_local_sum=True, ps_placement="host_cpu").replace("cluster.topology", "dgx1_p100")
    comm, p = _comm(scn)
    alpha = scn.cluster.intra_link.latency_s
    assert float(comm.time_s(p, N)) == pytest.approx(2 * (alpha + 2 * N / 12e9), rel=1e-12)
    with pytest.raises(InputError, match="strategy.ps_placement"):
        make_scenario("p100", "resnet50_224", "parameter_server", 2, 8, mode="sync", global_batch=512,
                      ps_local_sum=True, ps_placement="host_cpu")


def test_one_host_uplink_is_reduce_to_one_onto_the_cpu():
    # Without a topology the CPU has one port: the closed form of CentralStorage's schedule.
    for gpus in (1, 2, 5, 8):
        expected = float(cost_model("reduce_to_one", gpus, extra_root=True).time_s(N, 1e-5, 1.2e10))
        assert 2 * float(host_transfer_s(gpus, N, 1e-5, 1.2e10)) == pytest.approx(expected, rel=1e-12)


def test_nccl_picks_ll_for_small_and_simple_for_large_messages():
    scn = make_scenario("v100", "resnet50_224", "mirrored", 1, 8, intra_link="nvlink2", global_batch=512,
                        protocol="nccl").replace("cluster.topology", "dgx1_v100")
    comm, p = _comm(scn)
    bw = 6 * 20e9
    steps = 14

    def proto(n, base, step, eff):  # tuning.cc: base + nsteps x hwLat + ring bytes / (busBw x eff)
        return base + steps * step + 2 * 7 / 8 * n / (bw * eff)

    small, large = 8 * 1024, 512 * 2**20
    assert float(comm.time_s(p, small)) == pytest.approx(proto(small, 6.6e-6, 0.6e-6, 0.5), rel=1e-12)
    assert float(comm.time_s(p, large)) == pytest.approx(proto(large, 8.4e-6, 3.4e-6, 1.0), rel=1e-12)
    # Bus bandwidth (nccl-tests' busbw = algbw x 2(p-1)/p) climbs towards the lanes' bandwidth.
    sizes = 2.0 ** np.arange(10, 31, 2)
    busbw = sizes / comm.time_s(p, sizes) * 2 * 7 / 8
    assert np.all(np.diff(busbw) > 0) and busbw[-1] < bw and busbw[-1] > 0.99 * bw


def test_hierarchical_stage_between_nodes():
    kw = dict(intra_link="nvlink2", inter_link="ethernet_25g", global_batch=4096, algorithm="hierarchical")
    ring = make_scenario("v100", "resnet50_224", "multi_worker_mirrored", 8, 8, **kw)
    comm, p = _comm(ring)
    # inter_algorithm="ring" is the two-level ring schedule's closed form.
    assert float(comm.time_s(p, N)) == pytest.approx(
        float(cost_model("hierarchical", 64, ranks_per_node=8).time_s(N, 3e-6, 1.5e11, 3e-5, 3.125e9)), rel=1e-12)
    a, b = 3e-5, 3.125e9
    inside = 2 * 7 * 3e-6 + 2 * 7 / 8 * N / 1.5e11
    for name, between in (("halving_doubling", 2 * 3 * a + 2 * 7 / 8 * N / b),
                          ("tree", 2 * 3 * (a + N / b)),
                          ("nccl_tree", 2 * 3 * a + 2 * N / b)):
        comm, p = _comm(ring.replace("strategy.inter_algorithm", name))
        assert float(comm.time_s(p, N)) == pytest.approx(inside + between, rel=1e-12), name
    # 256 GPUs over Ethernet: a ring between 32 nodes pays 62 latencies, the tree 10.
    big = make_scenario("v100", "resnet50_224", "multi_worker_mirrored", 32, 8, **kw)
    small = 64 * 1024
    t_ring = float(_comm(big)[0].time_s(_comm(big)[1], small))
    tree = big.replace("strategy.inter_algorithm", "nccl_tree")
    t_tree = float(_comm(tree)[0].time_s(_comm(tree)[1], small))
    assert t_tree < t_ring
    assert math.ceil(math.log2(32)) == 5


def test_new_knobs_are_refused_where_they_mean_nothing():
    with pytest.raises(InputError, match="strategy.inter_algorithm"):
        make_scenario("v100", "resnet50_224", "multi_worker_mirrored", 2, 2, global_batch=64, inter_algorithm="tree")
    with pytest.raises(InputError, match="strategy.ps_local_sum"):
        make_scenario("v100", "resnet50_224", "multi_worker_mirrored", 2, 2, global_batch=64, ps_local_sum=True)
    with pytest.raises(InputError, match="strategy.ps_local_sum"):
        make_scenario("v100", "resnet50_224", "parameter_server", 2, 2, global_batch=64, ps_local_sum=True)
    with pytest.raises(InputError, match="strategy.protocol"):
        make_scenario("this_machine_core", "mnist_mlp", "mirrored", 1, 2, global_batch=64, protocol="nccl")
    with pytest.raises(InputError, match="cluster.topology"):
        make_scenario("this_machine_core", "mnist_mlp", "mirrored", 1, 2, global_batch=64).replace(
            "cluster.topology", "dgx1_v100")


def test_variables_go_whole_to_the_least_loaded_ps_task():
    # TF's GreedyLoadBalancingStrategy, by bytes in creation order: 8 -> task 0 (loads 8, 0),
    # 1 -> task 1 (8, 1), 1 -> task 1 (8, 2), 5 -> task 1 (8, 7), 3 -> task 1 again (7 < 8).
    from distsim.mechanics.communication import greedy_shards
    assert greedy_shards([8, 1, 1, 5, 3], 2).tolist() == [0, 1, 1, 1, 1]
    assert greedy_shards([4, 4, 4], 3).tolist() == [0, 1, 2]


def test_one_push_per_variable_loads_each_task_nic_with_its_own_variables():
    from distsim.mechanics.communication import sharded_ps_exchange
    # 3 workers, 2 tasks on worker hosts (task s on worker s), one GPU each, free PCIe.
    # Tensors (ready order) of 6, 2, 4 bytes ready at t = 0, 1, 2 on tasks 1, 0, 0.
    push_end, pull = sharded_ps_exchange([0.0, 1.0, 2.0], [6.0, 2.0, 4.0], np.array([1, 0, 0]), 1,
                                         pcie=(0.0, np.inf, 1), workers=3, shards=2, placement="worker_hosts",
                                         network=(0.0, 1.0))
    # Task 1's NIC takes 2 remote workers x 6 = 12 s from t=0; task 0's 2 x 2 from 1 -> 5,
    # then 2 x 4 from 5 -> 13. Worker 2 (hosts no task) sends 6, 2, 4: ends at 12.
    assert float(push_end) == pytest.approx(13.0)
    # Pull: task 0 sends 2 x 6 = 12, task 1 2 x 6 = 12; worker 2 receives 12: 12 s.
    assert float(pull) == pytest.approx(12.0)


def test_sharded_ps_timeline_equals_closed_form():
    from distsim.engines.steady import step_model
    from distsim.engines.timeline import simulate
    scn = make_scenario("k80", "inception_v3_299", "parameter_server", 4, 8, mode="sync", num_ps=3,
                        inter_link="ethernet_10g", global_batch=2048, ps_local_sum=True, ps_placement="worker_hosts",
                        grouping="per_tensor", steps=4, topology="pcie_k80_boards")
    # Both engines run the same exchange on the same ready times: float rounding only.
    np.testing.assert_allclose(simulate(scn).step_times_s[2:], float(step_model(scn).step_time_s), rtol=1e-9)


def _with_latency(scn, link, latency_s):
    return scn.replace(f"cluster.{link}.latency_s", latency_s)


def test_nccl_adds_a_links_latency_beyond_its_hwlat_per_step():
    # 2 GPUs, no topology (PCIe class), ring: 2(p-1) = 2 steps. A link latency at or below PCIe's Simple
    # hwLat (5.7 us) is inside NCCL's table; 0.1 s adds 0.1 - 5.7 us to every step of either protocol.
    scn = make_scenario("v100", "resnet50_224", "mirrored", 1, 2, intra_link="pcie3_x16", global_batch=64,
                        protocol="nccl")
    n, bw = 1000.0, 12e9
    for latency in (1e-6, 5.7e-6):
        comm, p = _comm(_with_latency(scn, "intra_link", latency))
        ll = 6.6e-6 + 2 * 1.0e-6 + n / (0.5 * bw)
        assert float(comm.time_s(p, n)) == pytest.approx(ll, rel=1e-12)
    comm, p = _comm(_with_latency(scn, "intra_link", 0.1))
    extra = 0.1 - 5.7e-6
    ll = 6.6e-6 + 2 * (1.0e-6 + extra) + n / (0.5 * bw)
    simple = 8.4e-6 + 2 * (5.7e-6 + extra) + n / bw
    assert float(comm.time_s(p, n)) == pytest.approx(min(ll, simple), rel=1e-12)


def test_nccl_between_nodes_pays_the_networks_latency_beyond_hwlat():
    # 2 nodes x 1 GPU over ethernet_10g (50 us): a ring of 2 ranks, both steps between nodes (NET class, 14 us
    # Simple hwLat), so each step costs hwLat_P + 36 us.
    scn = make_scenario("v100", "resnet50_224", "multi_worker_mirrored", 2, 1, inter_link="ethernet_10g",
                        global_batch=64, protocol="nccl")
    comm, p = _comm(scn)
    n, bw, extra = float(N), 1.25e9, 50e-6 - 14.0e-6
    simple = 8.4e-6 + 2 * (14.0e-6 + extra) + n / bw
    assert float(comm.time_s(p, n)) == pytest.approx(simple, rel=1e-12)


def test_nccl_step_time_never_shrinks_when_latency_grows():
    from distsim import predict
    for link, workers, gpus, kw in (("intra_link", 1, 4, {}), ("inter_link", 2, 2, {"inter_link": "ethernet_10g"})):
        strategy = "mirrored" if workers == 1 else "multi_worker_mirrored"
        scn = make_scenario("v100", "resnet50_224", strategy, workers, gpus, global_batch=256, protocol="nccl", **kw)
        steps = [predict(_with_latency(scn, link, a)).summary.step_time_s for a in (1e-6, 1e-4, 1e-2, 0.1)]
        assert all(b >= a for a, b in zip(steps, steps[1:])), (link, steps)
        # The last all-reduce (one bucket here) runs after the backward pass, so its 2(p-1) steps of 0.1 s
        # each are exposed: the step grows by more than one of them.
        assert steps[-1] - steps[0] > 0.1, (link, steps)


def test_tensorflows_default_implementation_is_nccl_only_for_mirrored_on_gpus():
    # TF 2.21: MirroredStrategy -> NCCL on physical GPUs (mirrored_strategy.py:339-340, 388-402); RING on CPUs;
    # MultiWorkerMirroredStrategy's AUTO in eager mode -> RING on GPUs too (collective_all_reduce_strategy.py).
    cases = (("v100", "mirrored", 1, 4, {}, "nccl"),
             ("v100", "mirrored", 1, 4, {"algorithm": "reduce_to_one"}, "alpha_beta"),
             ("v100", "multi_worker_mirrored", 2, 4, {}, "alpha_beta"),
             ("v100", "multi_worker_mirrored", 2, 4, {"protocol": "nccl"}, "nccl"),
             ("v100", "mirrored", 1, 4, {"protocol": "alpha_beta"}, "alpha_beta"),
             ("this_machine_core", "mirrored", 1, 4, {}, "alpha_beta"),
             ("v100", "one_device", 1, 1, {}, "alpha_beta"))
    for device, strategy, workers, gpus, kw, want in cases:
        scn = make_scenario(device, "resnet50_224", strategy, workers, gpus, global_batch=64 * workers * gpus, **kw)
        assert plan(scn).protocol == want, (strategy, kw)
    # The default really prices NCCL: 4 GPUs on PCIe (no topology), ring of 6 steps, a 100 MiB gradient:
    # Simple's base 8.4 us + 6 x 5.7 us (pcie3's 5 us is under PCIe's Simple hwLat) + 2 x 3/4 N / 12 GB/s.
    scn = make_scenario("v100", "resnet50_224", "mirrored", 1, 4, intra_link="pcie3_x16", global_batch=256)
    comm, p = _comm(scn)
    assert float(comm.time_s(p, N)) == pytest.approx(8.4e-6 + 6 * 5.7e-6 + 2 * 3 / 4 * N / 12e9, rel=1e-12)
