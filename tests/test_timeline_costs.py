"""One StepCosts per prediction: the run and its one-device baselines are priced from the same object."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import distsim
from distsim.engines import timeline
from distsim.mechanics import stepcosts


@pytest.fixture
def step_costs_calls(monkeypatch):
    """Every call of ``step_costs`` from any distsim module that imported it (a list that grows)."""
    original, calls = stepcosts.step_costs, []

    def counting(*args, **kwargs):
        calls.append(args[0])
        return original(*args, **kwargs)

    for name, module in list(sys.modules.items()):
        if name.startswith("distsim") and getattr(module, "step_costs", None) is original:
            monkeypatch.setattr(module, "step_costs", counting)
    return calls


@pytest.mark.parametrize("strategy, layout", [
    ("mirrored", {"devices_per_worker": 4, "global_batch": 256}),  # weak (64) and strong (256) baselines differ
    ("parameter_server", {"num_workers": 2}),
])
def test_predict_builds_the_step_costs_once(step_costs_calls, strategy, layout):
    # Before: the run's StepCosts, then one more for each of the two baselines (3 builds).
    distsim.predict(distsim.make_scenario("v100", "resnet50_224", strategy, **layout))
    assert len(step_costs_calls) == 1


def test_the_baseline_is_priced_from_the_costs_it_is_given():
    # A device twice as fast, given only through the costs: the baseline must follow them, not rebuild its own.
    scenario = distsim.make_scenario("v100", "resnet50_224", "mirrored", devices_per_worker=2, global_batch=128,
                                     steps=4)
    costs = stepcosts.step_costs(scenario)
    faster = costs.replace(peak_flops=costs.peak_flops * 2)
    twice = scenario.replace("cluster.device.peak_flops", scenario.cluster.device.peak_flops * 2)
    given = timeline.one_device_run(scenario, 64, faster)
    assert given.run_time_s == timeline.one_device_run(twice, 64).run_time_s
    assert given.run_time_s < timeline.one_device_run(scenario, 64, costs).run_time_s
    np.testing.assert_array_equal(timeline.one_device_run(scenario, 64).step_times_s,
                                  timeline.one_device_run(scenario, 64, costs).step_times_s)
