"""Every prediction names its bottleneck (issue 24, item 4).

Each scenario is built so that its pieces are round numbers of milliseconds,
derived by hand in the comments from the model the docstrings state
(``distsim.engines.steady``, ``distsim.engines.bottleneck``): a CPU device
with no per-step overhead, ``compute_s_per_sample`` and
``input_s_per_sample`` chosen per example, links without latency.
"""

from __future__ import annotations

import io
from contextlib import redirect_stdout

import numpy as np
import pytest

import distsim
from distsim.cli.commands import main
from distsim.engines import bottleneck, steady
from distsim.mechanics.strategies import plan
from distsim.results.compare import compare
from distsim.results.result import Result, Summary

MS = 1e-3
BATCH = 64

#: A CPU device that adds nothing of its own: no step overhead, no dispatch;
#: memory bandwidth 2.4 GB/s so that 12 bytes x 1e6 parameters take 5 ms.
DEVICE = {"preset": "this_machine_core", "step_overhead_s": 0.0, "memory_bandwidth_Bps": 2.4e9}


def _workload(compute_ms: float, input_ms: float, examples_per_step: int = BATCH) -> dict:
    """1e6 parameters (4e6 gradient bytes), ``compute_ms`` per replica step of
    ``examples_per_step`` examples and ``input_ms`` to read them."""
    return {"name": "hand", "num_params": 1_000_000, "flops_per_sample": 1.0, "num_examples": 64_000,
            "compute_s_per_sample": compute_ms * MS / examples_per_step,
            "input_s_per_sample": input_ms * MS / examples_per_step}


def _link(bandwidth_Bps: float, full_duplex: bool = True) -> dict:
    return {"name": "hand_link", "bandwidth_Bps": bandwidth_Bps, "latency_s": 0.0, "full_duplex": full_duplex}


def _one_device(compute_ms, input_ms, prefetch, optimizer_bytes=0):
    return distsim.make_scenario(DEVICE, _workload(compute_ms, input_ms), "one_device", global_batch=BATCH,
                                 prefetch=prefetch, optimizer_bytes_per_param=optimizer_bytes, steps=3)


def _summary(scenario):
    s = distsim.predict(scenario).summary
    return s.bottleneck, s.bottleneck_share


def test_input_with_prefetch_takes_the_whole_step():
    # input 3 ms, compute 1 ms, overlapped: the step is max(3, 1) = 3 ms, all of it input.
    kind, share = _summary(_one_device(1, 3, prefetch=True))
    assert kind == "input" and share == pytest.approx(1.0)


def test_input_without_prefetch_is_its_part_of_the_sum():
    # input 3 ms then compute 1 ms: a 4 ms step, input 3/4 of it.
    kind, share = _summary(_one_device(1, 3, prefetch=False))
    assert kind == "input" and share == pytest.approx(0.75)


def test_compute_with_prefetch_hides_the_input():
    # compute 3 ms, input 1 ms hidden behind it: the step is the 3 ms of compute.
    kind, share = _summary(_one_device(3, 1, prefetch=True))
    assert kind == "compute" and share == pytest.approx(1.0)


def test_memory_is_the_optimizer_update():
    # update: 1e6 params x 12 bytes / 2.4e9 B/s = 5 ms; compute 1 ms, no input: 5 / 6 of a 6 ms step.
    kind, share = _summary(_one_device(1, 0, prefetch=True, optimizer_bytes=12))
    assert kind == "memory" and share == pytest.approx(5 / 6)


def test_communication_is_the_all_reduce_the_backward_pass_does_not_hide():
    # Ring of 2 replicas, one bucket: 2 (p-1)/p x 4e6 bytes / 1e9 B/s = 4 ms after the backward pass;
    # compute 1 ms per replica: a 5 ms step, 4/5 of it communication.
    scenario = distsim.make_scenario(DEVICE, _workload(1, 0), "mirrored", devices_per_worker=2,
                                     intra_link=_link(1e9), global_batch=2 * BATCH, optimizer_bytes_per_param=0,
                                     steps=3)
    kind, share = _summary(scenario)
    assert kind == "communication" and share == pytest.approx(0.8)


def _async(optimizer_bytes):
    # 4 workers, a half-duplex link of 4e9 B/s: a transfer of 4e6 bytes holds the PS 1 ms.
    return distsim.make_scenario(DEVICE, _workload(1, 0), "parameter_server", num_workers=4,
                                 inter_link=_link(4e9, full_duplex=False), global_batch=4 * BATCH,
                                 optimizer_bytes_per_param=optimizer_bytes, steps=5)


def test_ps_nic_when_the_workers_transfers_outlast_a_workers_cycle():
    # Per cycle the PS carries 4 workers x (push + pull) = 8 ms; a worker's own cycle is
    # 1 ms compute + 2 ms of transfers = 3 ms. The PS's NIC is the cycle: share 8 / 8.
    kind, share = _summary(_async(optimizer_bytes=0))
    assert kind == "ps_nic" and share == pytest.approx(1.0)


