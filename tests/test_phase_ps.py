"""The phase bookkeeping of benchmarks/phase_ps.py and notebook 05b (distsim.views.plots.ps_phases), on apply
times laid out by hand (the run itself needs a lab)."""

import numpy as np
import pytest

from distsim.validation import InputError
from distsim.views.plots import ps_phases


def _phases():
    return ps_phases


def test_turns_sit_half_a_cycle_apart_and_a_drift_shows_in_order():
    # Worker 0 applies every second; worker 1 half a second later (turns), then worker 2 drifts by 0.1 s a cycle.
    time_s = [0.0, 1.0, 2.0, 3.0, 0.5, 1.5, 2.5, 0.1, 1.2, 2.3]
    worker = [0, 0, 0, 0, 1, 1, 1, 2, 2, 2]
    order = np.argsort(time_s)
    got = _phases()(np.array(time_s)[order], np.array(worker)[order])
    assert got[1] == pytest.approx([0.5, 0.5, 0.5])
    assert got[2] == pytest.approx([0.1, 0.2, 0.3])


def test_cycles_of_unequal_length_are_each_their_own_unit():
    # Worker 0's cycles last 1 s then 3 s; worker 1 applies 0.25 s and 2.25 s into them: a quarter and three quarters.
    got = _phases()([0.0, 0.25, 1.0, 3.25, 4.0], [0, 1, 0, 1, 0])
    assert got[1] == pytest.approx([0.25, 0.75])


def test_applies_outside_worker_0s_first_and_last_are_left_out():
    got = _phases()([0.0, 0.5, 1.0, 1.5], [1, 0, 0, 1])
    assert got[1].size == 0


def test_a_worker_0_without_a_cycle_is_refused():
    with pytest.raises(InputError, match=r"^worker=.1 update\(s\) by worker 0.; allowed: at least 2"):
        _phases()([0.0, 0.5], [0, 1])
    with pytest.raises(InputError, match="one per apply time"):
        _phases()([0.0, 0.5, 1.0], [0, 1])


def test_apply_times_out_of_order_are_refused_not_placed_in_the_wrong_cycle():
    # Unsorted, worker 1's 0.5 s would be placed against the wrong pair of worker 0's applies.
    for bad in ([0.0, 1.0, 0.5, 2.0], [0.0, float("nan"), 1.0, 2.0]):
        with pytest.raises(InputError, match=r"^time_s=.*allowed: apply times in apply order"):
            _phases()(bad, [0, 0, 1, 0])
