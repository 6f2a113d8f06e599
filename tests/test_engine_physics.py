"""Issue 24's engine fixes held to hand derivations (not to another engine path).

Every expected number below is written from the model as the docstrings of
``distsim.engines.steady`` and ``distsim.engines.prediction`` state it, with
the scenario's own fields (preset inputs) and, under noise, the same seeded
draws the engine documents (one ``Generator.standard_exponential`` factor per
step and replica from ``numpy.random.default_rng(training.seed)``). Each of the
first five tests fails on the engine before this change (commit 3ebf134).
"""

import dataclasses

import numpy as np
import pytest

import distsim
from distsim import make_scenario
from distsim.engines import asyncrun


from distsim import predict
from distsim.results.result import Result

STEPS = 200  # fewer than an epoch of MNIST at batch 64 (938 steps): only step 0 opens an epoch


def _exponential_factors(steps: int, seed: int = 0, replicas: int = 1) -> np.ndarray:
    """Replica 0's compute factors of a run of ``replicas``: per step, ``replicas`` Exp(1) draws from the seeded
    generator, of which the first is replica 0's (and the one-device baseline's: common random numbers)."""
    rng = np.random.default_rng(seed)
    return np.array([rng.standard_exponential(replicas)[0] for _ in range(steps)])


def _cpu_step_parts(s, batch: int) -> tuple[float, float]:
    """(fixed seconds, compute seconds at factor 1) of one CPU device's step without prefetch, by hand:
    read ``batch`` examples on one input thread, the host overhead and one dispatch, then compute
    (flops / (peak x efficiency), its own hardware), then the update (params x 12 bytes / memory bandwidth)."""
    w, d, t = s.workload, s.cluster.device, s.training
    per_example = w.flops_per_sample / (d.peak_flops * d.efficiency)
    fixed = (batch * w.input_s_per_sample / (s.cluster.host_input_speed * t.input_threads) + d.step_overhead_s
             + d.replica_dispatch_s + w.num_params * t.optimizer_bytes_per_param / d.memory_bandwidth_Bps)
    return fixed, batch * per_example


def test_one_device_under_noise_mean_step_median_step_and_efficiency_exactly_one():
    s = make_scenario("this_machine_core", "mnist_mlp", "one_device", global_batch=64, steps=STEPS,
                      compute_distribution="exponential", prefetch=False)
    r = distsim.predict(s).summary
    fixed, compute = _cpu_step_parts(s, 64)
    every = fixed + compute * _exponential_factors(STEPS)  # no prefetch: each step is its input, then its device work
    # The mean step is the run's total time over its steps, the first (epoch-opening) step included;
    # the median is of the steps that open no epoch. rel 1e-9: float summation order.
    assert r.step_time_s == pytest.approx(np.mean(every), rel=1e-9)
    assert r.median_step_time_s == pytest.approx(np.median(every[1:]), rel=1e-9)
    assert r.throughput_samples_per_s == pytest.approx(64 / np.mean(every), rel=1e-9)
    assert r.efficiency == 1.0 and r.speedup == 1.0 and r.strong_speedup == 1.0  # its own baseline, draw for draw
    # An epoch: 937 steps of 64 and one of 32: examples x time agree within one global batch.
    assert abs(r.throughput_samples_per_s * r.epoch_time_s - s.workload.num_examples) <= 64


@pytest.mark.parametrize("distribution", ["exponential", "lognormal"])
@pytest.mark.parametrize("strategy", ["one_device", "mirrored", "central_storage", "multi_worker_mirrored"])
def test_one_replica_has_efficiency_exactly_one_under_any_noise(strategy, distribution):
    # The example (v100, resnet50_224, batch 64, 500 steps, exponential) reported 1.22.
    s = make_scenario("v100", "resnet50_224", strategy, global_batch=64, steps=500, compute_distribution=distribution)
    r = distsim.predict(s).summary
    assert (r.efficiency, r.strong_speedup) == (1.0, 1.0)
    assert abs(r.throughput_samples_per_s * r.epoch_time_s - s.workload.num_examples) <= 64


