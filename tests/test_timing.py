"""Sync timing engine: the event timeline and the closed-form model against the SimPy oracle
(and against each other where the oracle does not reach),
shared CPU cores, prefetch, bucket overlap, stragglers, determinism,
sweep = predict, and the trace."""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracle import model as oracle_model

from distsim.engines import predict, sweep
from distsim.scenario import make_scenario
from distsim.engines.steady import step_model
from distsim.engines.timeline import simulate
from distsim.results.trace import EVENT_KINDS


def _model(scn):
    return step_model(scn)


@settings(max_examples=40, deadline=None)
@given(
    device=st.sampled_from(["gtx_1080_ti", "v100", "k80"]),
    workload=st.sampled_from(["mobilenet_v2_224", "resnet50_224", "mnist_mlp"]),
    workers=st.integers(1, 3),
    local=st.integers(1, 4),
    batch_per_replica=st.integers(1, 64),
    buckets=st.integers(1, 4),  # the MNIST MLP has 4 gradient tensors
    prefetch=st.booleans(),
    threads=st.sampled_from([1, 8]),
)
def test_timeline_and_closed_form_equal_the_oracle(device, workload, workers, local, batch_per_replica, buckets,
                                                   prefetch, threads):
    """Both engines against the SimPy oracle of tests/oracle (written from the
    docstrings, sharing no code with them), on GPU presets it covers."""
    strategy = "multi_worker_mirrored" if workers > 1 else ("mirrored" if local > 1 else "one_device")
    # Mirrored's default on GPUs is NCCL, whose tuning the oracle leaves out: its ring priced as alpha-beta.
    scn = make_scenario(device, workload, strategy, workers, local, global_batch=batch_per_replica * workers * local,
                        num_buckets=buckets, prefetch=prefetch, input_threads=threads, steps=6,
                        protocol="alpha_beta" if strategy == "mirrored" else None)
    oracle = oracle_model.sync_step_times(scn)[2:]
    # From the second step on the pipeline is in steady state. Deterministic
    # compute: the same arithmetic in another order, float rounding only.
    np.testing.assert_allclose(simulate(scn).step_times_s[2:], oracle, rtol=1e-9)
    np.testing.assert_allclose(float(_model(scn).step_time_s), oracle, rtol=1e-9)


def test_logical_cpus_sharing_two_cores_give_no_compute_speedup():
    # Compute only: no input cost, no fixed overhead, no communication cost.
    times = []
    for n in (1, 2, 4, 8):
        scn = make_scenario(
            {"preset": "this_machine_core", "step_overhead_s": 0.0}, {"preset": "mnist_small_cnn", "input_s_per_sample": 0.0},
            "mirrored" if n > 1 else "one_device", devices_per_worker=n, physical_cores=2, global_batch=512,
            intra_link={"preset": "shared_memory", "bandwidth_Bps": 1e15, "latency_s": 0.0},
            optimizer_bytes_per_param=0, steps=4)
        times.append(float(_model(scn).step_time_s))
    # The same 512 examples on the same 2 cores: never faster than one device using both cores.
    assert all(t >= times[0] * (1 - 1e-12) for t in times)
    # 2 devices on 2 cores: one core each, same time; the tolerance covers the all-reduce
    # of 250 kB over the 1e15 B/s link, which is all that remains.
    np.testing.assert_allclose(times[1], times[0], rtol=1e-6)
    assert times[2] > times[1]  # 4 on 2 cores: each device gets half a core, batches of 128


def test_prefetch_overlaps_input_without_it_they_add():
    base = dict(device="gtx_1080_ti", workload="mobilenet_v2_224", strategy="one_device", global_batch=64, steps=5)
    serial = _model(make_scenario(**base, prefetch=False))
    overlapped = _model(make_scenario(**base, prefetch=True))
    input_s = 64 * 1.4e-3 + 64 * 602112 / 1.2e10  # resize pipeline + PCIe copy (presets)
    device_s = 0.004 + 64 * 1.8e9 / (1.134e13 * 0.3) + 3504872 * 12 / 4.84e11  # overhead, compute, SGD update
    assert float(serial.step_time_s) == pytest.approx(input_s + device_s, rel=1e-9)
    assert float(overlapped.step_time_s) == pytest.approx(max(input_s, device_s), rel=1e-9)


