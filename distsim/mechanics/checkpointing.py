"""How often to checkpoint: Young's and Daly's intervals, the expected waste, and a Monte Carlo check.

A job checkpoints after every ``interval_s`` seconds of work; writing a
checkpoint takes ``checkpoint_s``; failures arrive at random (exponential
times, mean ``mtbf_s``, the job's mean time between failures), and each one
throws away the work since the last completed checkpoint and costs a
``restart_s`` before work resumes.

* Young (1974), "A first order approximation to the optimum checkpoint
  interval", CACM 17(9): the optimum ``sqrt(2 C M)``, wasting about
  ``C / tau + tau / (2 M)``.
* Exact, for exponential failures: one interval and its checkpoint take
  ``(M + R) (exp((tau + C) / M) - 1)`` seconds in expectation (each failed
  attempt restarts the whole interval).
* Daly (2006), "A higher order estimate of the optimum checkpoint interval
  for restart dumps", FGCS 22(3), eq. 37: a higher-order estimate of the
  optimum of that expression.
"""

from __future__ import annotations

import math

import numpy as np

from distsim.validation import InputError, Integer, Number

_POSITIVE_S = Number(0, low_open=True, unit="seconds")
_NONNEGATIVE_S = Number(0, unit="seconds")
#: Expected failure draws of one :func:`simulate_waste` (jobs x intervals x attempts per interval):
#: 80 MB of float64 at most, about a second.
MAX_DRAWS = 10_000_000


def young_interval(checkpoint_s: float, mtbf_s: float) -> float:
    """Young's first-order optimal seconds of work between checkpoints, ``sqrt(2 C M)``."""
    return math.sqrt(2 * _POSITIVE_S("checkpoint_s", checkpoint_s) * _POSITIVE_S("mtbf_s", mtbf_s))


def daly_interval(checkpoint_s: float, mtbf_s: float) -> float:
    """Daly's higher-order optimal seconds of work between checkpoints (``mtbf_s`` itself when ``C >= 2 M``)."""
    if _POSITIVE_S("checkpoint_s", checkpoint_s) >= 2 * _POSITIVE_S("mtbf_s", mtbf_s):
        return mtbf_s
    x = checkpoint_s / (2 * mtbf_s)
    return young_interval(checkpoint_s, mtbf_s) * (1 + math.sqrt(x) / 3 + x / 9) - checkpoint_s


def _intervals_s(interval_s) -> np.ndarray:
    values = np.asarray(interval_s, dtype=float)
    if not np.all(np.isfinite(values) & (values > 0)):
        raise InputError("interval_s", interval_s, "finite seconds > 0 (one number or an array)")
    return values


def waste_first_order(interval_s, checkpoint_s: float, mtbf_s: float) -> np.ndarray:
    """Wasted seconds per second of useful work, first order: ``C / tau + tau / (2 M)``."""
    tau = _intervals_s(interval_s)
    return _NONNEGATIVE_S("checkpoint_s", checkpoint_s) / tau + tau / (2 * _POSITIVE_S("mtbf_s", mtbf_s))


def waste_exact(interval_s, checkpoint_s: float, mtbf_s: float, restart_s: float = 0.0) -> np.ndarray:
    """Expected wasted seconds per second of useful work, for exponentially distributed failures."""
    tau = _intervals_s(interval_s)
    mtbf_s = _POSITIVE_S("mtbf_s", mtbf_s)
    length_s = tau + _NONNEGATIVE_S("checkpoint_s", checkpoint_s)
    return (mtbf_s + _NONNEGATIVE_S("restart_s", restart_s)) * np.expm1(length_s / mtbf_s) / tau - 1


def simulate_waste(interval_s: float, checkpoint_s: float, mtbf_s: float, *, work_s: float, jobs: int = 300,
                   restart_s: float = 0.0, seed: int = 0) -> tuple[float, float]:
    """Monte Carlo: ``(mean, standard error)`` of the wasted fraction over ``jobs`` runs of ``work_s`` seconds of work.

    Each job runs ``round(work_s / interval_s)`` intervals, each followed by a
    checkpoint; a failure (exponential, seeded) before both are done throws the
    interval away, costs ``restart_s``, and the interval starts again. Nothing
    here shares code with :func:`waste_exact`, so the two check each other.
    """
    interval_s = _POSITIVE_S("interval_s", interval_s)
    checkpoint_s = _NONNEGATIVE_S("checkpoint_s", checkpoint_s)
    mtbf_s = _POSITIVE_S("mtbf_s", mtbf_s)
    restart_s = _NONNEGATIVE_S("restart_s", restart_s)
    jobs = Integer(2, MAX_DRAWS)("jobs", jobs)
    work_s = Number(interval_s, unit="seconds, at least one interval")("work_s", work_s)
    intervals = round(work_s / interval_s)
    attempts = jobs * intervals * math.exp(min((interval_s + checkpoint_s) / mtbf_s, 700))  # expected draws
    if attempts > MAX_DRAWS:
        raise InputError("work_s", work_s, f"jobs x intervals x exp((interval_s + checkpoint_s) / mtbf_s) <= "
                         f"{MAX_DRAWS:,} expected failure draws (got {attempts:.3g})")
    rng = np.random.default_rng(seed)
    wall_s = np.zeros((jobs, intervals))
    pending = np.ones((jobs, intervals), dtype=bool)  # interval + checkpoint not yet completed
    length_s = interval_s + checkpoint_s
    while pending.any():
        until_failure_s = rng.exponential(mtbf_s, size=int(pending.sum()))
        survived = until_failure_s >= length_s
        wall_s[pending] += np.where(survived, length_s, until_failure_s + restart_s)
        pending[pending] = ~survived
    waste = wall_s.sum(axis=1) / (intervals * interval_s) - 1
    return float(waste.mean()), float(waste.std(ddof=1) / math.sqrt(jobs))