def test_baselines_are_drawn_from_the_same_distribution():
    # 4 CPU devices (each its own hardware) of 16 examples: the weak baseline is one device running 16 per step,
    # simulated with the same seed (one factor per step), the strong one a device running all 64.
    s = make_scenario("this_machine_core", "mnist_mlp", "mirrored", devices_per_worker=4, global_batch=64,
                      steps=STEPS, compute_distribution="exponential", prefetch=False)
    r = distsim.predict(s).summary
    # Replica 0 of 4, every step of the run (its total time); epochs >= 938 steps long, so no partial step.
    mean_factor = np.mean(_exponential_factors(STEPS, replicas=4))
    weak = 16 / sum(x * f for x, f in zip(_cpu_step_parts(s, 16), (1.0, mean_factor)))
    strong = 64 / sum(x * f for x, f in zip(_cpu_step_parts(s, 64), (1.0, mean_factor)))
    assert r.throughput_samples_per_s == pytest.approx(64 / r.step_time_s, rel=1e-12)
    assert r.speedup == pytest.approx(r.throughput_samples_per_s / weak, rel=1e-9)
    assert r.strong_speedup == pytest.approx(r.throughput_samples_per_s / strong, rel=1e-9)
    assert r.efficiency == pytest.approx(r.speedup / 4, rel=1e-12)


def _link_s(s) -> float:
    """One transfer of the gradient to an idle PS: latency + request + bytes / bandwidth."""
    link = s.cluster.inter_link
    return link.latency_s + link.request_s + s.workload.gradient_bytes / link.bandwidth_Bps


def test_async_worker_cycle_pays_the_ps_apply_and_no_less_than_one_device():
    # One worker, one PS on the same kind of CPU host; Adam moves 28 bytes per parameter.
    s = make_scenario("this_machine_core", "mnist_mlp_wide", "parameter_server", mode="async",
                      inter_link="ethernet_100g", optimizer_bytes_per_param=28, prefetch=False)
    r = distsim.predict(s).summary
    fixed, compute = _cpu_step_parts(s, 64)  # the one-device step, its update included
    one_device = fixed + compute
    # The worker does everything but the update, which the PS applies at the same memory bandwidth.
    cycle = one_device + 2 * _link_s(s)
    assert r.step_time_s == pytest.approx(cycle, rel=1e-9)
    assert r.efficiency == pytest.approx(one_device / cycle, rel=1e-9)
    assert r.efficiency < 1


@pytest.mark.parametrize("num_ps", [1, 4])
def test_a_saturated_ps_serves_transfers_and_applies_in_turn(num_ps):
    # 8 workers of 8 examples, a huge optimizer state (1000 bytes per parameter): the PS (one server: no full
    # duplex) holds each update's pull and push bytes (its shard's) and its shard's apply; the workers wait.
    s = make_scenario("this_machine_core", "mnist_mlp_wide", "parameter_server", num_workers=8, mode="async",
                      num_ps=num_ps, inter_link="ethernet_100g", optimizer_bytes_per_param=1000, steps=50)
    assert not s.cluster.inter_link.full_duplex
    w = s.workload
    apply = w.num_params * 1000 / s.cluster.device.memory_bandwidth_Bps / num_ps
    service = s.cluster.inter_link.request_s + w.gradient_bytes / num_ps / s.cluster.inter_link.bandwidth_Bps
    demand = 2 * service + apply
    fixed, compute = _cpu_step_parts(s, 8)
    own = fixed + compute - w.num_params * 1000 / s.cluster.device.memory_bandwidth_Bps + 2 * (_link_s(s) - service)
    r = distsim.predict(s).summary
    # A round of 8 updates keeps the PS busy 8 demands; with deterministic workers in FIFO order it idles at most
    # once a round, while the worker it last served is away for its own time (compute, latencies): a convoy.
    assert 8 * demand * (1 - 1e-9) <= r.step_time_s <= 8 * demand + own


def _gpu_async(intra_Bps: float):
    link = {"name": "slow copy", "bandwidth_Bps": intra_Bps, "latency_s": 5e-6}
    return make_scenario("gtx_1080_ti", "mnist_mlp", "parameter_server", num_workers=2, mode="async",
                         inter_link="ethernet_100g", intra_link=link, global_batch=128, prefetch=False)


def test_async_worker_copies_its_whole_batch_to_its_device():
    # Each of 2 workers reads and copies its own 64 examples: halving the copy link's rate adds one whole
    # copy of 64 x 3136 bytes at 10 MB/s less one at 20 MB/s to every worker's cycle (the PS's costs and
    # the two workers' turns at it do not change).
    slow, fast = (distsim.predict(_gpu_async(bw)).summary for bw in (1e7, 2e7))
    assert slow.step_time_s - fast.step_time_s == pytest.approx(64 * 3136 * (1 / 1e7 - 1 / 2e7), rel=1e-9)


