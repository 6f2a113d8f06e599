"""The one-device baselines are remembered under everything their run reads, so a memo hit is never stale.

The oracle of every check here is the same baseline simulated afresh (``timeline.one_device_run``, which
never consults the memo): the memo may only save time, never change a number.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import distsim
from distsim.engines import timeline
from distsim.mechanics import stepcosts


@pytest.fixture(autouse=True)
def empty_memo():
    timeline._baseline_memo.clear()
    yield
    timeline._baseline_memo.clear()


def fresh(scenario, batch: int) -> float:
    """The baseline's examples/s simulated without the memo."""
    run = timeline.one_device_run(scenario, batch)
    return float(np.sum(run.global_examples)) / run.run_time_s


def noisy(**changes):
    scenario = distsim.make_scenario("v100", "resnet50_224", "multi_worker_mirrored", num_workers=2,
                                     devices_per_worker=2, global_batch=256, steps=12,
                                     compute_distribution="lognormal")
    for path, value in changes.items():
        scenario = scenario.replace(path, value)
    return scenario


#: One change of each kind a what-if lab makes: (scenario path, new value). Some leave the baseline alone
#: (links, algorithm, PS shards), the others change it.
CHANGES = [
    ("cluster.num_workers", 4), ("cluster.devices_per_worker", 1), ("cluster.inter_link.bandwidth_Bps", 1e9),
    ("cluster.intra_link.bandwidth_Bps", 1e9), ("cluster.device.peak_flops", 2e13),
    ("cluster.device.step_overhead_s", 0.01), ("workload.flops_per_sample", 1e9),
    ("workload.input_s_per_sample", 0.002), ("training.global_batch", 512), ("training.steps", 30),
    ("training.seed", 7), ("training.compute_sigma", 0.3), ("training.compute_distribution", "exponential"),
    ("training.prefetch", False), ("strategy.algorithm", "tree"), ("strategy.name", "parameter_server"),
]


@pytest.mark.parametrize("path, value", CHANGES)
def test_a_remembered_baseline_is_the_fresh_one_after_any_change(path, value):
    before, after = noisy(), noisy(**{path: value})
    for scenario in (before, after, before):  # the third call may come from the memo
        for batch in (64, 256):
            assert timeline.one_device_throughput(scenario, batch) == fresh(scenario, batch)


def test_the_memo_is_used_when_only_unread_fields_change():
    # The all-reduce algorithm does not touch one device: the second baseline is the remembered one.
    timeline.one_device_throughput(noisy(), 64)
    assert len(timeline._baseline_memo) == 1
    timeline.one_device_throughput(noisy(**{"strategy.algorithm": "tree"}), 64)
    assert len(timeline._baseline_memo) == 1
    timeline.one_device_throughput(noisy(**{"training.compute_sigma": 0.3}), 64)
    assert len(timeline._baseline_memo) == 2


def _perturbed(value):
    """Another value of the same field (NaN and None become numbers)."""
    if isinstance(value, str):
        return value + "x"
    if value is None:
        return np.zeros(1)
    if isinstance(value, (bool, np.bool_)):
        return not value
    array = np.asarray(value)
    if array.dtype.kind == "f":
        return np.where(np.isnan(array), 1.0, array * 2 + 1).astype(array.dtype)
    return array + 1 if isinstance(value, np.ndarray) else type(value)(value + 1)


def test_every_field_of_the_setup_and_its_costs_is_in_the_key():
    setup = timeline._Setup.one_device(noisy(), 64)
    key = timeline.one_device_inputs(setup)
    names = [f.name for f in dataclasses.fields(setup) if f.name not in ("scenario", "p")]
    assert names, "the setup has fields besides its scenario and costs"
    for name in names:
        changed = dataclasses.replace(setup, **{name: _perturbed(getattr(setup, name))})
        assert timeline.one_device_inputs(changed) != key, name
    for field in dataclasses.fields(stepcosts.StepCosts):
        costs = setup.p.replace(**{field.name: _perturbed(getattr(setup.p, field.name))})
        assert timeline.one_device_inputs(dataclasses.replace(setup, p=costs)) != key, field.name


@pytest.mark.parametrize("path, value", [("training.steps", 13), ("training.seed", 1), ("training.compute_sigma", 0.2),
                                         ("training.compute_distribution", "exponential"),
                                         ("cluster.num_workers", 3)])  # the replica count sets the draws per step
def test_every_read_field_of_the_scenario_is_in_the_key(path, value):
    def key(scenario):
        return timeline.one_device_inputs(timeline._Setup.one_device(scenario, 64))

    assert key(noisy(**{path: value})) != key(noisy())


def test_deterministic_compute_reads_no_random_stream():
    # Without noise the seed and the replica count (the draws per step) do not enter the run: one key, one value.
    plain = noisy(**{"training.compute_distribution": "deterministic"})
    other = plain.replace("training.seed", 99).replace("cluster.num_workers", 3)
    assert timeline.one_device_inputs(timeline._Setup.one_device(plain, 64)) == \
        timeline.one_device_inputs(timeline._Setup.one_device(other, 64))
    assert fresh(plain, 64) == fresh(other, 64)


def test_an_unknown_kind_of_setup_field_is_refused():
    # A field the key cannot hold exactly must fail loudly, not be skipped.
    setup = dataclasses.replace(timeline._Setup.one_device(noisy(), 64), collectives=object())
    with pytest.raises(TypeError):
        timeline.one_device_inputs(setup)
