"""Real synchronous strategies on this machine's CPU: what they measure, and that they agree.

Every run is a fresh process (or two) started by ``distsim.real.run``. All runs
train the same seeded MLP on the same shuffled MNIST batches (global batch 64).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from distsim.real.experiment import NoTPUError, run, tpu_status
from distsim.real.plan import RunPlan
from distsim.results.result import Result
from distsim.scenario import make_scenario

pytestmark = pytest.mark.tf

STEPS, EPOCHS = 12, 2
BASE = dict(per_replica_batch=64, steps_per_epoch=STEPS, epochs=EPOCHS, shuffle_buffer=512, seed=3, n_train=768)
HALF = {**BASE, "per_replica_batch": 32}

# Per-step losses are recovered from Keras' float32 running means as
# k m_k - (k-1) m_(k-1), which scales their rounding (2^-24 relative) by up to
# 2k with k <= STEPS = 12 steps into the epoch: about 1.4e-6 relative. Runs that
# compute the same numbers may differ by that much and no more.
FLOAT_TOL = 2 * 2 * STEPS * 2.0**-24


@pytest.fixture(scope="module")
def one_device():
    return run(RunPlan("one_device", **BASE), progress=False, timeout_s=300)


@pytest.fixture(scope="module")
def mirrored2():
    return run(RunPlan("mirrored", replicas_per_worker=2, **HALF), progress=False, timeout_s=300)


@pytest.fixture(scope="module")
def multi_worker2():
    return run(RunPlan("multi_worker_mirrored", num_workers=2, **HALF), progress=False, timeout_s=300)


def test_a_measured_result_has_per_step_times_curve_trace_and_provenance(one_device, tmp_path):
    r = one_device
    n = STEPS * EPOCHS
    assert r.source == "measured" and r.strategy == "one_device"
    assert (r.num_replicas, r.global_batch, r.per_replica_batch) == (1, 64, 64)
    assert len(r.step_times_s) == n and np.all(r.step_times_s > 0)
    assert r.summary.throughput_samples_per_s == pytest.approx(64 / r.summary.step_time_s)
    # The per-step curve: one entry per step, training makes progress.
    assert list(r.curve.step) == list(range(1, n + 1))
    assert np.all(np.isfinite(r.curve.loss)) and np.all((r.curve.accuracy >= 0) & (r.curve.accuracy <= 1))
    assert r.curve.loss[-4:].mean() < r.curve.loss[:4].mean()
    assert np.all(np.diff(r.curve.time_s) > 0)
    # Trace: one measured step per event, in order, not overlapping.
    events = list(r.trace.events())
    assert len(events) == n and {e.device for e in events} == {"worker0"}
    assert all(a.end_s <= b.start_s for a, b in zip(events, events[1:]))
    for key in ("tf_version", "keras_version", "device", "cpu_model", "date", "command", "cross_device_op"):
        assert r.meta[key], key
    assert r.meta["keras_version"].startswith("tf_keras")
    assert json.loads(r.meta["plan"])["strategy"] == "one_device"
    again = Result.load(r.save(tmp_path / "r.json"))
    np.testing.assert_array_equal(again.step_times_s, r.step_times_s)


def test_steps_per_execution_runs_every_step(one_device):
    # Keras counts steps_per_epoch in batches even when one call runs several:
    # 4 steps per call must still train on all STEPS batches of each epoch and
    # end where one step per call ends (same batches, same order).
    r = run(RunPlan("one_device", steps_per_execution=4, **BASE), progress=False, timeout_s=300)
    assert len(r.step_times_s) * 4 == STEPS * EPOCHS  # one timed entry per call of 4 steps
    np.testing.assert_allclose(
        json.loads(r.meta["epoch_loss"]), json.loads(one_device.meta["epoch_loss"]), rtol=1e-5
    )  # float32 reassociation inside the multi-step function, far below a lost step's effect


def test_multi_worker_over_two_processes_trains_exactly_like_mirrored_over_two_devices(mirrored2, multi_worker2):
    # Same seed, same global batches; DATA auto-sharding gives worker w the
    # same half of each batch that Mirrored gives device w. Each step sums the
    # same two float32 gradients (a + b in either order), so the weights stay
    # equal and the losses agree up to how precisely per-step values come back
    # out of Keras' float32 running means (see FLOAT_TOL).
    assert multi_worker2.num_replicas == mirrored2.num_replicas == 2
    np.testing.assert_allclose(multi_worker2.curve.loss, mirrored2.curve.loss, rtol=FLOAT_TOL)
    np.testing.assert_allclose(multi_worker2.curve.accuracy, mirrored2.curve.accuracy, rtol=FLOAT_TOL)
    # A plain MirroredStrategy() on CPUs sums with TensorFlow's collective ring, as between processes.
    assert mirrored2.meta["cross_device_op"] == "CollectiveAllReduce (ring)"
    assert multi_worker2.meta["cross_device_op"] == "CollectiveAllReduce (ring)"
    # The merged trace holds both workers' measured steps on one clock.
    assert {e.device for e in multi_worker2.trace.events()} == {"worker0", "worker1"}
    assert set(json.loads(multi_worker2.meta["worker_step_time_s"])) == {"worker0", "worker1"}


def test_one_device_and_mirrored_agree_up_to_float32_reassociation(one_device, mirrored2):
    # One device averages 64 examples in one reduction; Mirrored sums two
    # halves of 32. Only the summation order differs: about 1e-7 relative per
    # step, compounding over 24 SGD steps; 1e-4 leaves room for that and no
    # more (a wrong split or a missing /2 would be off by > 1e-2).
    np.testing.assert_allclose(mirrored2.curve.loss, one_device.curve.loss, rtol=1e-4)


def test_central_storage_from_a_scenario_and_the_default_strategy(mirrored2, one_device):
    # The Scenario the simulator predicts, run for real: the same experiment as HALF.
    scenario = make_scenario("this_machine_core", "mnist_mlp", "central_storage", devices_per_worker=2,
                             physical_cores=2, global_batch=64, steps=STEPS, epochs=EPOCHS, shuffle_buffer=512,
                             seed=3)
    central = run(scenario, progress=False, timeout_s=300)
    assert central.scenario == scenario
    assert json.loads(central.meta["plan"])["n_train"] is None  # one epoch of 64 x 12 examples, as HALF
    assert central.num_replicas == 2 and "central" in central.meta["cross_device_op"]
    assert len(json.loads(central.meta["epoch_loss"])) == EPOCHS
    # Gradients summed on the parameter device: the same a + b as Mirrored.
    np.testing.assert_allclose(central.curve.loss, mirrored2.curve.loss, rtol=FLOAT_TOL)
    default = run(RunPlan("default", **BASE), progress=False, timeout_s=300)
    assert default.meta["strategy_class"] == "_DefaultDistributionStrategy"
    # The same single-device computation as OneDeviceStrategy.
    np.testing.assert_allclose(default.curve.loss, one_device.curve.loss, rtol=FLOAT_TOL)


def test_tpu_is_used_when_attached_and_skipped_in_one_line_otherwise():
    available, line = tpu_status()
    assert "\n" not in line
    if available:
        assert line.startswith("TPU found")
    else:
        assert "no TPU" in line
        with pytest.raises(NoTPUError, match="no TPU"):
            run(RunPlan("tpu", steps_per_epoch=2, warmup_steps=0), progress=False, timeout_s=300)


def test_the_simulator_assumes_the_all_reduce_tensorflow_builds(mirrored2):
    # TensorFlow is the independent side: the op a plain MirroredStrategy() built
    # on logical CPUs must be the one distsim prices for the same scenario.
    from distsim.mechanics import strategies

    scenario = make_scenario("this_machine_core", "mnist_mlp", "mirrored", devices_per_worker=2, physical_cores=2)
    assert strategies.plan(scenario).algorithm == "ring"
    assert mirrored2.meta["cross_device_op"].endswith("(ring)")
    forced = run(RunPlan("mirrored", replicas_per_worker=2, cross_device_op="reduction_to_one_device", **HALF),
                 progress=False, timeout_s=300)
    assert forced.meta["cross_device_op"] == "ReductionToOneDevice"
    assert strategies.plan(scenario.replace("strategy.algorithm", "reduce_to_one")).algorithm == "reduce_to_one"
    # Summing two float32 gradients in either op gives the same a + b.
    np.testing.assert_allclose(forced.curve.loss, mirrored2.curve.loss, rtol=FLOAT_TOL)