def test_plain_keras_prefetches_by_default():
    # TF 2.21: tf_keras fit on arrays ends its pipeline with prefetch(AUTOTUNE) (tf_keras/src/engine/
    # data_adapter.py:366) and tf.data injects a prefetch after a final batch (inject_prefetch, default True:
    # tensorflow/python/data/ops/options.py:369-375). So no strategy at all overlaps input with compute.
    scn = make_scenario("gtx_1080_ti", "mobilenet_v2_224", "default", global_batch=64, steps=5)
    input_s = 64 * 1.4e-3 + 64 * 602112 / 1.2e10  # the same hand derivation as the test above
    device_s = 0.004 + 64 * 1.8e9 / (1.134e13 * 0.3) + 3504872 * 12 / 4.84e11
    assert float(_model(scn).step_time_s) == pytest.approx(max(input_s, device_s), rel=1e-9)
    assert float(_model(scn.replace("training.prefetch", False)).step_time_s) == pytest.approx(
        input_s + device_s, rel=1e-9)


def test_launching_other_replicas_kernels_overlaps_compute_and_exposes_only_the_excess():
    # RULES.md rules 16-18: one process driving 8 V100s launches the other 7 replicas' kernels, 4 per gradient
    # tensor (the MNIST MLP has 4), 5 us each: 7 x 16 x 5 us = 0.56 ms of host time, overlapped with compute.
    launches = 7 * 4 * 4 * 5e-6
    for batch in (64, 60_000):
        scn = make_scenario("v100", "mnist_mlp", "mirrored", 1, 8, global_batch=batch, steps=4)
        free = scn.replace("cluster.device.kernel_launch_s", 0.0)
        q = batch / 8 * 609_792 / (15.7e12 * 0.3)  # the replica's forward + backward (preset FLOPs)
        expected = max(0.0, launches - q)  # one bucket after the backward pass: the delay passes through whole
        assert float(_model(scn).step_time_s) - float(_model(free).step_time_s) == pytest.approx(expected, abs=1e-12)
        np.testing.assert_allclose(simulate(scn).step_times_s[2:], float(_model(scn).step_time_s), rtol=1e-9)
    assert 60_000 / 8 * 609_792 / (15.7e12 * 0.3) > launches  # the big batch hides every launch
    one = make_scenario("v100", "mnist_mlp", "one_device", global_batch=64, steps=4)  # a process with one device
    assert float(_model(one).step_time_s) == float(_model(one.replace("cluster.device.kernel_launch_s", 0.0)).step_time_s)


def test_buckets_hide_all_reduce_behind_backward():
    kw = dict(device="k80", workload="resnet50_224", strategy="multi_worker_mirrored", num_workers=4,
              global_batch=128, inter_link="ethernet_10g", steps=4)
    exposed = [float(_model(make_scenario(**kw, num_buckets=k)).exposed_comm_s) for k in (1, 2, 4, 8)]
    assert all(a > b for a, b in zip(exposed, exposed[1:]))


def test_slower_links_never_speed_things_up():
    scn = make_scenario("v100", "resnet50_224", "multi_worker_mirrored", 4, 2, global_batch=256, steps=4)
    table = sweep(scn, {"cluster.inter_link.bandwidth_Bps": [1e8, 1e9, 1e10, 1e11],
                        "cluster.inter_link.latency_s": [1e-6, 1e-4, 1e-2]})
    t = table["step_time_s"].reshape(4, 3)
    assert np.all(np.diff(t, axis=0) <= 0) and np.all(np.diff(t, axis=1) >= 0)


def test_sweep_matches_predict_for_deterministic_compute():
    scn = make_scenario("gtx_1080_ti", "mobilenet_v2_224", "mirrored", devices_per_worker=1, global_batch=64,
                        shuffle_buffer=1024, steps=12)
    # Up to 128 images on one GPU: 256 MobileNetV2 examples' activations would not fit an 11 GB GTX 1080 Ti.
    table = sweep(scn, {"cluster.devices_per_worker": [1, 2, 4], "training.global_batch": [64, 128]})
    for i in range(len(table)):
        one = predict(scn.replace("cluster.devices_per_worker", int(table["cluster.devices_per_worker"][i]))
                      .replace("training.global_batch", int(table["training.global_batch"][i])))
        assert one.summary.step_time_s == pytest.approx(table["step_time_s"][i], rel=1e-9)
        assert one.summary.speedup == pytest.approx(table["speedup"][i], rel=1e-9)
        assert one.summary.epoch_time_s == pytest.approx(table["epoch_time_s"][i], rel=1e-9)