def test_async_ps_host_of_accelerators_applies_at_one_cpu_core_rate():
    # One GPU worker (no turns at the PS): its cycle by hand, the apply at this_machine_core's 10 GB/s.
    s = _gpu_async(2e7)
    s = dataclasses.replace(s, cluster=dataclasses.replace(s.cluster, num_workers=1),
                            training=dataclasses.replace(s.training, global_batch=64))
    w, d = s.workload, s.cluster.device
    own_input = 64 * w.input_s_per_sample + 64 * w.input_bytes_per_sample / 2e7
    device = d.step_overhead_s + d.replica_dispatch_s + 64 * w.flops_per_sample / (d.peak_flops * d.efficiency)
    cycle = own_input + device + 2 * _link_s(s) + w.num_params * 12 / 10e9
    assert distsim.predict(s).summary.step_time_s == pytest.approx(cycle, rel=1e-9)


@pytest.mark.parametrize("intra_Bps", [1.2e10, 2e8, 2e7, 2e6])
def test_a_slower_copy_never_lifts_async_efficiency_above_one(intra_Bps):
    # The issue: 0.95 at 12 GB/s but 4.71 at 20 MB/s. As the copy dominates, a worker's cycle tends to the
    # one-device step plus its transfers and apply: efficiency may rise towards 1, never past it.
    assert distsim.predict(_gpu_async(intra_Bps)).summary.efficiency <= 1


def test_sync_copy_is_one_replica_batch_per_device():
    # Guard for the same class of bug in the sync path (it has none): 2 GPUs of 64 examples each, no prefetch:
    # doubling the bytes per example adds one replica's copy, 64 x 3136 bytes over 20 MB/s, to the step.
    link = {"name": "slow copy", "bandwidth_Bps": 2e7, "latency_s": 5e-6}
    base = make_scenario("gtx_1080_ti", "mnist_mlp", "mirrored", devices_per_worker=2, intra_link=link,
                         global_batch=128, prefetch=False)
    wider = dataclasses.replace(base, workload=dataclasses.replace(base.workload, input_bytes_per_sample=6272))
    added = distsim.predict(wider).summary.step_time_s - distsim.predict(base).summary.step_time_s
    assert added == pytest.approx(64 * 3136 / 2e7, rel=1e-9)


def test_result_json_carries_the_median_and_reads_results_stored_without_it():
    s = make_scenario("this_machine_core", "mnist_mlp", "one_device", steps=30, compute_distribution="lognormal")
    result = distsim.predict(s)
    data = result.to_dict()
    back = Result.from_dict(data)
    assert back.summary.median_step_time_s == result.summary.median_step_time_s is not None
    del data["summary"]["median_step_time_s"]  # a result stored before the field existed
    assert Result.from_dict(data).summary.median_step_time_s is None


def test_sharded_async_ps_applies_one_gradient_at_a_time_after_its_bytes_arrive():
    # The finder's case: 2 workers, 4 shards over a half-duplex 10 Gbit/s link (deterministic compute). By hand:
    # each transfer's own path is L = latency + gradient / bandwidth, 3.31 ms, while a shard's bytes hold its
    # lane S = L / 4 minus the latency, 0.81 ms: both workers' pulls and pushes end at the same instant, L + C
    # and 2 L + C. Only then can each shard apply, A = num_params x 12 B / (10 GB/s) / 4, one gradient at a
    # time: worker 0's update lands at 2 L + C + A, worker 1's at 2 L + C + 2 A (was both at 2 L + C + A).
    s = make_scenario("p100", "mnist_mlp_wide", "parameter_server", num_workers=2, num_ps=4)
    link, w = s.cluster.inter_link, s.workload
    assert not link.full_duplex and s.training.compute_distribution == "deterministic"
    big = distsim.predict(s)
    L = link.latency_s + w.gradient_bytes / link.bandwidth_Bps
    A = w.num_params * s.training.optimizer_bytes_per_param / 10e9 / 4  # the PS host: this_machine_core, 10 GB/s
    assert w.gradient_bytes / 4 / link.bandwidth_Bps * 2 < L  # both pulls' shard bytes fit in one transfer's path
    C = float(asyncrun.simulate_updates(s)[1].compute_s)  # the worker's own compute, not under test here
    first = np.sort(big.trace.end_s[big.trace.label == 2][:2])  # the first two pushes end at their applies
    assert first == pytest.approx([2 * L + C + A, 2 * L + C + 2 * A], rel=1e-9)
    assert np.all(big.step_times_s > 0)


