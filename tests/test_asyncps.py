"""Async PS simulation: analytic staleness results, engine agreement,
determinism, backup workers against the harmonic-number formula."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from input_errors import raises_input

from distsim.engines.asyncps import (
    MAX_UPDATES,
    expected_staleness_exponential,
    expected_staleness_immediate_pulls,
    link_times_s,
    simulate_async,
)
from distsim.results.result import Staleness
from distsim.mechanics.stragglers import MAX_DRAWS, expected_kth_fastest_exponential, factors, harmonic, sync_step_times_s

N_UPDATES = 100_000  # the "within 2% over 100k updates"


@pytest.mark.parametrize("distribution", ["exponential", "deterministic", "lognormal"])
def test_mean_staleness_is_n_minus_1_for_immediate_pulls(distribution):
    means = np.array([0.5, 1.0, 1.0, 2.0, 3.0, 0.7, 1.3, 4.0])  # heterogeneous on purpose
    log = simulate_async(8, N_UPDATES, means, distribution, seed=11)
    # Exact up to the start-up transient: the first W updates read version 0.
    assert log.staleness.mean() == pytest.approx(expected_staleness_immediate_pulls(8), rel=0.02)


def test_per_worker_staleness_exponential():
    means = np.array([1.0, 1.5, 2.0])
    log = simulate_async(3, N_UPDATES, means, "exponential", seed=5)
    # The slowest worker sends ~22k updates; its staleness count is roughly geometric,
    # so its mean has a relative standard error ~1/sqrt(22k) = 0.7%: 2% is ~3 sigma.
    np.testing.assert_allclose(log.per_worker_mean_staleness(), expected_staleness_exponential(means), rtol=0.02)


def test_update_log_fields_are_consistent():
    log = simulate_async(4, 5000, [1, 2, 3, 4], seed=1, push_s=0.05, pull_s=0.1)
    assert len(log) == 5000
    assert np.all(np.diff(log.apply_time_s) >= 0)  # apply order
    assert np.all(log.read_time_s < log.apply_time_s)
    assert np.all(log.staleness >= 0)
    # read_version is the number of updates applied by the read time.
    applied_by_read = np.searchsorted(log.apply_time_s, log.read_time_s, side="right")
    assert np.all(np.abs(applied_by_read - log.read_version) <= 0)
    s = log.to_staleness()
    assert isinstance(s, Staleness) and s.mean == pytest.approx(log.staleness.mean())


@settings(max_examples=25, deadline=None)
@given(
    workers=st.integers(1, 6),
    distribution=st.sampled_from(["exponential", "deterministic", "lognormal"]),
    push_s=st.sampled_from([0.0, 0.01, 0.25]),
    pull_s=st.sampled_from([0.0, 0.02]),
    seed=st.integers(0, 1000),
)
def test_engines_agree_bit_for_bit_without_contention(workers, distribution, push_s, pull_s, seed):
    kw = dict(push_s=push_s, pull_s=pull_s, seed=seed)
    means = np.linspace(0.5, 2.0, workers)
    a = simulate_async(workers, 700, means, distribution, engine="vectorized", **kw)
    b = simulate_async(workers, 700, means, distribution, engine="events", **kw)
    for field in ("worker", "read_version", "read_time_s", "apply_time_s"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))


def test_same_seed_same_log_other_seed_other_log():
    a = simulate_async(5, 2000, 1.0, seed=3)
    b = simulate_async(5, 2000, 1.0, seed=3)
    c = simulate_async(5, 2000, 1.0, seed=4)
    np.testing.assert_array_equal(a.apply_time_s, b.apply_time_s)
    assert not np.array_equal(a.worker, c.worker)


def test_ps_contention_caps_update_rate():
    free = simulate_async(16, 20_000, 1.0, seed=2, push_s=0.01, pull_s=0.01)
    busy = simulate_async(16, 20_000, 1.0, seed=2, push_s=0.01, pull_s=0.01, ps_service_s=0.05)
    # The PS serves at most 1/(2 * 0.05) = 10 updates/s; 16 free workers would do ~16/s.
    assert busy.updates_per_s <= 10.0 * 1.001
    assert free.updates_per_s > 14.0


def _bench_async():
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_async.py"
    spec = importlib.util.spec_from_file_location("bench_async", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_simpy_model_matches_event_queue():
    simulate_simpy = _bench_async().simulate_simpy
    means = [1, 2, 1, 3, 1, 0.5]
    for kw in (dict(push_s=0.02, pull_s=0.03), dict(push_s=0.02, pull_s=0.03, ps_service_s=0.2)):
        a = simulate_simpy(6, 1500, means, seed=2, **kw)
        b = simulate_async(6, 1500, means, seed=2, engine="events", **kw)
        for field in ("worker", "read_time_s", "apply_time_s"):
            np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
        # SimPy runs a PS grant before same-instant applies of lower-numbered
        # workers are logged; distsim orders same-instant events by worker. The
        # versions agree wherever a read is not tied with an apply.
        untied = ~np.isin(b.read_time_s, b.apply_time_s)
        np.testing.assert_array_equal(a.read_version[untied], b.read_version[untied])


@pytest.mark.parametrize("p, k", [(8, 8), (8, 6), (16, 12), (4, 1)])
def test_fastest_k_of_p_matches_harmonic_formula(p, k):
    times = sync_step_times_s(p, 100_000, 2.0, "exponential", num_aggregate=k, seed=7)
    # Std of X_(K:P) is at most the std of the max (~1.3 * mean here), so the
    # relative standard error over 100k steps is < 0.5%: 2% is > 4 sigma.
    assert times.mean() == pytest.approx(expected_kth_fastest_exponential(p, k, 2.0), rel=0.02)


def test_harmonic_numbers():
    np.testing.assert_allclose(harmonic([0, 1, 2, 4]), [0, 1, 1.5, 25 / 12])


def test_backup_workers_shorten_steps():
    full = sync_step_times_s(10, 5000, 1.0, "lognormal", seed=1).mean()
    backup = sync_step_times_s(10, 5000, 1.0, "lognormal", num_aggregate=8, seed=1).mean()
    assert backup < full


def test_link_times():
    t = link_times_s(4_000_000, 1e9, latency_s=1e-3, num_shards=2, ps_bandwidth_Bps=1e9)
    assert t["push_s"] == pytest.approx(1e-3 + 4e-3)
    assert t["ps_service_s"] == pytest.approx(2e-3)


TWO = dict(num_workers=2, num_updates=10)
SECONDS = "a finite number >= 0 (seconds)"
MEAN = "a finite number > 0 (seconds)"


@pytest.mark.parametrize(
    "kwargs, path, value, allowed",
    [
        (dict(num_workers=0, num_updates=10), "num_workers", "0", "an integer >= 1 and <= 100,000"),
        (dict(num_workers=2.0, num_updates=10), "num_workers", "2.0", "an integer >= 1"),
        (dict(num_workers=2, num_updates=0), "num_updates", "0", "an integer >= 1"),
        (dict(num_workers=2, num_updates=MAX_UPDATES + 1), "num_updates", f"{MAX_UPDATES + 1}", f"<= {MAX_UPDATES:,}"),
        (dict(TWO, compute_mean_s=[1, 2, 3]), "compute_mean_s", "[1, 2, 3]", "or a list of 2 (one per worker)"),
        (dict(TWO, compute_mean_s=-1.0), "compute_mean_s", "-1.0", MEAN),
        (dict(TWO, compute_mean_s="1"), "compute_mean_s", "'1'", MEAN),
        (dict(TWO, compute_mean_s=[1.0, np.nan]), "compute_mean_s[1]", "nan", MEAN),
        (dict(TWO, distribution="pareto"), "distribution", "'pareto'",
         "one of ('deterministic', 'exponential', 'lognormal')"),
        (dict(TWO, sigma=-0.5), "sigma", "-0.5", "a finite number >= 0 and <= 10"),
        (dict(TWO, push_s=-0.1), "push_s", "-0.1", SECONDS),
        (dict(TWO, pull_s=np.inf), "pull_s", "inf", SECONDS),
        (dict(TWO, ps_service_s=None), "ps_service_s", "None", SECONDS),
        (dict(TWO, engine="gpu"), "engine", "'gpu'", "one of ('auto', 'vectorized', 'events')"),
        (dict(TWO, input_s=-1e-3), "input_s", "-0.001", SECONDS),
        (dict(TWO, host_s=[0.1, np.nan]), "host_s[1]", "nan", SECONDS),
        (dict(TWO, min_compute_s=[0.1, 0.2, 0.3]), "min_compute_s", "[0.1, 0.2, 0.3]",
         "or a list of 2 (one per worker), each >= 0 seconds"),
        (dict(TWO, prefetch=1), "prefetch", "1", "true or false"),
        (dict(TWO, engine="vectorized", ps_service_s=0.1), "ps_service_s", "0.1",
         "0 with engine='vectorized' (PS contention needs engine='events' or 'auto')"),
        (dict(TWO, compute_at_ps="yes"), "compute_at_ps", "'yes'", "true or false"),
        (dict(TWO, compute_at_ps=True, duplex=True), "compute_at_ps", "True", "False with duplex=True"),
        (dict(TWO, compute_at_ps=True, engine="vectorized"), "compute_at_ps", "True", "engine='vectorized'"),
    ],
)
def test_bad_parameters(kwargs, path, value, allowed):
    with raises_input(path, value, allowed):
        simulate_async(**kwargs)


def test_numpy_integers_are_counts():
    a = simulate_async(np.int64(3), np.int32(50), np.array([1.0, 2.0, 3.0]), seed=2)
    b = simulate_async(3, 50, [1.0, 2.0, 3.0], seed=2)
    assert a.num_workers == 3 and np.array_equal(a.apply_time_s, b.apply_time_s)


@pytest.mark.parametrize(
    "kwargs, path, value, allowed",
    [
        (dict(message_bytes=-1), "message_bytes", "-1", "a finite number >= 0 (bytes)"),
        (dict(bandwidth_Bps=0), "bandwidth_Bps", "0", "a finite number > 0 (bytes/s)"),
        (dict(latency_s=-1e-3), "latency_s", "-0.001", SECONDS),
        (dict(num_shards=0), "num_shards", "0", "an integer >= 1"),
        (dict(num_shards=1.5), "num_shards", "1.5", "an integer >= 1"),
        (dict(ps_bandwidth_Bps=-1.0), "ps_bandwidth_Bps", "-1.0", "> 0 (bytes/s), or null (no PS contention)"),
    ],
)
def test_bad_link_times(kwargs, path, value, allowed):
    with raises_input(path, value, allowed):
        link_times_s(**{**dict(message_bytes=1000, bandwidth_Bps=1e9), **kwargs})


def test_bad_k_of_p():
    with raises_input("num_aggregate", "9", "an integer >= 1 and <= 8 (at most num_workers)"):
        sync_step_times_s(8, 10, 1.0, num_aggregate=9)
    with raises_input("num_aggregate", "0", "an integer >= 1 and <= 8"):
        expected_kth_fastest_exponential(8, 0, 1.0)
    with raises_input("num_workers", "0", "an integer >= 1"):
        expected_kth_fastest_exponential(0, 1, 1.0)
    with raises_input("mean_s", "-1.0", "a finite number > 0 (seconds)"):
        expected_kth_fastest_exponential(8, 4, -1.0)
    with raises_input("mean_s", "0", "a finite number > 0 (seconds)"):
        sync_step_times_s(8, 10, 0)
    with raises_input("num_steps", "0", "an integer >= 1"):
        sync_step_times_s(8, 0, 1.0)
    with raises_input("num_steps", f"{MAX_DRAWS}", f"<= {MAX_DRAWS // 8:,} (steps x num_workers <= {MAX_DRAWS:,}"):
        sync_step_times_s(8, MAX_DRAWS, 1.0)


def test_bad_factors_and_harmonic():
    rng = np.random.default_rng(0)
    with raises_input("distribution", "'normal'", "one of ('deterministic', 'exponential', 'lognormal')"):
        factors(rng, "normal", 3)
    with raises_input("sigma", "nan", "a finite number >= 0 and <= 10"):
        factors(rng, "lognormal", 3, sigma=np.nan)
    with raises_input("n", "[3, -1]", "integers from 0 to 100,000"):
        harmonic([3, -1])
    with raises_input("n", "[1.5]", "integers from 0"):
        harmonic([1.5])


def test_simultaneous_asks_go_in_worker_order_not_by_rounding():
    """Hand derivation, 2 workers on one FIFO server (pulls, pushes and
    applies): transfers S = 0.1 s, compute 1.3 s, apply 0.01 s. Worker 0
    pulls [0, 0.1], computes to 1.4, pushes to 1.5; worker 1 pulls [0.1,
    0.2] and computes to 1.5: at 1.5 worker 0's apply and worker 1's push
    ask at one instant, in exact arithmetic (0.1 + 1.3 + 0.1 = 0.2 + 1.3),
    and worker 0 goes first: it applies at 1.51, worker 1's push [1.51,
    1.61], worker 0's pull [1.61, 1.71], worker 1's apply at 1.72; then at
    3.12 worker 0's pull and worker 1's push ask together again, worker 0
    first, and each worker cycles S + 1.3 + S + 0.01 = 1.51 s without
    waiting (the server is busy 0.42 s of it). The float sums differ in
    their last bit (1.5000000000000002 against 1.5), and the queue used to
    serve worker 1 first: applies at 1.61 and 1.62, a 1.6 s step, and 2e-7
    more transfer time gave 1.561 s, a step that shrank as a cost grew."""
    def run(transfer_s):
        return simulate_async(2, 16, 1.3, "deterministic", push_s=transfer_s + 0.01, pull_s=transfer_s,
                              ps_service_s=transfer_s, ps_apply_s=0.01)

    log = run(0.1)
    np.testing.assert_allclose(log.apply_time_s[:4], [1.51, 1.72, 3.12, 3.33], rtol=1e-12)
    np.testing.assert_allclose(np.diff(log.apply_time_s[2::2]), 1.51, rtol=1e-12)
    step = 2 / log.updates_per_s
    assert step == pytest.approx(2 * (3.33 + 6 * 1.51) / 16, rel=1e-12)
    # Each transfer 2e-8 s longer: the last apply comes after at most 20 of them (worker 1's 16 and the
    # waits behind worker 0's), so the step (2/16 of the last apply) grows by at most 2/16 x 20 x 2e-8.
    longer = 2 / run(0.1 * (1 + 2e-7)).updates_per_s
    assert step <= longer <= step + 2 / 16 * 20 * 0.1 * 2e-7


def test_only_the_compute_is_random():
    """Hand derivation, one worker, no transfers: with prefetch its update
    takes max(input, host + compute), so a 1 s input hides 0.2 s of host work
    and a compute of mean 10 ms unless an Exp(1) factor exceeds 80 (e^-80 a
    draw): every update takes exactly 1 s. Without prefetch the parts add up:
    1.2 s plus the compute, which alone varies; with a 50 ms least compute
    (kernel launches) each update is 1.2 s plus max(compute, 50 ms) of the
    same draws (one worker's stream, whatever the other arguments)."""
    kw = dict(input_s=1.0, host_s=0.2, seed=3)
    overlapped = simulate_async(1, 500, 0.01, "exponential", **kw)
    np.testing.assert_allclose(np.diff(overlapped.apply_time_s, prepend=0.0), 1.0, rtol=0, atol=1e-12)
    serial = simulate_async(1, 500, 0.01, "exponential", prefetch=False, **kw)
    compute = np.diff(serial.apply_time_s, prepend=0.0) - 1.2
    assert np.all(compute > 0) and compute.std() > 0.005  # Exp(1) x 10 ms: standard deviation 10 ms
    assert compute.mean() == pytest.approx(0.01, rel=0.15)  # 500 draws: standard error 4.5 %
    floored = simulate_async(1, 500, 0.01, "exponential", prefetch=False, min_compute_s=0.05, **kw)
    np.testing.assert_allclose(np.diff(floored.apply_time_s, prepend=0.0), 1.2 + np.maximum(compute, 0.05),
                               rtol=1e-9)


def test_a_queued_run_exceeds_its_lockstep_rhythm_but_never_the_stations_bound():
    """300 random event-engine runs (2-8 workers, 1-3 noisy updates each, one server or full duplex,
    the workers' own links adding nothing: push = s + a, pull = s). The mean step is at most the
    bound ``tests/physical_invariants.py::fifo_bound_s`` derives from the stations,
    ``max_w mean_k own_wk + W (2 s + a) + (W - 1)(2 s + a) / steps``; the lockstep rhythm alone
    (without the last term, the tests' bound before) is exceeded in 2 of them (one server, where an
    apply waits behind other workers' transfers). Each worker's own times are its compute draws,
    ``mean x`` its first ``steps`` factors of its documented stream."""
    rng = np.random.default_rng(0)
    over_lockstep = 0
    for _ in range(300):
        workers, steps, duplex = int(rng.integers(2, 9)), int(rng.integers(1, 4)), bool(rng.integers(2))
        service, apply = float(10 ** rng.uniform(-2, 0)), float(10 ** rng.uniform(-3, 0.3))
        request = float(service * rng.uniform(0, 1)) if duplex else 0.0
        mean, distribution = float(10 ** rng.uniform(-2, 1)), ("exponential", "lognormal")[int(rng.integers(2))]
        sigma, seed = float(rng.uniform(0.1, 2.0)), int(rng.integers(1 << 31))
        log = simulate_async(workers, workers * steps, mean, distribution, sigma=sigma, push_s=service + apply,
                             pull_s=service, ps_service_s=service, seed=seed, duplex=duplex, ps_request_s=request,
                             ps_apply_s=apply, engine="events")
        own = max(mean * factors(np.random.Generator(np.random.PCG64(s)), distribution, steps, sigma).mean()
                  for s in np.random.SeedSequence(seed).spawn(workers))
        per_update = 2 * service + apply
        turns, lockstep = workers / log.updates_per_s, own + workers * per_update
        # 1e-9: the engine's float sums against this closed form's, and its 1e-12-wide instants.
        assert turns <= (lockstep + (workers - 1) * per_update / steps) * (1 + 1e-9)
        over_lockstep += turns > lockstep * (1 + 1e-9)
    assert over_lockstep == 2


def test_compute_at_the_ps_serves_every_stage_in_turn():
    """Hand derivation: with the workers' own time served by the one PS server too, W workers each
    always have one request there, so the FIFO server is never idle and serves them one stage at a time,
    round robin. 3 workers of mean 0.5 s (deterministic), transfers 0.1 s, apply 0.05 s: a cycle of
    3 x (0.5 + 2 x 0.1 + 0.05) = 2.25 s, one update from each worker. Worker k pulls after every apply
    of the round before (the server applied them first, at the instant the pull starts) and applies
    after the k workers served before it: staleness k, 0, 1, 2, over and over, a mean of (W - 1) / 2.
    (Reading at such an instant before a higher-numbered worker's apply gave 1, 1, 2.) Without the rule
    the workers compute side by side: the step is at least a worker's own cycle, 0.1 + 0.5 + 0.15 =
    0.75 s, and the PS's 3 x 0.25 s, and at most lockstep, 0.5 + 3 x 0.25 = 1.25 s."""
    kw = dict(push_s=0.15, pull_s=0.1, ps_service_s=0.1, ps_apply_s=0.05, engine="events")
    served = simulate_async(3, 300, 0.5, "deterministic", compute_at_ps=True, **kw)
    beside = simulate_async(3, 300, 0.5, "deterministic", **kw)
    # rel 1e-9: 300 float sums of a few terms against the closed form.
    assert 3 / served.updates_per_s == pytest.approx(2.25, rel=1e-9)
    assert np.array_equal(served.staleness, np.tile([0, 1, 2], 100))
    assert np.array_equal(served.worker, np.tile([0, 1, 2], 100))
    assert 0.75 <= 3 / beside.updates_per_s <= 1.25