def test_stragglers_are_seeded_and_cost_time():
    kw = dict(device="v100", workload="resnet50_224", strategy="multi_worker_mirrored", num_workers=8,
              global_batch=256, steps=40, compute_distribution="lognormal", compute_sigma=0.3)
    a, b = simulate(make_scenario(**kw, seed=1)), simulate(make_scenario(**kw, seed=1))
    c = simulate(make_scenario(**kw, seed=2))
    np.testing.assert_array_equal(a.trace.end_s, b.trace.end_s)
    assert not np.array_equal(a.trace.end_s, c.trace.end_s)
    calm = simulate(make_scenario(**{**kw, "compute_distribution": "deterministic", "compute_sigma": 0.1}))
    # Waiting for the slowest of 8 lognormal draws costs more than the mean draw.
    assert a.step_times_s[1:].mean() > calm.step_times_s[1:].mean()


def test_backup_workers_shorten_steps_under_exponential_stragglers():
    kw = dict(device="v100", workload="resnet50_224", strategy="multi_worker_mirrored", num_workers=8,
              global_batch=256, steps=60, compute_distribution="exponential", seed=3)
    full = simulate(make_scenario(**kw)).step_times_s[1:].mean()
    backup = simulate(make_scenario(**kw, backup_workers=2)).step_times_s[1:].mean()
    assert backup < full


def test_trace_is_columnar_and_exports_to_chrome():
    scn = make_scenario("v100", "resnet50_224", "multi_worker_mirrored", 2, 2, global_batch=128, num_buckets=3, steps=5)
    tl = simulate(scn)
    tr = tl.trace
    assert set(EVENT_KINDS[k] for k in np.unique(tr.kind)) == {"input", "compute", "comm", "update"} | (
        {"idle"} if (tr.kind == EVENT_KINDS.index("idle")).any() else set())
    assert np.all(tr.end_s > tr.start_s)
    assert {"w0/input", "w1/r1", "w1/r1/comm"} <= set(tr.devices)
    # steps x (buckets + the metric all-reduces after the update) x replicas
    assert (tr.kind == EVENT_KINDS.index("comm")).sum() == 5 * (3 + 1) * 4
    chrome = json.loads(json.dumps(tr.to_chrome_trace()))
    assert len([e for e in chrome["traceEvents"] if e["ph"] == "X"]) == len(tr)
    # Each replica's compute events do not overlap in time.
    for d in range(len(tr.devices)):
        m = (tr.device == d) & (tr.kind == EVENT_KINDS.index("compute"))
        order = np.argsort(tr.start_s[m])
        assert np.all(tr.start_s[m][order][1:] >= tr.end_s[m][order][:-1] - 1e-12)


def test_async_prediction_reports_staleness():
    scn = make_scenario("this_machine_core", "mnist_mlp", "parameter_server", 4, 1, physical_cores=1,
                        global_batch=128, steps=500, compute_distribution="exponential",
                        inter_link={"preset": "localhost_grpc", "bandwidth_Bps": 1e15, "latency_s": 0.0})
    r = predict(scn)
    assert r.staleness is not None and len(r.staleness.staleness) == 4 * 500
    # Free communication, immediate pulls: mean staleness N - 1 (here within 3% over 2000 updates).
    assert r.summary.mean_staleness == pytest.approx(3.0, rel=0.03)
    assert r.source == "predicted" and r.trace is not None and len(r.trace) > 0


def test_result_round_trips_with_scenario(tmp_path):
    from distsim.results.result import Result

    r = predict(make_scenario("k80", "mnist_mlp", "mirrored", devices_per_worker=2, global_batch=64, steps=3))
    back = Result.load(r.save(tmp_path / "r.json"))
    assert back.scenario == r.scenario and back.summary == r.summary


@pytest.mark.parametrize("over, match", [
    ({"training.global_batch": [64, 0]}, r"training\.global_batch=0"),
    ({"cluster.inter_link.bandwidth_Bps": [1e9, -3.0]}, r"cluster\.inter_link\.bandwidth_Bps=-3\.0"),
    ({"strategy.algorithm": ["ring", "butterfly"]}, r"strategy\.algorithm='butterfly'"),
    ({"cluster.devices_per_worker": [1, 4], "training.drop_remainder": [True], "training.global_batch": [2]},
     r"training\.global_batch=2; allowed: >= 4"),
    ({}, r"over=\{\}"),
])
def test_sweep_rejects_invalid_values(over, match):
    scn = make_scenario("k80", "mnist_mlp", "mirrored", devices_per_worker=1, global_batch=64)
    with pytest.raises(ValueError, match=match):
        sweep(scn, over)


