"""predict, sweep and sharding agree on an epoch, for every shard policy.

The independent reference is :func:`distsim.mechanics.sharding.step_assignments`,
which builds every step's example indices replica by replica; the engines use
the closed form :func:`distsim.mechanics.sharding.epoch`. The properties reach
the regions that once gave silent wrong numbers: a global batch larger than
the dataset, datasets smaller than the replica count, OFF sharding (every
worker reads everything, so an epoch has W times the steps), FILE sharding with
uneven files, drop_remainder, and huge datasets.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from distsim import InputError, make_scenario, predict, sweep
from distsim.mechanics import sharding


@st.composite
def layouts(draw):
    workers = draw(st.integers(1, 4))
    devices = draw(st.integers(1, 3))
    n = draw(st.integers(1, 120))
    batch = draw(st.integers(1, n))
    policy = draw(st.sampled_from(["DATA", "OFF", "FILE"]) if workers > 1 else st.just("DATA"))
    files = draw(st.integers(workers, min(n, workers + 3))) if policy == "FILE" and n >= workers else None
    if policy == "FILE" and files is None:
        policy = "DATA"
    drop = draw(st.booleans()) and batch >= workers * devices
    return workers, devices, n, batch, policy, files, drop


def _scenario(workers, devices, n, batch, policy, files, drop):
    strategy = "multi_worker_mirrored" if workers > 1 else "mirrored"
    return make_scenario("gtx_1080_ti", {"preset": "mnist_mlp", "num_examples": n}, strategy, workers, devices,
                         global_batch=batch, shard_policy=policy, num_files=files, drop_remainder=drop, steps=6)


@settings(max_examples=120, deadline=None)
@given(layouts())
def test_predict_sweep_and_sharding_agree_on_steps_per_epoch(layout):
    workers, devices, n, batch, policy, files, drop = layout
    reference = len(sharding.step_assignments(n, batch, workers, devices, drop, policy, files))
    scenario = _scenario(*layout)
    if reference == 0:  # every stream shorter than a batch and dropped: no step at all
        with pytest.raises(InputError, match="training.global_batch"):
            predict(scenario)
        return
    result = predict(scenario)
    table = sweep(scenario, {"training.global_batch": [batch]})
    assert result.summary.steps_per_epoch == reference
    assert table["steps_per_epoch"][0] == reference
    assert sharding.steps_per_epoch(n, batch, workers, devices, drop, policy, files) == reference


@settings(max_examples=60, deadline=None)
@given(layouts())
def test_predict_and_sweep_agree_on_throughput_and_epoch_time(layout):
    scenario = _scenario(*layout)
    try:
        result = predict(scenario)
    except InputError:
        return  # an epoch with no step: refused (checked above)
    table = sweep(scenario, {"training.global_batch": [scenario.training.global_batch]})
    s = result.summary
    # Deterministic compute: the timeline's total time is the closed form's (steady.run_time_s),
    # to float rounding (1e-9 relative).
    assert s.step_time_s == pytest.approx(table["step_time_s"][0], rel=1e-9)
    assert s.throughput_samples_per_s == pytest.approx(table["throughput_samples_per_s"][0], rel=1e-9)
    # One time defines both (issue 24, item 2): throughput x epoch time is the epoch's examples, as
    # sharding.step_assignments builds them replica by replica (an independent count), to within one
    # global batch (the run's steps need not hold whole epochs). Under DATA only: under FILE/OFF the
    # engines price the final step at an estimated size (sharding.Epoch.last_examples, documented).
    workers, devices, n, batch, policy, files, drop = layout
    if policy == "DATA":
        examples = sum(len(r) for step in sharding.step_assignments(n, batch, workers, devices, drop, policy, files)
                       for r in step)
        assert abs(s.throughput_samples_per_s * s.epoch_time_s - examples) <= batch * (1 + 1e-12)
    assert s.epoch_time_s == pytest.approx(table["epoch_time_s"][0], rel=1e-9)
    assert s.strong_speedup == pytest.approx(table["strong_speedup"][0], rel=1e-9)


def test_off_sharding_epochs_are_num_workers_times_longer():
    # Under OFF every worker reads all 60,000 examples and a step takes a quarter of a global
    # batch (16 examples) from each: 60,000 / 16 = 3,750 steps (predict used DATA's 938 before).
    data, off = (make_scenario("gtx_1080_ti", "mnist_mlp", "multi_worker_mirrored", 4, 1, global_batch=64,
                               shard_policy=p) for p in ("DATA", "OFF"))
    assert predict(data).summary.steps_per_epoch == 938
    assert predict(off).summary.steps_per_epoch == 60000 // 16 == sharding.steps_per_epoch(60000, 64, 4, 1, policy="OFF")


@pytest.mark.parametrize("batch", [60_001, 120_000, 10**9])
def test_a_global_batch_larger_than_the_dataset_is_refused(batch):
    with pytest.raises(InputError, match=r"training\.global_batch=.*<= workload\.num_examples=60,000"):
        make_scenario("this_machine_core", "mnist_mlp", "mirrored", devices_per_worker=4, physical_cores=2,
                      global_batch=batch)


@pytest.mark.parametrize("policy, files", [("DATA", None), ("OFF", None), ("FILE", 3)])
def test_tiny_datasets_smaller_than_the_replica_count(policy, files):
    # 3 examples on 2 workers x 4 devices: replicas past the data get empty batches.
    scenario = make_scenario("gtx_1080_ti", {"preset": "mnist_mlp", "num_examples": 3}, "multi_worker_mirrored", 2, 4,
                             global_batch=3, shard_policy=policy, num_files=files)
    s = predict(scenario).summary
    assert s.steps_per_epoch == len(sharding.step_assignments(3, 3, 2, 4, False, policy, files))
    assert np.isfinite([s.step_time_s, s.epoch_time_s, s.throughput_samples_per_s]).all()


def test_huge_datasets_stay_closed_form():
    n = 10**12  # a trillion examples: the epoch is arithmetic, not a list of steps
    s = predict(make_scenario("v100", {"preset": "resnet50_224", "num_examples": n}, "mirrored", 1, 8,
                              global_batch=512)).summary
    assert s.steps_per_epoch == -(-n // 512)
    assert np.isfinite(s.epoch_time_s) and s.epoch_time_s == pytest.approx(s.steps_per_epoch * s.step_time_s, rel=1e-6)


@st.composite
def wide_layouts(draw):
    # Up to 9 workers x 4 replicas, with uneven files: streams of three lengths, and remainders whose
    # rebatched chunks start at every position of the cycle, which the closed form covers with two
    # candidate workers per stream length.
    workers, devices = draw(st.integers(2, 9)), draw(st.integers(1, 4))
    n = draw(st.integers(workers, 240))
    policy = draw(st.sampled_from(["DATA", "OFF", "FILE"]))
    files = draw(st.integers(workers, min(n, 3 * workers + 2))) if policy == "FILE" else None
    return n, draw(st.integers(1, n)), workers, devices, draw(st.booleans()), policy, files


@settings(max_examples=400, deadline=None)
@given(wide_layouts())
def test_closed_form_epoch_equals_the_per_example_assignment(layout):
    n, batch, workers, devices, drop, policy, files = layout
    steps = sharding.step_assignments(n, batch, workers, devices, drop, policy, files)
    sizes = [sum(len(replica) for replica in step) for step in steps]
    shape = sharding.epoch(n, batch, workers, devices, drop, policy, files)
    assert int(shape.steps) == len(steps)
    assert int(shape.examples) == sum(sizes)
    if policy == "DATA":
        assert int(shape.last_examples) == (sizes[-1] if sizes else 0)


def test_closed_form_epoch_is_vectorised_over_rows_with_many_workers():
    # ImageNet in 12,500 files on 12,500 workers x 8 replicas (N = 100,000), 40,000 global batches at once:
    # 5e8 per-worker cells, had the closed form looked at every worker.
    batches = np.arange(128_000, 128_000 + 40_000 * 64, 64)
    shape = sharding.epoch(1_281_167, batches, 12_500, 8, False, "FILE", 12_500)
    assert (shape.examples == 1_281_167).all()  # FILE without drop_remainder reads every example once
    # By hand: each worker holds one file, of 103 examples (workers 0..6,666: 1,281,167 mod 12,500 = 6,667) or
    # 102, fewer than its share of a batch, so its stream is one remainder cut into chunks of b // N or
    # b // N + 1 examples, the larger ones at cycle positions below b mod N. A 103-example worker whose
    # chunks start at or past b mod N (one exists when ceil((b mod N) / 8) <= 6,666) gets only the small ones:
    # ceil(103 / (b // N)) chunks, 8 per step, and no worker needs more.
    small = batches // 100_000
    hand = -(-(-(-103 // small)) // 8)
    rows = -(-(batches % 100_000) // 8) <= 6_666
    assert rows.sum() > 20_000 and (shape.steps[rows] == hand[rows]).all()