def test_in_process_async_ps_never_slows_with_more_inter_bandwidth():
    # The finder's regression: 7 TPU-core workers of the small CNN, an in-process PS over PCIe 4 (one process
    # serves every transfer and apply, in turn). Before applies waited for their bytes, 2.4e10 -> 5.96e10 B/s
    # went 1.408 -> 1.601 ms (+14 %): the apply, booked with its push, made pulls queue behind every push (a
    # convoy). By hand each worker's cycle is at least its compute + pull + push to an idle PS, and the PS's
    # demand (7 x (2 transfers + an apply), under 0.75 ms) is below it, so the workers can take turns.
    base = make_scenario("tpu_v4_core", "mnist_small_cnn", "parameter_server", devices_per_worker=7,
                         ps_cluster="in_process", inter_link="pcie4_x16", steps=1000)
    steps = []
    for bandwidth in (2.4e10, 3e10, 4e10, 5.96e10, 1e11):
        s = base.replace("cluster.inter_link.bandwidth_Bps", bandwidth)
        costs = asyncrun.simulate_updates(s)[1]
        own = float(costs.compute_s + costs.pull_s + costs.push_s)
        assert 7 * float(2 * costs.ps_service_s + costs.ps_apply_s) < own
        steps.append(distsim.predict(s).summary.step_time_s)
        assert own * (1 - 1e-9) <= steps[-1] <= 1.01 * own  # turns: at most 1 % of waiting (engine: 0.15 %)
    assert all(b <= a * (1 + 1e-9) for a, b in zip(steps, steps[1:])), steps


def test_baseline_replays_replica_zeros_draws():
    """Common random numbers (issue 24 item 2): the one-device baseline's
    compute factors are replica 0's (worker 0's) draws, so sampling noise
    cannot put N replicas above one device. Before the fix, one async worker
    of this seed drew a slow stream and its baseline an independent fast one:
    efficiency 1.53. With the same draws, the async worker pays push and pull
    on top of the baseline's step, so its efficiency is below 1."""
    s = make_scenario("v100", "inception_v3_299", "parameter_server", steps=8,
                      compute_distribution="exponential", seed=1202775795)
    assert predict(s).summary.efficiency <= 1.0
    # Sync: the slowest of 2 replicas' factors is >= replica 0's factor at every step.
    for seed in range(10):
        s = make_scenario("v100", "resnet50_224", "multi_worker_mirrored", num_workers=2, steps=8,
                          compute_distribution="lognormal", seed=seed)
        assert predict(s).summary.efficiency <= 1.0, seed


def test_straggler_cores_needs_more_than_one_worker():
    """With one worker the "straggler" was the only worker while the one-device baseline kept
    physical_cores=5.716: efficiency 0.226 for a single device. A straggler needs others to lag behind."""
    with pytest.raises(distsim.InputError, match=r"cluster\.straggler_cores.*num_workers=1"):
        make_scenario("this_machine_core", "mnist_mlp_wide", "one_device", physical_cores=5.716, straggler_cores=0.733)
    s = make_scenario("this_machine_core", "mnist_mlp_wide", "multi_worker_mirrored", 2, physical_cores=5.716,
                      straggler_cores=0.733)
    assert s.cluster.straggler_cores == 0.733


def test_sweep_over_a_per_tensor_sharded_ps_with_local_sum_gives_predict_per_row():
    # Found by the costs helper: with per-tensor grouping every tensor's bytes are a sweep column, and a Python
    # max() over those columns raised ValueError. Each row must be what predict gives for that row's scenario.
    base = make_scenario("v100", "resnet50_224", "central_storage", 1, 4, algorithm="parameter_server", num_ps=2,
                         ps_local_sum=True, ps_placement="worker_hosts", grouping="per_tensor", global_batch=64)
    rows = distsim.sweep(base, {"training.global_batch": [64, 128]})
    for batch, step in zip((64, 128), rows["step_time_s"]):
        want = predict(base.replace("training.global_batch", batch)).summary.step_time_s
        assert step == pytest.approx(want, rel=1e-9)   # the same model in closed form: rounding only


def test_sweep_over_num_buckets_gives_predict_per_row():
    # Found by the costs helper: the collectives read num_buckets from the scenario, so a column of bucket
    # counts gave the first count's step on every row (0.327 s for 1, 4 and 16 buckets here).
    base = make_scenario("v100", "resnet50_224", "mirrored", 1, 4, global_batch=256)
    rows = distsim.sweep(base, {"training.num_buckets": [1, 4, 16]})
    want = [predict(base.replace("training.num_buckets", b)).summary.step_time_s for b in (1, 4, 16)]
    assert len(set(want)) == 3   # the bucket count does move this step, so the check below can fail
    assert list(rows["step_time_s"]) == pytest.approx(want, rel=1e-9)   # same model, rounding only