# ---- host costs: dispatch, processes below one core, metric all-reduces, PS requests ----------------------
def _cpu(n_local, workers=1, cores=2.0, dispatch=1e-3, overhead=5e-4, batch=192, latency=0.0, variable=0.0,
         strategy=None, **kw):
    strategy = strategy or ("multi_worker_mirrored" if workers > 1 else ("mirrored" if n_local > 1 else "one_device"))
    return make_scenario(
        {"preset": "this_machine_core", "step_overhead_s": overhead, "replica_dispatch_s": dispatch,
         "replica_variable_s": variable},
        {"preset": "mnist_mlp", "input_s_per_sample": 0.0}, strategy, num_workers=workers,
        devices_per_worker=n_local, physical_cores=cores, global_batch=batch, optimizer_bytes_per_param=0,
        intra_link={"preset": "shared_memory", "bandwidth_Bps": 1e15, "latency_s": 0.0},
        inter_link={"preset": "localhost_grpc", "bandwidth_Bps": 1e15, "latency_s": latency}, steps=6, **kw)


@settings(max_examples=30, deadline=None)
@given(local=st.integers(1, 4), workers=st.integers(1, 3), dispatch=st.sampled_from([0.0, 2e-4, 3e-3]),
       cores=st.sampled_from([0.5, 2.0 / 3.0, 1.0, 2.0]), batch=st.integers(1, 32), metrics=st.integers(0, 4))
def test_cpu_timeline_and_closed_form_with_host_costs_equal_the_oracle(local, workers, dispatch, cores, batch,
                                                                      metrics):
    scn = _cpu(local, workers, cores, dispatch, batch=batch * local * workers, metric_values=metrics)
    oracle = oracle_model.sync_step_times(scn)[2:]
    # Deterministic: the same arithmetic in another order, float rounding only.
    np.testing.assert_allclose(simulate(scn).step_times_s[2:], oracle, rtol=1e-9)
    np.testing.assert_allclose(float(_model(scn).step_time_s), oracle, rtol=1e-9)


@settings(max_examples=20, deadline=None)
@given(local=st.integers(1, 4), dispatch=st.sampled_from([2e-4, 3e-3]), share=st.sampled_from([0.0, 0.4, 1.0]),
       batch=st.integers(1, 32))
def test_central_storage_timeline_and_closed_form_equal_the_oracle(local, dispatch, share, batch):
    scn = _cpu(local, dispatch=dispatch, variable=share * dispatch, batch=batch * local, strategy="central_storage")
    oracle = oracle_model.sync_step_times(scn)[2:]
    # Deterministic: the same arithmetic in another order, float rounding only.
    np.testing.assert_allclose(simulate(scn).step_times_s[2:], oracle, rtol=1e-9)
    np.testing.assert_allclose(float(_model(scn).step_time_s), oracle, rtol=1e-9)


def test_central_storage_pays_the_variables_dispatch_once_per_step():
    d, v, local = 3e-3, 1e-3, 4
    # 4 examples per replica: compute (about 0.1 ms) stays below the dispatch,
    # so the host's dispatch alone sets the step: overhead + dispatches + q.
    mirrored, central = (float(_model(_cpu(local, dispatch=d, variable=v, batch=16, strategy=s)).step_time_s)
                         for s in ("mirrored", "central_storage"))
    # Mirrored dispatches L (d) per step; central storage v + L (d - v). The
    # two all-reduce schedules differ too, by about 1e-9 s at 1e15 bytes/s.
    assert mirrored - central == pytest.approx((local - 1) * v, abs=1e-8)
    # One replica: nothing to share, the same step either way.
    one = [float(_model(_cpu(1, dispatch=d, variable=v, batch=4, strategy=s)).step_time_s)
           for s in ("mirrored", "central_storage")]
    assert one[0] == pytest.approx(one[1], rel=1e-12)


def test_variables_share_above_the_dispatch_is_refused():
    with pytest.raises(ValueError, match=r"replica_variable_s=0\.002.*<= replica_dispatch_s=0\.001"):
        _cpu(2, dispatch=1e-3, variable=2e-3)
    # In a sweep each value alone is valid; one grid point pairs them badly.
    over = {"cluster.device.replica_dispatch_s": [1e-3, 1e-4], "cluster.device.replica_variable_s": [0.0, 5e-4]}
    with pytest.raises(ValueError, match=r"cluster\.device\.replica_variable_s=0\.0005; allowed: <= replica_dispatch_s=0\.0001"):
        sweep(_cpu(2, dispatch=1e-3), over)


