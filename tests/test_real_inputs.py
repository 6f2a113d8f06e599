"""distsim.real refuses arguments it cannot use before it starts any process
(no TensorFlow here: every case fails in the launching process)."""

from __future__ import annotations

import pytest
from input_errors import raises_input

from distsim.real.calibrate import calibrate, calibration_plan, fit
from distsim.real.env import configure_tensorflow
from distsim.real.experiment import as_plan, launch_plan
from distsim.real.fault import load_final_weights, run_ps_with_worker_failure, run_with_failure
from distsim.real.plan import RunPlan
from distsim.validation import InputError, MissingFileError

MWM = RunPlan("multi_worker_mirrored", num_workers=2, per_replica_batch=32, steps_per_epoch=10, epochs=3)


@pytest.mark.parametrize(
    "plan, kwargs, path, value, allowed",
    [
        (RunPlan("mirrored", replicas_per_worker=2), {}, "plan.strategy", "'mirrored'",
         "'multi_worker_mirrored' (one of its workers is killed)"),
        (MWM.with_(epochs=1), {}, "plan.epochs", "1",
         "an integer >= 2 (a checkpoint to resume from, and an epoch left to train)"),
        (MWM.with_(shuffle_buffer=100), {}, "plan.shuffle_buffer", "100",
         "0 (a relaunch would replay another batch order)"),
        (MWM, dict(kill_after_steps=20), "kill_after_steps", "20", "an integer >= 1 and <= 19 (a step before the "
         "last epoch, so there is a checkpoint to resume from and work left to do)"),
        (MWM, dict(kill_after_steps=0), "kill_after_steps", "0", "an integer >= 1 and <= 19"),
        (MWM, dict(kill_task="worker0"), "kill_task", "'worker0'",
         "one of ('worker1',): a worker other than the chief, worker0"),
        (MWM, dict(kill_task="worker2"), "kill_task", "'worker2'", "one of ('worker1',)"),
        ("plan.json", {}, "plan", "'plan.json'", "a RunPlan"),
    ],
)
def test_a_failure_run_checks_its_plan_before_launching(tmp_path, plan, kwargs, path, value, allowed):
    with raises_input(path, value, allowed):
        run_with_failure(plan, tmp_path, **{"kill_after_steps": 5, **kwargs})
    assert not list(tmp_path.iterdir())  # nothing was launched


PS = RunPlan("parameter_server", num_workers=2, num_ps=1, per_replica_batch=32, steps_per_epoch=10, epochs=2,
              ps_cluster="processes")


@pytest.mark.parametrize(
    "plan, kwargs, path, value, allowed",
    [
        (PS.with_(ps_cluster="in_process"), {}, "plan", "'parameter_server 2w+1ps (fit)'",
         "a parameter_server plan with ps_cluster='processes'"),
        (MWM, {}, "plan", None, "a parameter_server plan"),
        (PS, dict(kill_after_updates=20), "kill_after_updates", "20", "an integer >= 1 and <= 19"),
        (PS, dict(kill_after_updates=0), "kill_after_updates", "0", "an integer >= 1 and <= 19"),
        ("plan.json", {}, "plan", "'plan.json'", "a RunPlan"),
    ],
)
def test_a_ps_failure_run_checks_its_plan_before_launching(tmp_path, plan, kwargs, path, value, allowed):
    with pytest.raises(InputError) as caught:
        run_ps_with_worker_failure(plan, tmp_path, **{"kill_after_updates": 5, **kwargs})
    message = str(caught.value)
    assert message.startswith(f"{path}=") and allowed in message, message
    if value is not None:
        assert message.startswith(f"{path}={value};"), message
    assert not list(tmp_path.iterdir())  # nothing was launched


def test_missing_final_weights_name_the_file(tmp_path):
    with pytest.raises(MissingFileError, match=r"final_weights\.npz: no final weights here; did the chief finish "
                                               r"training\?; allowed: the model_dir of a finished run"):
        load_final_weights(tmp_path)


@pytest.mark.parametrize(
    "kwargs, path, value, allowed",
    [
        (dict(workload="resnet50_224"), "workload", "'resnet50_224'", "one of ('mnist_mlp', 'mnist_mlp_wide', "
         "'mnist_small_cnn', 'mnist_softmax')"),
        (dict(repeats=0), "repeats", "0", "an integer >= 1"),
        (dict(workers=(2, 1)), "workers[1]", "1", "an integer >= 2 (a collective across processes needs two)"),
        (dict(workers=()), "workers", "[]", "a non-empty list, each an integer >= 2"),
        (dict(batches=(16, 0)), "batches[1]", "0", "an integer >= 1"),
        (dict(devices=(1,)), "devices[0]", "1", "an integer >= 2 (an all-reduce needs two devices)"),
        (dict(sizes_bytes=(4096, 1.5)), "sizes_bytes[1]", "1.5", "an integer >= 1 (bytes)"),
        (dict(steps=-3), "steps", "-3", "an integer >= 1"),
        (dict(timeout_s=0), "timeout_s", "0", "a finite number > 0 (seconds)"),
    ],
)
def test_calibration_checks_its_arguments_before_running(kwargs, path, value, allowed):
    with raises_input(path, value, allowed):
        calibrate(write=False, **kwargs)


def test_fit_and_calibration_plan_check_their_arguments():
    with raises_input("local_rounds", "[]", "at least one round of measurements"):
        fit([], [{}], [0.1], workload="mnist_mlp")
    with raises_input("ps_rounds", "[]", "at least one round of measurements"):
        fit([{}], [{}], [], workload="mnist_mlp")
    with raises_input("workload", "'cifar'", "one of ('mnist_mlp'"):
        calibration_plan("cifar")


def test_experiments_are_plans_or_scenarios(tmp_path):
    with raises_input("experiment", "'mirrored'", "a RunPlan or a distsim.scenario.Scenario"):
        as_plan("mirrored")
    for kwargs, path, value, allowed in [
        (dict(timeout_s=-1.0), "timeout_s", "-1.0", "a finite number > 0 (seconds)"),
        (dict(ready_timeout_s=float("inf")), "ready_timeout_s", "inf", "a finite number > 0 (seconds)"),
        (dict(progress_every_s=-0.5), "progress_every_s", "-0.5", "a finite number >= 0 (seconds)"),
        (dict(port_retries=-1), "port_retries", "-1", "an integer >= 0"),
    ]:
        with raises_input(path, value, allowed):
            launch_plan(MWM, tmp_path / "run", progress=False, **kwargs)
    assert not (tmp_path / "run").exists()  # refused before any folder or process


@pytest.mark.parametrize("kwargs, path, value, allowed", [
    (dict(num_cpus=0), "num_cpus", "0", "an integer >= 1"),
    (dict(num_cpus=2.0), "num_cpus", "2.0", "an integer >= 1"),
    (dict(num_gpus=True), "num_gpus", "True", "an integer >= 0"),
    (dict(num_gpus=-1), "num_gpus", "-1", "an integer >= 0"),
])
def test_a_worker_checks_its_device_counts_before_tensorflow_starts(kwargs, path, value, allowed):
    with raises_input(path, value, allowed):
        configure_tensorflow(**kwargs)
