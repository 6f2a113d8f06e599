"""How often to checkpoint: Young's and Daly's intervals, the expected waste, and a Monte Carlo check.

A job checkpoints after every ``interval`` seconds of work; a checkpoint takes
``checkpoint`` seconds; failures arrive at random (exponential times, mean
``mtbf``, the job's mean time between failures) and each one throws away the
work since the last completed checkpoint, plus a ``restart`` time. Any one time
unit works for every function here.

* Young (1974): the first-order optimum ``sqrt(2 C M)``, wasting about
  ``sqrt(2 C / M)``.
* Exact, for exponential failures: one interval and its checkpoint take
  ``(M + R) (exp((tau + C) / M) - 1)`` in expectation.
* Daly (2006): a higher-order estimate of the optimum from that expression.
"""

from __future__ import annotations

import math

import numpy as np


def young_interval(checkpoint: float, mtbf: float) -> float:
    """First-order optimal work between checkpoints, ``sqrt(2 C M)``."""
    return math.sqrt(2 * checkpoint * mtbf)


def daly_interval(checkpoint: float, mtbf: float) -> float:
    """Daly's higher-order optimal work between checkpoints (``mtbf`` itself when ``C >= 2 M``)."""
    if checkpoint >= 2 * mtbf:
        return mtbf
    x = checkpoint / (2 * mtbf)
    return young_interval(checkpoint, mtbf) * (1 + math.sqrt(x) / 3 + x / 9) - checkpoint


def waste_first_order(interval, checkpoint: float, mtbf: float):
    """Wasted time per unit of useful work, first order: ``C / tau + tau / (2 M)``."""
    return checkpoint / np.asarray(interval, dtype=float) + np.asarray(interval, dtype=float) / (2 * mtbf)


def waste_exact(interval, checkpoint: float, mtbf: float, restart: float = 0.0):
    """Expected wasted time per unit of useful work, for exponentially distributed failures."""
    interval = np.asarray(interval, dtype=float)
    return (mtbf + restart) * np.expm1((interval + checkpoint) / mtbf) / interval - 1


def simulate_waste(interval: float, checkpoint: float, mtbf: float, *, work: float = 240.0, jobs: int = 300,
                   restart: float = 0.0, seed: int = 0) -> tuple[float, float]:
    """Monte Carlo: ``(mean, standard error)`` of the wasted fraction over ``jobs`` runs of ``work`` units of work.

    Each job runs ``round(work / interval)`` intervals, each followed by a
    checkpoint; a failure (exponential, seeded) before both are done throws the
    interval away, costs ``restart``, and the interval starts again.
    """
    if not (interval > 0 and checkpoint >= 0 and mtbf > 0 and work >= interval and jobs >= 2):
        raise ValueError(f"interval={interval}, checkpoint={checkpoint}, mtbf={mtbf}, work={work}, jobs={jobs}; "
                         "allowed: interval > 0, checkpoint >= 0, mtbf > 0, work >= interval, jobs >= 2")
    rng = np.random.default_rng(seed)
    intervals = round(work / interval)
    wall = np.zeros((jobs, intervals))
    pending = np.ones((jobs, intervals), dtype=bool)  # interval + checkpoint not yet completed
    length = interval + checkpoint
    while pending.any():
        until_failure = rng.exponential(mtbf, size=int(pending.sum()))
        survived = until_failure >= length
        wall[pending] += np.where(survived, length, until_failure + restart)
        pending[pending] = ~survived
    waste = wall.sum(axis=1) / (intervals * interval) - 1
    return float(waste.mean()), float(waste.std(ddof=1) / math.sqrt(jobs))