def test_replicas_on_shared_cores_take_turns_with_the_hosts_dispatch():
    # q: one replica's compute on both cores; the host dispatches 4 replicas, d each.
    one = _cpu(1, dispatch=0.0, overhead=0.0)
    for d in (1e-4, 2e-3):
        q = float(_model(one.replace("training.global_batch", 48)).step_time_s)  # 48 examples on all cores
        four = _model(_cpu(4, dispatch=d, overhead=0.0))
        # By hand: each dispatch needs the cores the compute holds, so nothing overlaps: 4 (d + q), not the
        # flow shop's 4 max(d, q) + min(d, q) (refuted by benchmarks/bench_dispatch_overlap.py).
        assert float(four.step_time_s) == pytest.approx(4 * (d + q), rel=1e-6)


def test_a_process_below_one_core_runs_its_host_work_slower():
    full = _model(_cpu(1, cores=1.0, batch=1))
    third = _model(_cpu(1, cores=1.0 / 3.0, batch=1))
    # Overhead and dispatch (1.5 ms) stretch 3x; one example's compute does too.
    assert float(third.step_time_s) == pytest.approx(3 * float(full.step_time_s), rel=1e-9)


def test_metric_all_reduces_cost_latency_across_processes_only():
    lat = 1e-3
    two = [_model(_cpu(1, workers=2, cores=1.0, latency=lat, metric_values=m)).step_time_s for m in (0, 4)]
    # By hand: a ring of 4 bytes over 2 ranks, 2(p - 1) steps of alpha + (n / p) / B.
    ring = 2 * (2 - 1) * (lat + 4.0 / 2 / 1e15)
    assert float(two[1] - two[0]) == pytest.approx(4 * ring, rel=1e-9)
    # Inside one process the metric reads are no collectives.
    local = [_model(_cpu(2, metric_values=m)).step_time_s for m in (0, 4)]
    assert float(local[1]) == float(local[0])


def test_ps_request_cost_caps_throughput_at_the_server():
    base = make_scenario("this_machine_core", "mnist_mlp", "parameter_server", num_workers=4, global_batch=64,
                         physical_cores=0.5, steps=200)
    free = predict(base)
    busy = predict(base.replace("cluster.inter_link.request_s", 5e-3))
    # Each update needs a pull and a push, each holding the PS for at least request_s.
    assert busy.summary.throughput_samples_per_s <= 16 / (2 * 5e-3) * (1 + 1e-9)
    assert busy.summary.throughput_samples_per_s < free.summary.throughput_samples_per_s


def test_an_in_process_ps_cluster_serves_whole_transfers_one_at_a_time():
    # Latency-bound link: 4 ms per transfer, nothing for bytes or requests. Each CPU device its own hardware
    # (physical_cores None): on shared cores the one process would serve the workers' compute in turn too.
    base = make_scenario("this_machine_core", "mnist_mlp", "parameter_server", num_workers=4, global_batch=64,
                         physical_cores=None, steps=400, seed=3,
                         inter_link={"preset": "localhost_grpc", "bandwidth_Bps": 1e15, "latency_s": 4e-3})
    apart = predict(base)
    together = predict(base.replace("strategy.ps_cluster", "in_process"))
    updates_per_s = together.summary.throughput_samples_per_s / 16
    # One process handles pull and push end to end: at most 1 / (2 x 4 ms) updates per second,
    # and with 4 workers offering more than that it runs at the cap (within 2 % for
    # the event simulation's start-up over 1,600 updates).
    assert updates_per_s == pytest.approx(1 / (2 * 4e-3), rel=0.02)
    assert updates_per_s <= 1 / (2 * 4e-3) * (1 + 1e-9)
    # Separate processes only queue for bytes (none here): the 4 workers overlap their transfers.
    assert apart.summary.throughput_samples_per_s > 1.5 * together.summary.throughput_samples_per_s


def test_ps_cluster_must_be_a_known_hosting():
    with pytest.raises(ValueError, match=r"ps_cluster.*'threads'.*'processes'"):
        make_scenario("this_machine_core", "mnist_mlp", "parameter_server", ps_cluster="threads")


