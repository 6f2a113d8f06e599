"""Random compute times, stragglers and backup workers.

A device's compute time for one step is its mean times a random factor with
mean 1. Synchronous training waits for the slowest of P devices; with backup
workers it aggregates the first K of P = K + b and drops the rest, so a step
costs the K-th fastest time, ``E[X_(K:P)]``. For exponential times with mean
``1/mu`` that is ``(H_P - H_{P-K}) / mu`` (H_n the n-th harmonic number).
"""

from __future__ import annotations

import numpy as np

from distsim.results import Event, Trace
from distsim.scenario import Training, limits
from distsim.validation import InputError, Integer, Number, rule_of

#: The rules of a scenario's ``training.compute_distribution`` and
#: ``training.compute_sigma``, so a scenario and a direct call accept the same values.
DISTRIBUTION = rule_of(Training, "compute_distribution")
SIGMA = rule_of(Training, "compute_sigma")
#: Shapes of the factor, each with mean 1.
DISTRIBUTIONS: tuple[str, ...] = DISTRIBUTION.choices
#: Compute times :func:`sync_step_times_s` draws at once (steps x workers): 160 MB of float64.
MAX_DRAWS = 20_000_000

_WORKERS = Integer(1, limits.MAX_WORKERS)
_MEAN_S = Number(0, low_open=True, unit="seconds")


def factors(rng: np.random.Generator, distribution: str, size, sigma: float = 0.5) -> np.ndarray:
    """Random factors with mean 1: exactly 1, Exp(1), or a lognormal with
    log-standard-deviation ``sigma`` (``exp(N(-sigma^2/2, sigma^2))``)."""
    distribution = DISTRIBUTION("distribution", distribution)
    sigma = SIGMA("sigma", sigma)
    if distribution == "deterministic":
        return np.ones(size)
    if distribution == "exponential":
        return rng.standard_exponential(size)
    return np.exp(sigma * rng.standard_normal(size) - 0.5 * sigma**2)


def harmonic(n) -> np.ndarray:
    """H_n = 1 + 1/2 + ... + 1/n (H_0 = 0), elementwise."""
    n = np.asarray(n)
    if n.size and not (np.issubdtype(n.dtype, np.integer) and 0 <= n.min() and n.max() <= limits.MAX_WORKERS):
        raise InputError("n", n.tolist(), f"integers from 0 to {limits.MAX_WORKERS:,}")
    top = int(n.max()) if n.size else 0
    table = np.concatenate([[0.0], np.cumsum(1.0 / np.arange(1, top + 1))])
    return table[n]


def expected_kth_fastest_exponential(num_workers: int, num_aggregate: int, mean_s: float) -> float:
    """``E[X_(K:P)] = (H_P - H_{P-K}) * mean_s`` for i.i.d. exponential times."""
    num_workers, num_aggregate = _k_of_p(num_workers, num_aggregate)
    mean_s = _MEAN_S("mean_s", mean_s)
    return float((harmonic(num_workers) - harmonic(num_workers - num_aggregate)) * mean_s)


def _k_of_p(num_workers: int, num_aggregate: int) -> tuple[int, int]:
    """``(P, K)`` checked: ``1 <= K <= P``."""
    num_workers = _WORKERS("num_workers", num_workers)
    return num_workers, Integer(1, num_workers, "at most num_workers")("num_aggregate", num_aggregate)


def sync_step_times_s(
    num_workers: int,
    num_steps: int,
    mean_s: float,
    distribution: str = "exponential",
    *,
    num_aggregate: int | None = None,
    sigma: float = 0.5,
    seed: int = 0,
) -> np.ndarray:
    """Seconds per synchronous step when a step waits for the fastest
    ``num_aggregate`` (default: all) of ``num_workers`` compute times."""
    num_workers, num_aggregate = _k_of_p(num_workers, num_workers if num_aggregate is None else num_aggregate)
    num_steps = Integer(1, MAX_DRAWS // num_workers, f"steps x num_workers <= {MAX_DRAWS:,} compute times")(
        "num_steps", num_steps)
    mean_s = _MEAN_S("mean_s", mean_s)
    times = mean_s * factors(np.random.default_rng(seed), distribution, (num_steps, num_workers), sigma)
    return np.partition(times, num_aggregate - 1, axis=1)[:, num_aggregate - 1]


def sync_and_async_traces(compute_s: np.ndarray, exchange_s: float) -> tuple[Trace, Trace]:
    """The same compute times played synchronously and asynchronously.

    Args:
        compute_s: seconds of compute, shape ``(rounds, workers)``.
        exchange_s: seconds of one gradient exchange (all-reduce or push).

    Returns:
        ``(synchronous, asynchronous)`` traces. Synchronously, every round
        waits for its slowest worker (``idle`` events), then all exchange
        together; asynchronously, each worker computes and pushes back to back.
    """
    compute_s = np.asarray(compute_s, dtype=float)
    if compute_s.ndim != 2 or not np.all(np.isfinite(compute_s) & (compute_s >= 0)):
        raise InputError("compute_s", f"an array of shape {compute_s.shape}",
                         "a (rounds, workers) array of finite seconds >= 0")
    exchange_s = Number(0, unit="seconds")("exchange_s", exchange_s)
    rounds, workers = compute_s.shape
    sync, t = [], 0.0
    for s, row in enumerate(compute_s):
        slowest = float(row.max())
        for w, c in enumerate(row):
            name = f"worker {w}"
            sync += [Event(name, "compute", t, t + c, s), Event(name, "idle", t + c, t + slowest, s),
                     Event(name, "comm", t + slowest, t + slowest + exchange_s, s, "all-reduce")]
        t += slowest + exchange_s
    asynchronous = []
    for w in range(workers):
        t = 0.0
        for s in range(rounds):
            c = float(compute_s[s, w])
            asynchronous += [Event(f"worker {w}", "compute", t, t + c, s),
                             Event(f"worker {w}", "comm", t + c, t + c + exchange_s, s, "push")]
            t += c + exchange_s
    return Trace.from_events(sync), Trace.from_events(asynchronous)
