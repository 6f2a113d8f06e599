"""The typed cost object (:class:`distsim.engines.costs.StepCosts`) and the one set of defaults.

Each number is checked against a hand derivation from the presets' published
sizes (the MNIST MLP 784-128-10 has 784 x 128 + 128 + 128 x 10 + 10 =
101,770 parameters), not against the engine's own helpers; the defaults of
the real runs and the numerics are checked against the defaults a freshly
built :class:`distsim.Scenario` has.
"""

from __future__ import annotations

import dataclasses
import inspect

import numpy as np
import pytest

import distsim
from distsim.engines import steady
from distsim.engines.costs import MODEL_FIELDS, StepCosts, async_costs, ps_apply_s, step_costs
from distsim.engines.pipeline import PipelineConfig, dense_model
from distsim.mechanics.strategies import plan
from distsim.numerics import train_async, train_sync
from distsim.real.plan import RunPlan

MLP_PARAMS = 784 * 128 + 128 + 128 * 10 + 10


def _ps(**kw):
    return distsim.make_scenario("this_machine_core", "mnist_mlp", "parameter_server", 2, 1, global_batch=128, **kw)


def test_step_costs_are_frozen():
    costs = step_costs(_ps())
    with pytest.raises(dataclasses.FrozenInstanceError):
        costs.global_batch = np.asarray(1.0)


def test_step_costs_hold_the_scenario_numbers_with_their_units():
    costs = step_costs(_ps())
    assert float(costs.num_params) == MLP_PARAMS
    # float32 gradients: 4 bytes per parameter.
    assert float(costs.gradient_bytes) == MLP_PARAMS * 4
    assert float(costs.global_batch) == 128 and float(costs.num_workers) == 2
    assert costs.device_kind == "cpu" and costs.shard_policy == "DATA"
    # Unset fields are NaN (no straggler, no core sharing); booleans are 0/1.
    assert np.isnan(costs.straggler_cores) and np.isnan(costs.physical_cores)
    assert float(step_costs(_ps().replace("cluster.inter_link.full_duplex", True)).inter_full_duplex) == 1.0


def test_every_sweepable_path_reads_back_its_scenario_value():
    scenario = _ps()
    costs = step_costs(scenario)
    for path in MODEL_FIELDS:
        value = scenario.value_at(path)
        got = float(costs.value_at(path))
        assert np.isnan(got) if value is None else got == float(value), path


def test_a_link_carries_the_slower_of_its_payload_and_its_software_rate():
    # 1 Gbit/s... in bytes: 1e9 B/s wire x 0.9 payload = 9e8 B/s, but the hosts' software moves only 5e8 B/s.
    scenario = _ps().replace("cluster.inter_link.payload_fraction", 0.9).replace(
        "cluster.inter_link.stack_bandwidth_Bps", 5e8)
    # rel 1e-12: message_Bps pipelines the two stages as 1 / max(per-byte times), one rounding away from 5e8.
    assert float(step_costs(scenario).inter_Bps) == pytest.approx(5e8, rel=1e-12)


def test_sweep_overrides_are_columns_that_broadcast():
    costs = step_costs(_ps(), {"training.global_batch": [64, 128, 256]}).broadcast((3,))
    assert costs.global_batch.tolist() == [64.0, 128.0, 256.0]
    assert costs.num_params.shape == (3,) and float(costs.num_params[2]) == MLP_PARAMS
    # The per-replica batch of each row: the global batch over 2 workers.
    assert steady.step_parts(costs, costs.global_batch, plan(_ps())).replica_batch.tolist() == [32.0, 64.0, 128.0]


def test_the_async_costs_read_the_step_costs():
    scenario = _ps()
    costs = async_costs(step_costs(scenario), plan(scenario))
    assert float(costs.worker_batch) == 64
    # The apply: parameters x 12 optimizer bytes over the CPU's 1e10 B/s, one PS shard (rel: float rounding).
    by_hand = MLP_PARAMS * 12 / 1e10
    assert float(costs.ps_apply_s) == pytest.approx(by_hand, rel=1e-12)
    assert float(ps_apply_s(step_costs(scenario), 2)) == pytest.approx(by_hand / 2, rel=1e-12)
    # A transfer to an idle PS: latency + gradient / bandwidth over the 1e9 B/s localhost link (+ the apply).
    assert float(costs.pull_s) == pytest.approx(1e-4 + MLP_PARAMS * 4 / 1e9, rel=1e-12)


def test_step_costs_is_one_type_for_every_engine():
    assert isinstance(step_costs(_ps()), StepCosts)
    assert distsim.engines.costs.StepCosts is StepCosts


def test_real_runs_host_a_parameter_server_as_a_scenario_does():
    # Before: RunPlan.ps_cluster="in_process" while Strategy.ps_cluster="processes".
    scenario = _ps()
    real = RunPlan("parameter_server", num_workers=2, num_ps=1)
    assert real.ps_cluster == scenario.strategy.ps_cluster == "processes"
    assert plan(scenario).ps_cluster == scenario.strategy.ps_cluster


def test_real_runs_and_numerics_take_the_scenario_defaults():
    scenario = distsim.make_scenario("this_machine_core", "mnist_mlp", "one_device")
    c, t = scenario.cluster, scenario.training
    real = RunPlan("one_device")
    assert (real.num_workers, real.replicas_per_worker) == (c.num_workers, c.devices_per_worker)
    assert (real.epochs, real.seed, real.shuffle_buffer, real.prefetch, real.shard_policy) == (
        t.epochs, t.seed, t.shuffle_buffer, t.prefetch, t.shard_policy)
    sync = inspect.signature(train_sync).parameters
    assert {k: sync[k].default for k in ("epochs", "num_workers", "policy", "num_files", "drop_remainder", "seed")} == {
        "epochs": t.epochs, "num_workers": c.num_workers, "policy": t.shard_policy, "num_files": t.num_files,
        "drop_remainder": t.drop_remainder, "seed": t.seed}
    assert inspect.signature(train_async).parameters["seed"].default == t.seed
    # A cluster's devices are their own hardware unless physical_cores says they share cores.
    pipe = PipelineConfig(model=dense_model([4, 4, 2]), layers_per_stage=(1, 1), global_batch=4)
    assert pipe.devices_share_cores is (c.physical_cores is not None)
