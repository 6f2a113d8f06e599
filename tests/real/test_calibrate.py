"""Calibration: the fits recover the simulator's parameters, and a real (small) calibration
writes presets a Scenario can use."""

from __future__ import annotations

import re

import numpy as np
import pytest

from distsim.mechanics.collectives import cost_model
from distsim.engines.prediction import predict
from distsim.real.calibrate import (
    DEVICE_PRESET,
    INTER_LINK_PRESET,
    INTRA_LINK_PRESET,
    OPTIMIZER_BYTES_PER_PARAM,
    PS_BATCH,
    calibrate,
    fit,
    fit_link,
    workload_preset_name,
)
from distsim.real.protocol import TINY_BATCH
from distsim.scenario import PRESET_DIR_ENV, load_preset, make_scenario
from distsim.validation import InputError

pytestmark = pytest.mark.tf


@pytest.mark.parametrize("between_processes, algorithm", [(False, "reduce_to_one"), (True, "ring")])
def test_link_fit_recovers_the_parameters_the_cost_model_was_evaluated_with(between_processes, algorithm):
    alpha, bandwidth = 3e-4, 2.5e8
    ranks = [2, 2, 2, 3, 3, 3] if between_processes else [2, 2, 2, 4, 4, 4]
    sizes = [4096, 2**20, 2**22] * 2
    times = []
    for p, n in zip(ranks, sizes):
        if between_processes:
            times.append(float(cost_model(algorithm, p, ranks_per_node=1).time_s(n, 0, np.inf, alpha, bandwidth)))
        else:
            times.append(float(cost_model(algorithm, p, ranks_per_node=p).time_s(n, alpha, bandwidth)))
    link = fit_link(algorithm, ranks, sizes, times, between_processes=between_processes)
    assert link.latency_s == pytest.approx(alpha, rel=1e-6)
    assert link.bandwidth_Bps == pytest.approx(bandwidth, rel=1e-6)
    np.testing.assert_allclose(link.predicted_s(), times, rtol=1e-9)


def _link(algorithm, ranks, n, alpha, bandwidth, between_processes, **options):
    if between_processes:
        return float(cost_model(algorithm, ranks, ranks_per_node=1, **options).time_s(n, 0, np.inf, alpha, bandwidth))
    return float(cost_model(algorithm, ranks, ranks_per_node=ranks, **options).time_s(n, alpha, bandwidth))


def test_fit_recovers_overhead_dispatch_slope_and_request_from_synthetic_rounds():
    # Micro-benchmark rounds built from known host costs with the simulator's own formulas.
    overhead, dispatch, variable, per_example, request = 1.1e-3, 0.8e-3, 0.3e-3, 6e-6, 2e-3
    memory, grad = 2e10, 101770 * 4
    update = 101770 * OPTIMIZER_BYTES_PER_PARAM / memory
    intra, inter = (3e-5, 4e10), (1.5e-3, 3e8)
    batches, sizes, counts = [16, 64, 256], [4096, 2**20, 2**22], [1, 2, 3, 4]
    # On shared cores each replica's dispatch and its tiny batch's compute take turns: n (d + q).
    q = TINY_BATCH * per_example
    tiny = [overhead + n * (dispatch + q) + update
            + (_link("reduce_to_one", n, grad, *intra, False) if n > 1 else 0.0) for n in counts]
    # CentralStorage: the variables' share once per step, the rest per replica, and its own reduce.
    central = [overhead + variable + n * (dispatch - variable + q) + update
               + (_link("reduce_to_one", n, grad, *intra, False, extra_root=True) if n > 1 else 0.0)
               for n in counts]
    local = {
        "batches": batches, "step_time_s": [overhead + dispatch + update + b * per_example for b in batches],
        "memory_Bps": memory, "sizes_bytes": sizes,
        "allreduce_s": {str(n): [_link("reduce_to_one", n, m, *intra, False) for m in sizes] for n in (2, 4)},
        "replica_counts": counts, "replica_step_time_s": tiny, "central_step_time_s": central,
        "input_s_per_sample": 5e-6,
        "matmul_flops_per_s": 1e11, "device": "cpu", "cpu_model": "x", "tf_version": "2",
        "cross_device_op": "reduction_to_one_device",
    }
    collective = [{"workers": w, "allreduce_s": [_link("ring", w, m, *inter, True) for m in sizes],
                   "cross_device_op": "ring"} for w in (2, 3)]
    link = inter[0] + grad / inter[1]
    # The PS applies the pushed gradient too (the engine prices that apply: ps_apply_s), so it is not request time.
    ps_update = overhead + dispatch + PS_BATCH * per_example + 2 * (link + request) + update
    cal = fit([local], collective, [ps_update], workload="mnist_mlp", physical_cores=2)
    # Exact inputs, so only float rounding separates the fit from the truth.
    assert cal.compute_s_per_example == pytest.approx(per_example, rel=1e-6)
    assert cal.replica_dispatch_s == pytest.approx(dispatch, rel=1e-6)
    assert cal.replica_variable_s == pytest.approx(variable, rel=1e-6)
    assert cal.step_overhead_s == pytest.approx(overhead, rel=1e-6)
    assert cal.ps_request_s == pytest.approx(request, rel=1e-6)


def test_fit_refuses_step_times_that_do_not_grow_with_the_batch():
    # A real run once measured batch 128 faster than batch 16 (noise above the ~0.6 ms of compute between them);
    # the slope's efficiency came out negative, and only the preset's validation stopped it, deep inside.
    local = {"batches": [16, 128], "step_time_s": [2.0e-3, 1.9e-3]}
    expected = "local_rounds.step_time_s=[0.002, 0.0019]; allowed: step times that grow with the batch"
    with pytest.raises(InputError, match="^" + re.escape(expected)):
        fit([local], [{"workers": 2}], [1e-2], workload="mnist_mlp", physical_cores=2)


