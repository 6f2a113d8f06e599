"""Checkpoint intervals: the formulas against a hand derivation and against a seeded Monte Carlo."""

from __future__ import annotations

import math

import numpy as np
import pytest

from distsim.mechanics import checkpointing


def test_young_and_first_order_waste_by_hand():
    # C = 0.2 h, M = 10 h: sqrt(2 x 0.2 x 10) = 2 h, and there C/tau + tau/(2M) = 0.1 + 0.1 = 0.2.
    assert checkpointing.young_interval(0.2, 10.0) == pytest.approx(2.0)
    assert float(checkpointing.waste_first_order(2.0, 0.2, 10.0)) == pytest.approx(0.2)
    # Daly adds higher-order terms and subtracts C: larger than Young's minus C, smaller than Young's.
    assert 2.0 - 0.2 < checkpointing.daly_interval(0.2, 10.0) < 2.0
    assert checkpointing.daly_interval(30.0, 10.0) == 10.0  # C >= 2M: checkpoint once per MTBF


def test_exact_waste_matches_a_monte_carlo():
    # Independent paths: the closed form (M + R)(e^((tau + C)/M) - 1)/tau - 1 and a simulation of
    # exponential failures. 300 jobs give a standard error near 0.1-0.6 %; 4 standard errors
    # leave room for chance over the three intervals and nothing for a wrong formula.
    for tau in (0.5, 2.0, 6.0):
        mean, stderr = checkpointing.simulate_waste(tau, 0.2, 10.0, restart=0.05, seed=1)
        exact = float(checkpointing.waste_exact(tau, 0.2, 10.0, 0.05))
        assert abs(mean - exact) <= 4 * stderr, (tau, mean, exact, stderr)


def test_the_exact_optimum_sits_near_dalys_estimate():
    taus = np.linspace(0.5, 6, 5501)
    best = taus[np.argmin(checkpointing.waste_exact(taus, 0.2, 10.0))]
    assert best == pytest.approx(checkpointing.daly_interval(0.2, 10.0), abs=0.02)  # grid step 0.001 h
    assert not math.isclose(best, checkpointing.young_interval(0.2, 10.0), abs_tol=0.02)


def test_bad_simulation_input_is_refused():
    with pytest.raises(ValueError, match="interval"):
        checkpointing.simulate_waste(0.0, 0.2, 10.0)
