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
from distsim.scenario import COMPUTE_DISTRIBUTIONS as DISTRIBUTIONS  # shapes of the factor, each with mean 1


def check_distribution(distribution: str, sigma: float) -> None:
    if distribution not in DISTRIBUTIONS:
        raise ValueError(f"distribution={distribution!r}; allowed: {DISTRIBUTIONS}")
    if not (sigma >= 0 and np.isfinite(sigma)):
        raise ValueError(f"sigma={sigma!r}; allowed: a finite number >= 0")


def factors(rng: np.random.Generator, distribution: str, size, sigma: float = 0.5) -> np.ndarray:
    """Random factors with mean 1: exactly 1, Exp(1), or a lognormal with
    log-standard-deviation ``sigma`` (``exp(N(-sigma^2/2, sigma^2))``)."""
    check_distribution(distribution, sigma)
    if distribution == "deterministic":
        return np.ones(size)
    if distribution == "exponential":
        return rng.standard_exponential(size)
    return np.exp(sigma * rng.standard_normal(size) - 0.5 * sigma**2)


def harmonic(n) -> np.ndarray:
    """H_n = 1 + 1/2 + ... + 1/n (H_0 = 0), elementwise."""
    n = np.asarray(n)
    top = int(n.max()) if n.size else 0
    table = np.concatenate([[0.0], np.cumsum(1.0 / np.arange(1, top + 1))])
    return table[n]


def expected_kth_fastest_exponential(num_workers: int, num_aggregate: int, mean_s: float) -> float:
    """``E[X_(K:P)] = (H_P - H_{P-K}) * mean_s`` for i.i.d. exponential times."""
    _check_k_of_p(num_workers, num_aggregate)
    return float((harmonic(num_workers) - harmonic(num_workers - num_aggregate)) * mean_s)


def _check_k_of_p(num_workers: int, num_aggregate: int) -> None:
    if isinstance(num_workers, bool) or not isinstance(num_workers, (int, np.integer)) or num_workers < 1:
        raise ValueError(f"num_workers={num_workers!r}; allowed: an integer >= 1")
    if (
        isinstance(num_aggregate, bool)
        or not isinstance(num_aggregate, (int, np.integer))
        or not 1 <= num_aggregate <= num_workers
    ):
        raise ValueError(f"num_aggregate={num_aggregate!r}; allowed: an integer in 1..num_workers={num_workers}")


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
    num_aggregate = num_workers if num_aggregate is None else num_aggregate
    _check_k_of_p(num_workers, num_aggregate)
    if isinstance(num_steps, bool) or not isinstance(num_steps, (int, np.integer)) or num_steps < 1:
        raise ValueError(f"num_steps={num_steps!r}; allowed: an integer >= 1")
    if not (mean_s > 0 and np.isfinite(mean_s)):
        raise ValueError(f"mean_s={mean_s!r}; allowed: a finite number > 0 seconds")
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
    if compute_s.ndim != 2 or np.any(compute_s < 0) or not exchange_s >= 0:
        raise ValueError(f"compute_s shape {compute_s.shape}, exchange_s={exchange_s}; allowed: "
                         "a (rounds, workers) array of seconds >= 0 and exchange_s >= 0")
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