def _flat_collective(times_s):
    """One 2-worker collective round whose all-reduce times per size are ``times_s``."""
    return [{"workers": 2, "allreduce_s": list(times_s)}]


def _local_round(sizes):
    """A local round whose step times grow with the batch and whose in-process all-reduce is a clean line."""
    return {"batches": [16, 256], "step_time_s": [1e-3, 2e-3], "memory_Bps": 3e10, "sizes_bytes": sizes,
            "allreduce_s": {"2": [1e-5 + m / 1e10 for m in sizes]}, "replica_counts": [1, 2],
            "replica_step_time_s": [1e-3, 1.5e-3], "central_step_time_s": [1e-3, 1.4e-3], "input_s_per_sample": 5e-6,
            "matmul_flops_per_s": 1e11, "device": "cpu", "cpu_model": "x", "tf_version": "2",
            "cross_device_op": "reduction_to_one_device"}


def test_fit_refuses_all_reduce_times_that_shrink_with_the_message():
    # 1 MiB measured faster than 4 KiB: the least-squares seconds per byte is negative, and was once clamped to
    # 1e-15 (a link of 1e15 B/s) without a word.
    sizes = [4096, 2**20]
    with pytest.raises(InputError, match=r"^collective_rounds\.allreduce_s=\[0\.002, 0\.0019\]; allowed: all-reduce "
                                         r"times that grow with the message size \(over sizes \[4096, 1048576\] the "
                                         r"fitted seconds per byte is -"):
        fit([_local_round(sizes)], _flat_collective([2e-3, 1.9e-3]), [1e-2], workload="mnist_mlp", physical_cores=2)


def test_fit_refuses_an_inter_process_link_faster_than_memory():
    # A quick real calibration once fitted 4.5 TB/s to gRPC between two processes. By hand: the 2-worker ring moves
    # (n/2) bytes twice per port, so T = 2 alpha + n/B; 1 MiB taking 20 ns more than 4 KiB gives
    # B = (2**20 - 4096) / 2e-8 = 5.22e13 B/s, above the 3e10 B/s of memory that every byte between processes crosses.
    sizes = [4096, 2**20]
    with pytest.raises(InputError, match=r"^collective_rounds\.allreduce_s=\[0\.002, 0\.002\]; allowed: all-reduce "
                                         r"times that give a bandwidth at most this machine's memory bandwidth "
                                         r"\(3e\+10 B/s\), not 5\.22e\+13 B/s"):
        fit([_local_round(sizes)], _flat_collective([2e-3, 2e-3 + 2e-8]), [1e-2], workload="mnist_mlp",
            physical_cores=2)


def test_a_real_calibration_writes_presets_that_scenarios_use(tmp_path, monkeypatch):
    # Batches 16 and 512: about 2.5 ms of compute apart on this CPU, well above a short run's noise. Messages of
    # 4 KiB and 4 MiB: about 10 ms of gRPC bytes apart (at the ~0.4 GB/s measured on 2026-11-23); 1 MiB's 2.5 ms
    # can drown in a busy machine's noise, and the fit now refuses what that gives.
    cal = calibrate(workload="mnist_mlp", repeats=1, workers=(2,), batches=(16, 512), devices=(2,),
                    sizes_bytes=(4096, 2**22), steps=20, preset_dir=tmp_path, out=tmp_path / "calibration.json",
                    timeout_s=300)
    # Physical sanity of what was measured (not its speed: the machine is shared).
    assert cal.compute_s_per_example > 0 and cal.step_overhead_s >= 0
    assert cal.replica_counts == [1, 2] and cal.replica_dispatch_s >= 0
    assert 0 <= cal.replica_variable_s <= cal.replica_dispatch_s
    assert cal.ps_update_s > 0 and cal.ps_request_s >= 0
    assert 0 < cal.efficiency <= 1
    assert cal.intra.bandwidth_Bps > 0 and cal.inter.bandwidth_Bps > 0
    # Physics: two processes cannot all-reduce 4 MiB faster than one copy of it through memory. The collective part
    # once built a strategy that missed TF_CONFIG and "all-reduced" within one process in 9 us.
    assert cal.inter.time_s[-1] > 2**22 / cal.memory_Bps
    assert cal.meta["inter_cross_device_op"] == "CollectiveAllReduce (ring)"
    assert (tmp_path / "calibration.json").exists()
    monkeypatch.setenv(PRESET_DIR_ENV, str(tmp_path))
    device, sources = load_preset("device", DEVICE_PRESET)
    assert device["step_overhead_s"] == pytest.approx(cal.step_overhead_s)
    assert "intercept" in sources["step_overhead_s"]
    assert device["replica_dispatch_s"] == pytest.approx(cal.replica_dispatch_s)
    assert device["replica_variable_s"] == pytest.approx(cal.replica_variable_s)
    link, _ = load_preset("link", INTER_LINK_PRESET)
    assert link["request_s"] == pytest.approx(cal.ps_request_s)
    scenario = make_scenario(DEVICE_PRESET, workload_preset_name("mnist_mlp"), "mirrored", devices_per_worker=2,
                             physical_cores=2, intra_link=INTRA_LINK_PRESET, inter_link=INTER_LINK_PRESET,
                             global_batch=64, steps=4)
    assert scenario.workload.input_s_per_sample == pytest.approx(cal.input_s_per_sample)
    assert predict(scenario).summary.step_time_s > 0