def test_ps_apply_when_applying_the_gradients_dominates_the_ps():
    # Apply: 1e6 x 12 bytes / 2.4e9 B/s = 5 ms per update (a CPU worker's PS host is the same machine);
    # the PS's one station holds 4 x (2 x 1 + 5) = 28 ms per cycle, 20 ms of it applying: 20 / 28.
    kind, share = _summary(_async(optimizer_bytes=12))
    assert kind == "ps_apply" and share == pytest.approx(20 / 28)


def test_every_kind_is_named_by_some_test_above():
    assert set(bottleneck.KINDS) == {"compute", "input", "communication", "ps_nic", "ps_apply", "memory"}


def test_the_sync_pieces_add_up_to_the_closed_form_step():
    # The named pieces are the closed-form step's, nothing left out: 128 V100s over a hierarchical all-reduce,
    # without prefetch so that every piece is on the critical path.
    big = distsim.make_scenario("v100", "resnet50_224", "multi_worker_mirrored", num_workers=16, devices_per_worker=8,
                                intra_link="nvlink2", inter_link="infiniband_hdr", topology="dgx1_v100",
                                algorithm="hierarchical", prefetch=False, global_batch=64 * 128)
    model = steady.step_model(big)
    neck = bottleneck.of_sync(big, plan(big), model.parts)
    assert sum(neck.path_s.values()) == pytest.approx(float(model.step_time_s), rel=1e-12)


def _data_sharded(input_threads):
    # 2 workers, DATA sharding: each reads the whole global batch of 128 examples,
    # 2 x 3 ms on one thread, against 1 ms of compute.
    return distsim.make_scenario(DEVICE, _workload(1, 3), "multi_worker_mirrored", num_workers=2,
                                 inter_link=_link(1e12), global_batch=2 * BATCH, input_threads=input_threads,
                                 optimizer_bytes_per_param=0, metric_values=0, steps=3)


def test_input_dominated_by_data_sharding_and_one_thread_warns_which_fields_to_change():
    result = distsim.predict(_data_sharded(input_threads=1))
    assert result.summary.bottleneck == "input"
    warning = result.meta["warning"]
    for field in ("training.shard_policy='FILE'", "training.num_files >= 2", "training.input_threads"):
        assert field in warning, warning


def test_no_thread_advice_with_several_threads_and_none_without_an_input_bottleneck():
    # 4 threads: 6 / 4 = 1.5 ms of input, still above 1 ms of compute: DATA advice only.
    warning = distsim.predict(_data_sharded(input_threads=4)).meta["warning"]
    assert "shard_policy" in warning and "input_threads" not in warning
    assert "warning" not in distsim.predict(_one_device(3, 1, prefetch=True)).meta


def test_the_cli_table_names_the_bottleneck_and_the_warning(tmp_path):
    path = _data_sharded(input_threads=1).save(tmp_path / "s.json")
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["predict", str(path)]) == 0
    lines = out.getvalue().splitlines()
    # input 6 ms (2 x 64 examples at 3 ms per 64) overlapped with 1 ms of compute: all of the step.
    assert f"{'bottleneck':<24} input (100% of the step)" in lines
    assert any(line.startswith(f"{'warning':<24} input takes 100% of the step") for line in lines)


def test_compare_shows_the_predicted_bottleneck():
    predicted = distsim.predict(_one_device(3, 1, prefetch=True))
    measured = Result(source="measured", strategy="one_device", num_replicas=1, global_batch=BATCH,
                      summary=Summary(step_time_s=0.006, throughput_samples_per_s=BATCH / 0.006))
    table = compare([predicted], [measured])
    assert table.rows[0].bottleneck == "compute" and table.rows[0].bottleneck_share == pytest.approx(1.0)
    assert table.to_text().splitlines()[2].endswith("compute 100%")


def test_results_round_trip_the_bottleneck_and_older_json_still_loads():
    result = distsim.predict(_one_device(1, 3, prefetch=False))
    back = Result.from_dict(result.to_dict())
    assert (back.summary.bottleneck, back.summary.bottleneck_share) == ("input", pytest.approx(0.75))
    old = result.to_dict()
    del old["summary"]["bottleneck"], old["summary"]["bottleneck_share"]
    assert Result.from_dict(old).summary.bottleneck is None


def test_shares_lie_in_zero_one_on_preset_scenarios():
    for strategy, workers, devices in [("mirrored", 1, 4), ("multi_worker_mirrored", 4, 2),
                                       ("parameter_server", 3, 1), ("central_storage", 1, 2)]:
        s = distsim.predict(distsim.make_scenario("gtx_1080_ti", "mnist_mlp", strategy, workers, devices,
                                                  global_batch=256, steps=3)).summary
        assert s.bottleneck in bottleneck.KINDS and 0 < s.bottleneck_share <= 1 and np.isfinite(s.bottleneck_share)


