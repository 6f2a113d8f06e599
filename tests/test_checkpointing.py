"""Checkpoint intervals: the formulas against a hand derivation and against a seeded Monte Carlo."""

from __future__ import annotations

import math

import numpy as np
import pytest

from distsim.mechanics import checkpointing
from distsim.validation import InputError

HOUR_S = 3600.0


def test_young_and_first_order_waste_by_hand():
    # C = 0.2 h, M = 10 h: sqrt(2 x 0.2 x 10) = 2 h, and there C/tau + tau/(2M) = 0.1 + 0.1 = 0.2.
    assert checkpointing.young_interval(0.2 * HOUR_S, 10 * HOUR_S) == pytest.approx(2 * HOUR_S)
    assert float(checkpointing.waste_first_order(2 * HOUR_S, 0.2 * HOUR_S, 10 * HOUR_S)) == pytest.approx(0.2)


def test_daly_by_hand():
    # C = 0.2 h, M = 10 h: x = C/(2M) = 0.01, sqrt(x) = 0.1, so Daly = 2 h x (1 + 0.1/3 + 0.01/9) - 0.2 h.
    expected_h = 2 * (1 + 0.1 / 3 + 0.01 / 9) - 0.2
    assert checkpointing.daly_interval(0.2 * HOUR_S, 10 * HOUR_S) == pytest.approx(expected_h * HOUR_S)
    assert checkpointing.daly_interval(30 * HOUR_S, 10 * HOUR_S) == 10 * HOUR_S  # C >= 2M: once per MTBF


def test_exact_waste_by_hand_for_a_short_interval():
    # tau = 1 s, C = 0, R = 0, M = 1 s: one interval takes M (e^1 - 1) = 1.71828 s in expectation.
    assert float(checkpointing.waste_exact(1.0, 0.0, 1.0)) == pytest.approx(math.e - 2)


def test_exact_waste_matches_a_monte_carlo():
    # Independent paths: the closed form (M + R)(e^((tau + C)/M) - 1)/tau - 1 and a simulation of
    # exponential failures that shares no code with it. 300 jobs of 240 h give a standard error of
    # 0.1-0.6 %; 4 standard errors leave room for chance over the three intervals (p < 2e-4) and
    # nothing for a wrong formula (dropping R or C moves the mean by > 10 standard errors).
    for tau_h in (0.5, 2.0, 6.0):
        mean, stderr = checkpointing.simulate_waste(tau_h * HOUR_S, 0.2 * HOUR_S, 10 * HOUR_S,
                                                    work_s=240 * HOUR_S, restart_s=0.05 * HOUR_S, seed=1)
        exact = float(checkpointing.waste_exact(tau_h * HOUR_S, 0.2 * HOUR_S, 10 * HOUR_S, 0.05 * HOUR_S))
        assert abs(mean - exact) <= 4 * stderr, (tau_h, mean, exact, stderr)


def test_the_exact_optimum_sits_near_dalys_estimate_not_youngs():
    taus_h = np.linspace(0.5, 6, 5501)   # grid step 0.001 h
    best_h = taus_h[np.argmin(checkpointing.waste_exact(taus_h * HOUR_S, 0.2 * HOUR_S, 10 * HOUR_S))]
    daly_h = checkpointing.daly_interval(0.2 * HOUR_S, 10 * HOUR_S) / HOUR_S
    young_h = checkpointing.young_interval(0.2 * HOUR_S, 10 * HOUR_S) / HOUR_S
    # Daly's estimate is accurate to third order in sqrt(C/2M) = 0.1, i.e. to about 0.1^3 x 2 h = 0.002 h
    # plus the 0.001 h grid; Young's is off by about C (0.2 h) minus the correction, ~0.13 h.
    assert abs(best_h - daly_h) < 0.01
    assert abs(best_h - young_h) > 0.1


@pytest.mark.parametrize("call, path", [
    (lambda: checkpointing.simulate_waste(0.0, 1.0, 10.0, work_s=100.0), "interval_s"),
    (lambda: checkpointing.simulate_waste(1.0, 1.0, 10.0, work_s=0.5), "work_s"),
    (lambda: checkpointing.simulate_waste(1.0, 1.0, 0.01, work_s=100.0), "work_s"),   # e^200 retries
    (lambda: checkpointing.waste_exact([1.0, -1.0], 1.0, 10.0), "interval_s"),
    (lambda: checkpointing.young_interval(1.0, float("nan")), "mtbf_s"),
])
def test_bad_input_names_the_field(call, path):
    with pytest.raises(InputError, match=rf"^{path}="):
        call()