_LAYERED = {"name": "layered", "num_params": 1_000_000, "flops_per_sample": 2e9, "num_examples": 100_000,
            "num_gradient_tensors": 6, "tensor_params": [1000, 9000, 90_000, 400_000, 480_000, 20_000],
            "tensor_ready": [1.0, 0.95, 0.8, 0.5, 0.2, 0.05]}


@settings(max_examples=30, deadline=None)
@given(grouping=st.sampled_from(["per_tensor", "pack", "fusion"]), workers=st.integers(2, 4), local=st.integers(1, 4),
       bytes_per_pack=st.sampled_from([0, 100_000, 2_000_000]), cycle_ms=st.sampled_from([0.5, 5.0, 50.0]),
       threshold=st.sampled_from([0, 1_000_000, 64 * 2**20]))
def test_timeline_equals_closed_form_for_every_grouping(grouping, workers, local, bytes_per_pack, cycle_ms, threshold):
    knobs = {"bytes_per_pack": bytes_per_pack} if grouping == "pack" else {}
    if grouping == "fusion":
        knobs = {"fusion_cycle_s": cycle_ms / 1e3, "fusion_threshold_bytes": threshold}
    scn = make_scenario("v100", _LAYERED, "multi_worker_mirrored", workers, local, inter_link="ethernet_10g",
                        global_batch=32 * workers * local, grouping=grouping, steps=5, **knobs)
    steps = simulate(scn).step_times_s
    # The timeline finds each collective's start as the latest replica's tensor
    # and chains them; the closed form does the same on the slowest replica:
    # float rounding only.
    np.testing.assert_allclose(steps[2:], float(_model(scn).step_time_s), rtol=1e-9)


def test_one_collective_per_tensor_overlaps_the_backward_pass():
    # Ethernet makes the 4 MB gradient cost more than the backward pass; sending each
    # tensor as it is ready hides part of it, which one collective after the backward cannot.
    kw = dict(inter_link="ethernet_10g", global_batch=64, steps=5)
    after = float(_model(make_scenario("v100", _LAYERED, "multi_worker_mirrored", 2, 1, **kw)).step_time_s)
    per = float(_model(make_scenario("v100", _LAYERED, "multi_worker_mirrored", 2, 1, grouping="per_tensor",
                                     **kw)).step_time_s)
    assert per < after


def test_a_100000_device_prediction_is_finite_and_traces_64_replicas():
    scn = make_scenario("v100", "resnet50_224", "multi_worker_mirrored", 12_500, 8, intra_link="nvlink2",
                        inter_link="infiniband_hdr", global_batch=800_000, shard_policy="FILE", num_files=12_500,
                        compute_distribution="lognormal", steps=5)
    result = predict(scn)
    s = result.summary
    assert all(np.isfinite(v) and v > 0 for v in (s.step_time_s, s.throughput_samples_per_s, s.speedup,
                                                   s.efficiency, s.epoch_time_s))
    rows = {d for d in result.trace.devices if not d.endswith(("/comm", "/input"))}
    assert len(rows) == 64
    # The first workers' replicas and the last worker's, by their real names.
    assert {"w0/r0", "w6/r7", "w12499/r0", "w12499/r7"} <= rows
    assert "64 of 100,000" in result.meta["trace_replicas"]


def test_stragglers_outside_the_trace_still_set_the_step():
    # 1,000 workers, 64 traced: the all-reduce waits for the slowest of all 1,000, so it
    # never starts before a traced replica is done, and usually (936 of 1,000 chances
    # a step) after all of them.
    kw = dict(global_batch=64_000, steps=4, shard_policy="FILE", num_files=1000,
              workload={"preset": "resnet50_224", "input_s_per_sample": 0.0})
    scn = make_scenario("v100", strategy="multi_worker_mirrored", num_workers=1000, compute_distribution="lognormal",
                        compute_sigma=0.3, **kw)
    run = simulate(scn)
    t = run.trace
    backward = np.array([lab.startswith("backward") for lab in t.labels])[t.label]
    later = 0
    for step in range(4):
        traced_end = t.end_s[backward & (t.step == step)].max()
        comm = (t.kind == EVENT_KINDS.index("comm")) & (t.step == step)
        assert t.start_s[comm].min() >= traced_end
        later += t.start_s[comm].min() > traced_end  # someone untraced finished later
    assert later >= 2
    deterministic = make_scenario("v100", strategy="multi_worker_mirrored", num_workers=1000, **kw)
    assert np.all(run.step_times_s[1:] > simulate(deterministic).step_times_s[1:])