# Horovod fusion with an uneven split: a tensor is ready once every replica has it, so the buffers follow the
# merged readiness of all replicas (the timeline's rule), never one replica's own. Before, the closed form
# priced each candidate replica's buffers alone: a replica with no examples (49 over 8: chunks of 7, the last
# replica empty) "had" every gradient at once and its different buffers ended the step at 0.767628 s, where
# the event timeline (and the same step with every replica full, batch 56) gives 0.766988 s.
FUSED_UNEVEN = dict(device="h100", workload="vgg16_224", strategy="central_storage", devices_per_worker=8,
                    compute_distribution="deterministic", grouping="fusion", fusion_threshold_bytes=1048576,
                    fusion_cycle_s=0.0014153218974239839)


def test_fused_sweep_with_an_empty_replica_is_the_timeline():
    scenario = make_scenario(global_batch=49, **FUSED_UNEVEN).replace("cluster.intra_link.latency_s", 4.484e-4)
    row = distsim.sweep(scenario, {"training.global_batch": [49, 56]})
    timeline_s = predict(scenario).summary.step_time_s
    assert row["step_time_s"][0] == pytest.approx(timeline_s, rel=1e-12)  # the same sums in another order
    assert row["step_time_s"][0] == pytest.approx(row["step_time_s"][1], rel=1e-12)  # the empty replica adds nothing here


def test_fused_exposure_is_after_the_last_backward_pass():
    # 89 over 6 TPU cores: five replicas of 15 examples, one of 14, ending the step together after the fused
    # buffers; the exposed communication is counted after the last backward pass to end (a 15-example replica),
    # as the timeline counts it: comm_fraction 0.0800, not the 14-example replica's 0.133.
    scenario = make_scenario(device="tpu_v4_core", workload="mnist_small_cnn", strategy="tpu", devices_per_worker=6,
                             global_batch=89, compute_distribution="deterministic", grouping="fusion")
    scenario = scenario.replace("workload.compute_s_per_sample", 4.361026426469847e-4)
    row = distsim.sweep(scenario, {"training.global_batch": [89]})
    assert row["comm_fraction"][0] == pytest.approx(predict(scenario).summary.comm_fraction, rel=1e-9)


def test_file_sharded_epoch_ends_over_two_partial_steps_by_hand():
    # 60,000 examples in 136 files over 4 workers: 15,000 each (24 bigger files, 6 per worker). Global batch 23
    # over 4 x 7 replicas: TF's cyclic re-cut gives worker 0 the sizes [1] * 23 + [0] * 5, worker w the same
    # rotated by 7 w, 7 pieces a step. Each worker's 15,000 = 652 batches of 23 (2,608 steps) + 4 examples.
    # Worker 3's rotation starts 1, 1, 0, 0, 0, 0, 0 | 1, 1, ...: its last 4 examples need 9 pieces, 2 steps.
    # So the epoch has 2,610 steps, and throughput x epoch time (full steps of 23) is 2,610 x 23 = 60,030:
    # 30 more than the dataset, more than one global batch.
    s = make_scenario("k80", "mnist_mlp_wide", "parameter_server", num_workers=4, devices_per_worker=7, mode="sync",
                      global_batch=23, compute_distribution="deterministic", shard_policy="FILE", num_files=136)
    summary = predict(s).summary
    assert summary.steps_per_epoch == 2610
    assert summary.throughput_samples_per_s * summary.epoch_time_s == pytest.approx(2610 * 23, rel=1e-12)


def test_one_async_worker_on_a_streamed_link_shares_with_nobody_under_noise():
    # One worker has no one to share the PS's NIC with, so fair sharing and the FIFO lanes are the same cycle.
    # Before, a noisy log was stretched to a mean-compute fair-share rate, swapping the run's own draws for
    # the mean: 3 exponential steps came out at efficiency 1.18 (0.78 on the same link without streaming).
    s = make_scenario("v100", "resnet152_224", "parameter_server", steps=3, compute_distribution="exponential")
    streamed = s.replace("cluster.inter_link.full_duplex", True).replace("cluster.inter_link.whole_message_bytes", 2e5)
    whole = streamed.replace("cluster.inter_link.whole_message_bytes", None)
    assert predict(streamed).summary.efficiency == pytest.approx(predict(whole).summary.efficiency, rel=1e-9)
    assert predict(streamed).summary.efficiency <= 1