def test_the_dashboard_table_names_the_bottleneck_and_shows_the_warning():
    from distsim.views.widgets import metrics_html

    result = distsim.predict(_data_sharded(input_threads=1))
    pinned = distsim.predict(_one_device(3, 1, prefetch=True)).summary
    table = metrics_html(result.summary, pinned, result.meta["warning"])
    assert '<td class="distsim-bottleneck" data-bottleneck="input">input (100% of the step)</td>' in table
    assert '<td class="distsim-bottleneck-pinned">compute (100% of the step)</td><td>changed</td>' in table
    assert "training.input_threads" in table.split('class="distsim-warning"')[1]


# ------------------------------------------------------------------ ImageNet presets' pipeline defaults

IMAGENET = ("resnet50_224", "resnet101_224", "resnet152_224", "vgg16_224", "inception_v3_299", "alexnet_227")


@pytest.mark.parametrize("workload", IMAGENET)
def test_imagenet_presets_bring_their_1024_files_and_autotune_like_threads(workload):
    t = distsim.make_scenario("v100", workload, "multi_worker_mirrored", num_workers=4, global_batch=256).training
    assert (t.shard_policy, t.num_files, t.input_threads) == ("FILE", 1024, 32)
    _, sources = distsim.scenario.presets.load_preset("workload", workload)
    assert "training_defaults" not in sources  # not a Workload field


def test_the_sharding_default_follows_tensorflows_auto_policy():
    def training(workers, **knobs):
        return distsim.make_scenario("v100", "resnet50_224", "multi_worker_mirrored", num_workers=workers,
                                     global_batch=64 * workers, **knobs).training

    # One worker: nothing to shard. More workers than files: AUTO falls back to DATA (options.py, AutoShardPolicy).
    assert (training(1).shard_policy, training(1).num_files) == ("DATA", None)
    assert (training(1025).shard_policy, training(1025).num_files, training(1025).input_threads) == ("DATA", None, 32)
    assert training(1024).num_files == 1024
    # The scenario's own knobs win, and an inline workload or another preset brings none.
    assert (training(4, shard_policy="DATA").shard_policy, training(4, shard_policy="DATA").num_files) == ("DATA", None)
    assert training(4, input_threads=1).input_threads == 1
    assert distsim.make_scenario("v100", "mnist_mlp", "multi_worker_mirrored", num_workers=4).training.input_threads == 1
    scenario = distsim.make_scenario("v100", "resnet50_224", "multi_worker_mirrored", num_workers=4)
    assert distsim.Scenario.from_dict(scenario.to_dict()) == scenario


def test_the_issues_10000_gpu_what_if_names_input_and_the_fields_to_change():
    # 1,250 DGX-1 workers x 8 V100, 64 images per GPU. 1,024 files < 1,250 workers, so DATA: each worker reads
    # all 640,000 images at 1.4 ms each on 32 threads: 640,000 x 1.4e-3 / 32 = 28 s per step, all of it input.
    big = distsim.make_scenario("v100", "resnet50_224", "multi_worker_mirrored", num_workers=1250, devices_per_worker=8,
                                intra_link="nvlink2", inter_link="infiniband_hdr", topology="dgx1_v100",
                                algorithm="hierarchical", inter_algorithm="nccl_tree", protocol="nccl",
                                grouping="fusion", global_batch=64 * 10_000, steps=3)
    result = distsim.predict(big)
    assert result.summary.bottleneck == "input" and result.summary.bottleneck_share == 1.0
    # The copy to the GPU adds 64 x 602,112 B over NVLink, about 3e-4 of the step: hence rel=1e-3. The full step
    # is the median: the 3 steps are an epoch of 1,281,167 images (two of 640,000, then 1,167), so the mean step,
    # the run's total time over 3, holds the short last step too.
    assert result.summary.median_step_time_s == pytest.approx(640_000 * 1.4e-3 / 32, rel=1e-3)
    assert "training.num_files >= 1,250" in result.meta["warning"]


def test_an_async_worker_bound_by_its_input_is_told_about_threads_not_sharding():
    # 2 workers, each reading its own 64 examples (3 ms on one thread) while computing 1 ms (prefetch), then
    # a push and a pull of 4e6 bytes at 1e12 B/s (4 us each); no apply. The PS carries 2 x 8 us per cycle,
    # less than a worker's own 3 + 0.008 ms: input is 3 / 3.008 of the cycle. Async workers read their own
    # batches whatever the shard policy, so only the thread advice applies.
    scenario = distsim.make_scenario(DEVICE, _workload(1, 3), "parameter_server", num_workers=2,
                                     inter_link=_link(1e12, full_duplex=False), global_batch=2 * BATCH,
                                     optimizer_bytes_per_param=0, steps=5)
    result = distsim.predict(scenario)
    assert result.summary.bottleneck == "input"
    assert result.summary.bottleneck_share == pytest.approx(3 / 3.008, rel=1e-9)
    assert "training.input_threads" in result.meta["warning"] and "shard_policy" not in result.meta["warning"]
