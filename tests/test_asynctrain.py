"""distsim.numerics.asynctrain: async PS numerics replaying the timing engine's update log; backup workers."""

import numpy as np
import pytest
from input_errors import raises_input

from distsim.engines import asyncps
from distsim.mechanics import stragglers
from distsim.numerics.asynctrain import train_async, train_backup_sync
from distsim.datasets.mnist import mnist_subset
from distsim.numerics.models import MLP, SoftmaxRegression
from distsim.results.result import Result
from distsim.scenario.limits import MAX_SCHEDULE_RANKS as MAX_REPLICAS
from distsim.numerics.train import TrainingDiverged, train_sync


@pytest.fixture(scope="module")
def data():
    return mnist_subset(600, 200)


@pytest.mark.parametrize("shuffle", [True, False])
def test_async_one_worker_equals_sync_one_replica_exactly(data, shuffle):
    model = MLP(hidden=16, l2=1e-3)
    kw = dict(learning_rate=0.2, seed=11, shuffle=shuffle)
    # 600 examples / 64 = 9 steps per epoch; 30 updates cross three epoch boundaries (reshuffles).
    a = train_async(model, data.x_train, data.y_train, num_workers=1, batch_size=64, num_updates=30,
                    distribution="lognormal", **kw)
    s = train_sync(model, data.x_train, data.y_train, num_replicas=1, global_batch=64, drop_remainder=True,
                   epochs=10, max_steps=30, **kw)
    assert (a.staleness == 0).all() and a.applied.all()
    # Same batches, same gradient code, same update: bit-identical, not merely close.
    np.testing.assert_array_equal(a.curve.loss, s.curve.loss)
    for wa, ws in zip(a.weights, s.weights):
        np.testing.assert_array_equal(wa, ws)


def test_async_run_replays_the_log(data):
    model = SoftmaxRegression()
    run = train_async(model, data.x_train, data.y_train, num_workers=4, batch_size=16, num_updates=200,
                      learning_rate=0.1, compute_mean_s=[1.0, 1.0, 2.0, 4.0], seed=2,
                      eval_data=(data.x_test, data.y_test), eval_every=50)
    log = asyncps.simulate_async(4, 200, [1.0, 1.0, 2.0, 4.0], seed=2)
    np.testing.assert_array_equal(run.log.worker, log.worker)
    np.testing.assert_array_equal(run.staleness, log.staleness)  # no drops: staleness as the timing engine says
    r = run.result
    assert isinstance(r, Result) and r.source == "simulated" and r.strategy == "parameter_server"
    np.testing.assert_array_equal(r.curve.time_s, log.apply_time_s)
    np.testing.assert_array_equal(r.staleness.staleness, log.staleness)
    assert r.summary.mean_staleness == pytest.approx(log.staleness.mean())
    assert run.eval_curve.step.tolist() == [50, 100, 150, 200]
    np.testing.assert_array_equal(run.eval_curve.time_s, log.apply_time_s[[49, 99, 149, 199]])
    assert run.eval_result().curve is run.eval_curve
    assert run.eval_curve.accuracy[-1] > 0.5  # 200 small SGD updates on MNIST beat chance (0.1)


def test_stale_gradients_use_the_parameters_the_worker_read(data):
    """Replay by hand: update j's gradient is taken at the PS state after read_version[j] updates."""
    model = SoftmaxRegression(l2=0.0)
    log = asyncps.simulate_async(3, 12, 1.0, seed=5)
    assert log.staleness.max() > 0  # the check below is only meaningful with stale updates
    run = train_async(model, data.x_train, data.y_train, num_workers=3, batch_size=8, num_updates=12,
                      learning_rate=0.3, seed=5, shuffle=False, log=log, dtype=np.float64)
    states = [model.flatten(model.init(5, np.float64))]
    taken = [0, 0, 0]
    for j in range(12):
        w = int(log.worker[j])
        start = (taken[w] * 3 + w) * 8 % (600 - 600 % 24)  # worker w's taken-th batch, unshuffled
        taken[w] += 1
        xb, yb = data.x_train[start : start + 8].astype(np.float64), data.y_train[start : start + 8]
        _, g = model.loss_and_grads(model.unflatten(states[int(log.read_version[j])]), xb, yb)
        states.append(states[-1] - 0.3 * model.flatten(g))
    # float64, same operations up to BLAS summation order.
    np.testing.assert_allclose(model.flatten(run.weights), states[-1], rtol=1e-12)


def test_async_is_reproducible_under_a_seed(data):
    kw = dict(num_workers=4, batch_size=16, num_updates=80, learning_rate=0.2)
    a = train_async(SoftmaxRegression(), data.x_train, data.y_train, seed=4, **kw)
    b = train_async(SoftmaxRegression(), data.x_train, data.y_train, seed=4, **kw)
    c = train_async(SoftmaxRegression(), data.x_train, data.y_train, seed=5, **kw)
    np.testing.assert_array_equal(a.curve.loss, b.curve.loss)
    np.testing.assert_array_equal(a.curve.time_s, b.curve.time_s)
    assert not np.array_equal(a.curve.time_s, c.curve.time_s)


def test_staleness_aware_rate_is_alpha_over_tau(data):
    run = train_async(SoftmaxRegression(), data.x_train, data.y_train, num_workers=6, batch_size=8,
                      num_updates=100, learning_rate=0.4, staleness_aware=True, seed=1)
    expected = 0.4 / np.maximum(run.staleness, 1)
    np.testing.assert_allclose(run.learning_rate, expected)
    assert (run.staleness > 1).any()


