"""One scenario, real numerics on the predicted clock.

:func:`train_scenario` takes a :class:`distsim.scenario.Scenario` and trains
the matching NumPy model on MNIST the way that scenario would: the same
replicas, workers, global batch, sharding policy, gradient-summation
algorithm and seed. Time comes from the timing engine:

* synchronous strategies: every step takes the step time that
  :func:`distsim.engines.prediction.predict` gives for the scenario;
* ``parameter_server`` (async): the updates are applied in the order and at
  the times of the same :func:`distsim.engines.asyncps.simulate_async` run that
  ``predict`` makes (same costs, same seed), so the staleness matches too.

The result carries the scenario, so it plots and compares like any other.
"""

from __future__ import annotations

import numpy as np

from distsim.mechanics import strategies
from distsim.numerics.asynctrain import AsyncRun, train_async
from distsim.datasets.mnist import mnist_subset
from distsim.numerics.models import Model, make_model
from distsim.engines.asyncrun import simulate_updates
from distsim.engines.prediction import predict
from distsim.scenario import Scenario, require_scenario
from distsim.numerics.train import LRSchedule, TrainRun, train_sync
from distsim.validation import InputError

#: Workload presets that have a NumPy twin in :mod:`distsim.numerics.models`.
WORKLOAD_MODELS: dict[str, str] = {
    "mnist_softmax": "softmax_regression",
    "mnist_mlp": "mlp",
    "mnist_small_cnn": "small_cnn",
}

def model_for(scenario: Scenario) -> Model:
    """The :mod:`distsim.numerics.models` model of the scenario's workload."""
    name = require_scenario(scenario).workload.name
    if name not in WORKLOAD_MODELS:
        raise InputError("workload.name", name, f"a workload with a NumPy model, one of {tuple(sorted(WORKLOAD_MODELS))}, "
                         "or pass model= explicitly")
    return make_model(WORKLOAD_MODELS[name])


def train_scenario(
    scenario: Scenario,
    *,
    model: Model | None = None,
    data=None,
    learning_rate: float | LRSchedule = 0.1,
    max_steps: int | None = None,
    eval_data: tuple[np.ndarray, np.ndarray] | None = None,
    eval_every: int | None = None,
    dtype=np.float32,
) -> TrainRun | AsyncRun:
    """Train the scenario's model with real gradients, on the scenario's predicted clock.

    Args:
        scenario: what to simulate.
        model: defaults to :func:`model_for` the workload.
        data: an object with ``x_train``/``y_train`` (and ``x_test``/``y_test``,
            used for evaluation unless ``eval_data`` is given), e.g.
            :func:`distsim.datasets.mnist.mnist_subset`; default: the first
            ``workload.num_examples`` MNIST training images.
        learning_rate: SGD rate or schedule.
        max_steps: stop a synchronous run early (``training.epochs`` epochs otherwise).
        eval_data, eval_every: evaluation set and interval (steps or updates).
        dtype: float32 or float64.

    Synchronous runs cover ``training.epochs`` epochs; asynchronous runs apply
    ``training.steps`` updates per worker, like ``predict``.

    Raises:
        InputError: a workload without a NumPy model, or backup workers
            (use :func:`distsim.numerics.asynctrain.train_backup_sync`).
    """
    require_scenario(scenario)
    model = model if model is not None else model_for(scenario)
    if data is None:
        data = mnist_subset(min(scenario.workload.num_examples, 60000), 10000, dtype=dtype)
    if eval_data is None and hasattr(data, "x_test"):
        eval_data = (data.x_test, data.y_test)
    t, c = scenario.training, scenario.cluster
    plan = strategies.plan(scenario)
    if plan.mode == "async":
        log, costs = simulate_updates(scenario)
        workers = scenario.num_replicas
        return train_async(
            model, data.x_train, data.y_train,
            num_workers=workers, batch_size=int(costs.worker_batch), num_updates=t.steps * workers,
            learning_rate=learning_rate, seed=t.seed, log=log,
            dtype=dtype, eval_data=eval_data, eval_every=eval_every, scenario=scenario,
        )
    if t.backup_workers:
        raise InputError("training.backup_workers", t.backup_workers, "0: train_scenario runs plain synchronous "
                         "steps (use distsim.numerics.asynctrain.train_backup_sync for backup workers)")
    return train_sync(
        model, data.x_train, data.y_train,
        num_replicas=scenario.num_replicas, num_workers=c.num_workers, global_batch=t.global_batch,
        learning_rate=learning_rate, epochs=t.epochs, max_steps=max_steps,
        algorithm=plan.algorithm or "ring", collective_options=plan.options,
        policy=t.shard_policy, num_files=t.num_files, drop_remainder=t.drop_remainder, seed=t.seed,
        dtype=dtype, eval_data=eval_data, eval_every=eval_every,
        step_time_s=predict(scenario).summary.step_time_s, strategy=scenario.strategy.name,
        scenario=scenario,
    )
