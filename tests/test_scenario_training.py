"""distsim.numerics.scenario_training: a Scenario trains with real numerics on the predicted clock."""

import numpy as np
import pytest
from input_errors import raises_input

from distsim.engines import asyncps
from distsim.datasets.mnist import mnist_subset
from distsim.engines.prediction import predict
from distsim.results.result import Result
from distsim.scenario import make_scenario
from distsim.numerics.scenario_training import model_for, train_scenario


@pytest.fixture(scope="module")
def data():
    return mnist_subset(512, 200)


def test_sync_scenario_uses_the_predicted_step_time(data):
    scn = make_scenario("gtx_1080_ti", "mnist_mlp", "mirrored", devices_per_worker=4, global_batch=64)
    run = train_scenario(scn, data=data, max_steps=6, learning_rate=0.1)
    step_s = predict(scn).summary.step_time_s
    np.testing.assert_allclose(run.curve.time_s, step_s * np.arange(1, 7))
    r = run.result
    assert r.scenario == scn and r.strategy == "mirrored" and r.num_replicas == 4 and r.global_batch == 64
    assert run.schedule.algorithm == "ring" and run.replica_batch_sizes.shape == (6, 4)
    Result.from_dict(r.to_dict())  # the scenario round-trips with the result


def test_async_scenario_replays_the_predicted_update_log(data):
    scn = make_scenario("k80", "mnist_softmax", "parameter_server", num_workers=3, global_batch=96, steps=20,
                        compute_distribution="exponential")
    run = train_scenario(scn, data=data, learning_rate=0.1)
    pred = predict(scn)
    # Same costs and seed as predict: the same staleness for every update.
    np.testing.assert_array_equal(run.result.staleness.staleness, pred.staleness.staleness)
    assert run.result.summary.mean_staleness == pytest.approx(pred.summary.mean_staleness)
    assert len(run.curve.loss) == 60 and run.result.global_batch == 32
    assert isinstance(run.log, asyncps.UpdateLog)


def test_workload_without_numpy_model_is_rejected():
    scn = make_scenario("v100", "resnet50_224", "mirrored", devices_per_worker=2, global_batch=64)
    with raises_input("workload.name", "'resnet50_224'", "a workload with a NumPy model, one of "
                      "('mnist_mlp', 'mnist_small_cnn', 'mnist_softmax'), or pass model= explicitly"):
        model_for(scn)
    with raises_input("scenario", "'mnist_mlp'", "a distsim.Scenario"):
        model_for("mnist_mlp")


def test_backup_workers_point_to_the_right_function(data):
    scn = make_scenario("gtx_1080_ti", "mnist_softmax", "mirrored", devices_per_worker=4, global_batch=64,
                        backup_workers=1)
    with raises_input("training.backup_workers", "1", "0: train_scenario runs plain synchronous steps (use "
                      "distsim.numerics.asynctrain.train_backup_sync for backup workers)"):
        train_scenario(scn, data=data)