def test_bounded_staleness_drops_and_recounts(data):
    run = train_async(SoftmaxRegression(), data.x_train, data.y_train, num_workers=8, batch_size=8,
                      num_updates=200, learning_rate=0.2, max_staleness=3, seed=3)
    assert 0 < (~run.applied).sum() < 200
    assert (run.staleness[run.applied] <= 3).all() and (run.staleness[~run.applied] > 3).all()
    assert (run.learning_rate[~run.applied] == 0).all()
    # Recount by hand: staleness = applied updates between the read and the arrival.
    applied_before = np.concatenate([[0], np.cumsum(run.applied)])
    np.testing.assert_array_equal(
        run.staleness, applied_before[:-1] - applied_before[run.log.read_version]
    )
    assert len(run.result.curve.loss) == run.applied.sum()
    assert len(run.result.staleness.staleness) == run.applied.sum()


def test_backup_workers_aggregate_the_fastest(data):
    run = train_backup_sync(SoftmaxRegression(), data.x_train, data.y_train, num_workers=5, num_backup=2,
                            batch_size=10, num_steps=20, learning_rate=0.2, seed=8, comm_s=0.1)
    expected = stragglers.sync_step_times_s(5, 20, 1.0, num_aggregate=3, seed=8) + 0.1
    np.testing.assert_allclose(run.result.step_times_s, expected)
    np.testing.assert_allclose(run.curve.time_s, np.cumsum(expected))
    assert (run.worker_used.sum(axis=1) == 3).all()
    assert run.replica_batch_sizes.shape == (20, 3) and (run.replica_batch_sizes == 10).all()
    times = 1.0 * stragglers.factors(np.random.default_rng(8), "exponential", (20, 5))
    slowest_used = np.where(run.worker_used, times, -np.inf).max(axis=1)
    fastest_dropped = np.where(~run.worker_used, times, np.inf).min(axis=1)
    assert (slowest_used <= fastest_dropped).all()


def test_backup_with_no_backups_and_one_worker_is_sync(data):
    model = SoftmaxRegression()
    b = train_backup_sync(model, data.x_train, data.y_train, num_workers=1, num_backup=0, batch_size=50,
                          num_steps=15, learning_rate=0.3, seed=2)
    s = train_sync(model, data.x_train, data.y_train, num_replicas=1, global_batch=50, drop_remainder=True,
                   epochs=2, max_steps=15, learning_rate=0.3, seed=2)
    np.testing.assert_array_equal(b.curve.loss, s.curve.loss)


def test_async_divergence_is_reported(data):
    with pytest.raises(TrainingDiverged, match="diverged at update") as info:
        train_async(SoftmaxRegression(), data.x_train * 1e4, data.y_train, num_workers=3, batch_size=8,
                    num_updates=60, learning_rate=1e30, seed=0)
    assert info.value.step < 60 and len(info.value.run.learning_rate) == info.value.step + 1


@pytest.mark.parametrize(
    "kwargs, path, value, allowed",
    [
        (dict(learning_rate=0), "learning_rate", "0", "a finite number > 0"),
        (dict(num_workers=0), "num_workers", "0", "an integer >= 1"),
        (dict(num_updates=2.5), "num_updates", "2.5", "an integer >= 1"),
        (dict(max_staleness=-1), "max_staleness", "-1", "an integer >= 0 and <= 1,000,000,000,000, or null (no bound)"),
        (dict(bound_policy="wait"), "bound_policy", "'wait'", "one of ('drop',)"),
        (dict(batch_size=400), "batch_size", "400",
         "at most 300 (num_workers x batch_size <= the 600 training examples, 2 workers)"),
        (dict(compute_mean_s=0.0), "compute_mean_s", "0.0", "a finite number > 0 (seconds)"),
        (dict(distribution="pareto"), "distribution", "'pareto'", "one of ('deterministic', 'exponential', 'lognormal')"),
        (dict(eval_every=0), "eval_every", "0", "an integer >= 1 and <= 1,000,000,000,000, or null (every twentieth of the run)"),
        (dict(log="log"), "log", "'log'", "an UpdateLog, or null (simulate one)"),
        (dict(log=asyncps.simulate_async(3, 10, seed=0)), "log.num_workers", "3", "num_workers=2"),
    ],
)
def test_async_bad_configuration(data, kwargs, path, value, allowed):
    base = dict(num_workers=2, batch_size=8, num_updates=10, learning_rate=0.1)
    with raises_input(path, value, allowed):
        train_async(SoftmaxRegression(), data.x_train, data.y_train, **{**base, **kwargs})


@pytest.mark.parametrize(
    "kwargs, path, value, allowed",
    [
        (dict(num_backup=3), "num_backup", "3", "an integer >= 0 and <= 2 (fewer than num_workers"),
        (dict(num_backup=-1), "num_backup", "-1", "an integer >= 0 and <= 2"),
        (dict(comm_s=-1.0), "comm_s", "-1.0", "a finite number >= 0 (seconds)"),
        (dict(compute_mean_s=np.inf), "compute_mean_s", "inf", "a finite number > 0 (seconds)"),
        (dict(num_steps=0), "num_steps", "0", "an integer >= 1"),
        (dict(num_workers=2000), "num_workers", "2000", f"an integer >= 1 and <= {MAX_REPLICAS:,}"),
        (dict(sigma=-1.0), "sigma", "-1.0", "a finite number >= 0 and <= 10"),
        (dict(eval_every=0), "eval_every", "0", "an integer >= 1"),
    ],
)
def test_backup_bad_configuration(data, kwargs, path, value, allowed):
    base = dict(num_workers=3, num_backup=1, batch_size=8, num_steps=5)
    with raises_input(path, value, allowed):
        train_backup_sync(SoftmaxRegression(), data.x_train, data.y_train, **{**base, **kwargs})
