"""``distsim.predict`` against the independent SimPy oracle of ``tests/oracle``.

The oracle is written from the docstrings (see ``tests/oracle/__init__.py``)
and imports neither ``distsim.engines`` nor ``distsim.mechanics``
(:func:`test_oracle_is_independent`). Both sides are compared on the mean
step time over full steps (predict's mean step is its run's time over its
steps: the steady step when they are full steps of one epoch).

Scenario space (seeded generators in ``tests/oracle/scenarios.py``): GPU
devices (and, in a third of the sync scenarios, CPU devices whose replicas
take turns on 0.5-4 physical cores per worker, sometimes with a CPU-quota
straggler as the last worker) with random peak rate, efficiency, memory bandwidth, step overhead,
replica dispatch and kernel launch (RULES.md rules 16-18: a tenth of the
sync scenarios are launch-bound); random intra/inter links (bandwidth, latency,
request time, payload fraction, network-software rate); random workloads
(parameters, FLOPs, host input time and bytes per example) of 16 equal
gradient tensors; prefetch on, off or the strategy's default; 1-16 input
threads; 1-8 equal gradient buckets; DATA or OFF sharding, no shuffle
buffer; optimizer of 12/20/28 bytes a parameter; 0-4 metric values.

* synchronous: mirrored and multi_worker_mirrored over 1-4 workers of 1-4
  GPUs with ring and hierarchical all-reduce (ring, tree, halving-doubling
  or NCCL's double binary tree between the nodes), tree and halving-doubling on
  one node or one GPU per node (halving-doubling on 2 or 4 ranks), and a
  synchronous PS over 1-4 one-GPU workers with 1-3 shards on their own
  hosts, central_storage (reduce to the host CPU and back, the variables'
  dispatch paid once a step) on one worker of 1-4 devices; global batches of 32-512 (split over the replicas as
  tf.distribute does, unevenly when they do not divide it) in half of the
  scenarios, a multiple of the replicas in the other half;
* backup workers: 1 to N - 1 of N GPU replicas, one collective of the kept
  replicas' whole gradients;
* asynchronous PS: 1-6 one-GPU workers, 1-3 shards, ``ps_cluster="processes"``
  over a half-duplex link, one worker batch per update, the optimizer's
  apply on the PS host (a CPU: the ``this_machine_core`` preset's memory
  bandwidth for GPU workers); and ``ps_cluster="in_process"`` with 1-6
  one-device workers, in 3 of 4 CPU devices on 0.5-4 shared cores (the last
  worker sometimes a CPU-quota straggler), whose own time the one server
  serves in turn with the transfers and applies.

Not covered: topology presets, NCCL pricing (rings are set to alpha_beta), per_tensor/pack/fusion grouping, FILE sharding,
backup workers on shared
CPU cores or with a per-replica dispatch (there the closed form is held to the timeline by the invariants'
sweep = predict), two-level PS (local sum, placements),
tpu, and full-duplex PS clusters.
"""

from __future__ import annotations

import ast
import pathlib

import numpy as np
import pytest
from oracle import costs, model, scenarios

import distsim
from distsim.engines.steady import step_model
from distsim.scenario import Scenario
from distsim.scenario.presets import SCHEMA_VERSION

ORACLE_DIR = pathlib.Path(__file__).parent / "oracle"
#: Deterministic scenarios: float sums in a different order differ by ~1e-12
#: relative; 1 % is the issue's bound, and today's sync agreement is exact
#: to 1e-9 on even batches, so any modelling difference shows as > 1 %.
DETERMINISTIC_TOL = 0.01
#: Under noise each side draws its own factors: the issue's bound, 3 %, is
#: more than 2 standard errors of the difference when each side's standard
#: error is under 1 % (the sync test checks the oracle's).
NOISY_TOL = 0.03


def _mean_full_step(result) -> float:
    """Mean of the full steps after the first (the first fills the pipeline)."""
    return float(np.mean(result.step_times_s[1:]))


def test_oracle_is_independent():
    """No module of the oracle imports distsim.engines or distsim.mechanics."""
    banned = ("distsim.engines", "distsim.mechanics")
    found = []
    for path in sorted(ORACLE_DIR.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            found += [(path.name, n) for n in names if n.startswith(banned)]
    assert len(list(ORACLE_DIR.glob("*.py"))) >= 4
    assert found == []


def _sync_errors(seed: int, count: int, **extra) -> list[tuple[float, object]]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(count):
        s = scenarios.sync_scenario(rng, even=bool(i % 2), cpu=i % 3 == 2, **extra)
        want = float(np.mean(model.sync_step_times(s)[1:]))
        out.append((_mean_full_step(distsim.predict(s)) / want - 1, s))
    return out


def test_sync_agrees_on_300_random_deterministic_scenarios():
    errors = _sync_errors(2024, 300)
    worst, s = max(errors, key=lambda e: abs(e[0]))
    assert abs(worst) <= DETERMINISTIC_TOL, (worst, s.to_dict())
    # The space is not degenerate: every algorithm and both multi-worker shapes occur.
    kinds = {(costs.algorithm(s), s.cluster.num_workers > 1, s.cluster.devices_per_worker > 1) for _, s in errors}
    assert {k[0] for k in kinds} == {None, "ring", "tree", "halving_doubling", "hierarchical", "parameter_server",
                                     "reduce_to_one"}
    assert ("ring", True, True) in kinds and ("hierarchical", True, True) in kinds
    inter = {s.strategy.inter_algorithm for _, s in errors if costs.algorithm(s) == "hierarchical"
             and s.cluster.num_workers > 1}
    assert inter == {"ring", "tree", "halving_doubling", "nccl_tree"}
    shared = [s for _, s in errors if s.cluster.physical_cores is not None]
    assert len(shared) == 100 and any(s.cluster.straggler_cores for s in shared)


def _backup_scenario(rng: np.random.Generator, **extra) -> Scenario:
    """A random GPU scenario with 1 to N - 1 backup workers and no per-replica
    dispatch (with it, see :func:`test_backup_step_still_pays_the_hosts_dispatch`)."""
    while True:
        s = scenarios.sync_scenario(rng, even=bool(rng.random() < 0.5), backup=True, **extra)
        if s.training.backup_workers:
            return s.replace("cluster.device.replica_variable_s", 0.0).replace("cluster.device.replica_dispatch_s", 0.0)


def test_backup_workers_agree_on_60_random_deterministic_scenarios():
    rng = np.random.default_rng(41)
    for _ in range(60):
        s = _backup_scenario(rng)
        want = float(np.mean(model.sync_step_times(s)[1:]))
        assert _mean_full_step(distsim.predict(s)) == pytest.approx(want, rel=DETERMINISTIC_TOL), s.to_dict()


def _one_gpu_worker(devices: int, flops_per_sample: float, strategy: dict, training: dict) -> Scenario:
    """One worker of ``devices`` ideal GPUs (1e12 FLOP/s, 1 ms to dispatch each, free links), global batch 4."""
    return Scenario.from_dict({
        "schema_version": SCHEMA_VERSION,
        "cluster": {"device": {"name": "g", "kind": "gpu", "peak_flops": 1e12, "efficiency": 1.0,
                               "memory_bandwidth_Bps": 1e12, "memory_bytes": 1e15, "step_overhead_s": 0.0,
                               "replica_dispatch_s": 1e-3},
                    "intra_link": {"name": "i", "bandwidth_Bps": 1e12, "latency_s": 0.0},
                    "inter_link": {"name": "e", "bandwidth_Bps": 1e12, "latency_s": 0.0},
                    "devices_per_worker": devices},
        "workload": {"name": "w", "num_params": 1, "flops_per_sample": flops_per_sample, "num_examples": 400},
        "strategy": strategy,
        "training": {"global_batch": 4, "steps": 5, "optimizer_bytes_per_param": 0, **training}})


def _backup_minimal() -> Scenario:
    """1 worker of 4 GPUs, 1 ms to dispatch each, 0.1 ms of compute each, 3 backup workers."""
    return _one_gpu_worker(4, 1e8, {"name": "mirrored"},
                           {"backup_workers": 3, "metric_values": 0})


def test_backup_step_still_pays_the_hosts_dispatch():
    """Hand derivation: the host dispatches 4 replicas, 1 ms each, every step
    (steady.py); replica 0 finishes first (1 + 0.1 ms) and is the one kept,
    the others are dropped (the kept gradient's ring ends at about 1.1 ms),
    but the host starts the next step only after its last dispatch: 4 ms a step
    (before the fix the timeline took 1.1 ms and the closed form 4.1 ms)."""
    s = _backup_minimal()
    hand = 4e-3
    assert float(np.mean(model.sync_step_times(s)[1:])) == pytest.approx(hand, rel=1e-9)
    assert _mean_full_step(distsim.predict(s)) == pytest.approx(hand, rel=DETERMINISTIC_TOL)
    assert float(step_model(s).step_time_s) == pytest.approx(hand, rel=DETERMINISTIC_TOL)


def test_backup_workers_with_dispatch_agree_on_60_random_even_scenarios():
    """predict and the closed form (what sweep uses) against the oracle, with
    a per-replica dispatch: the kept replicas are the first dispatched, and the
    host still dispatches the dropped ones. Even batches only: with an uneven
    split the closed form takes the busiest batch for the kept replicas."""
    rng = np.random.default_rng(42)
    checked = 0
    while checked < 60:
        s = scenarios.sync_scenario(rng, even=True, backup=True)
        if not s.training.backup_workers:
            continue
        want = float(np.mean(model.sync_step_times(s)[1:]))
        assert _mean_full_step(distsim.predict(s)) == pytest.approx(want, rel=DETERMINISTIC_TOL), s.to_dict()
        assert float(step_model(s).step_time_s) == pytest.approx(want, rel=DETERMINISTIC_TOL), s.to_dict()
        checked += 1


def _async_errors(seed: int, count: int, apply_at_ps: bool, copy: bool, **extra) -> list[tuple[float, object]]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        s = scenarios.async_scenario(rng, copy=copy, **extra)
        want = model.async_step_time(s, apply_at_ps=apply_at_ps)
        out.append((distsim.predict(s).summary.step_time_s / want - 1, s))
    return out


def test_async_transfers_and_queueing_agree_on_100_random_scenarios():
    """Scenarios where today's known async gaps are zero by construction: no
    optimizer bytes (so no apply at the PS) and nothing to copy to the device."""
    errors = _async_errors(7, 100, apply_at_ps=True, copy=False, optimizer_bytes_per_param=0)
    worst, s = max(errors, key=lambda e: abs(e[0]))
    assert abs(worst) <= DETERMINISTIC_TOL, (worst, s.to_dict())
    queued = [s for _, s in errors if s.num_replicas * 2 * costs.async_costs(s).shard_s
              > costs.async_costs(s).compute_s]
    assert len(queued) >= 10  # the PS is the bottleneck in a good part of them


def test_async_agrees_on_100_random_scenarios_with_apply_and_copy():
    """The optimizer's apply at the PS host (issue 24 item 3) and each
    worker's copy of its whole batch to its device."""
    errors = _async_errors(11, 100, apply_at_ps=True, copy=True)
    worst, s = max(errors, key=lambda e: abs(e[0]))
    assert abs(worst) <= DETERMINISTIC_TOL, (worst, s.to_dict())
    # The apply matters: without it the oracle is more than 1 % off in a good part of them.
    assert sum(abs(distsim.predict(s).summary.step_time_s / model.async_step_time(s, apply_at_ps=False) - 1)
               > DETERMINISTIC_TOL for _, s in errors) >= 10


def _in_process_errors(seed: int, count: int, served: bool = True, **extra) -> list[tuple[float, object]]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        s = scenarios.in_process_scenario(rng, **extra)
        want = model.async_step_time(s) if served else _unserved_step(s)
        out.append((distsim.predict(s).summary.step_time_s / want - 1, s))
    return out


def _unserved_step(s) -> float:
    """The oracle's step of ``s`` as if its workers computed beside the in-process server (the rule before
    issue 24's in-process measurement): the same scenario on GPUs, whose workers never share the cores."""
    d = s.to_dict()
    d["cluster"]["device"]["kind"] = "gpu"
    cores = d["cluster"].pop("physical_cores") or 1.0
    d["cluster"].pop("straggler_cores")  # a rough "before" for the check below: every worker on the same cores
    d["cluster"]["device"]["peak_flops"] *= cores  # a CPU device computes on all of its worker's cores
    d["cluster"]["device"]["step_overhead_s"] /= min(cores, 1.0)
    d["cluster"]["device"]["replica_dispatch_s"] /= min(cores, 1.0)
    d["workload"]["input_bytes_per_sample"] = 0  # a CPU device copies nothing
    return model.async_step_time(Scenario.from_dict(d))


def test_in_process_cluster_agrees_on_100_random_scenarios():
    """``ps_cluster="in_process"``: one server holds each whole transfer and every apply, and on shared
    CPU cores each worker's own time too. Deterministic compute, so the agreement is exact but for float
    rounding (``DETERMINISTIC_TOL``)."""
    errors = _in_process_errors(13, 100)
    worst, s = max(errors, key=lambda e: abs(e[0]))
    assert abs(worst) <= DETERMINISTIC_TOL, (worst, s.to_dict())
    served = [s for _, s in errors if costs.async_costs(s).served and s.num_replicas > 1]
    assert len(served) >= 30
    # The rule matters: where workers computed beside the server, the oracle is more than 1 % off.
    off = [e for e, s in _in_process_errors(13, 100, served=False) if costs.async_costs(s).served and s.num_replicas > 1]
    assert sum(abs(e) > DETERMINISTIC_TOL for e in off) >= 10


def test_in_process_on_shared_cores_is_every_workers_cycle_in_turn():
    """Hand derivation: 3 in-process workers on shared cores, a FIFO server that is never idle and
    serves each worker one stage at a time, round robin, so a step is the sum of the three cycles:
    ``3 (2 x transfer + apply + own)`` with the oracle's own costs of one worker (equal workers)."""
    rng = np.random.default_rng(3)
    while True:
        s = scenarios.in_process_scenario(rng)
        c = costs.async_costs(s)
        if c.served and s.num_replicas == 3 and s.cluster.straggler_cores is None:
            break
    hand = 3 * (2 * c.transfer_s + c.apply_s + c.compute_s)
    # rel 1e-9: the oracle's and the engine's float sums of the same few terms, and the oracle's 1e-12 s ties.
    assert model.async_step_time(s) == pytest.approx(hand, rel=1e-9)
    assert distsim.predict(s).summary.step_time_s == pytest.approx(hand, rel=1e-9)


def _async_apply_minimal():
    """1 worker, 2 shards: the cycle is pull + compute + push (+ the apply)."""
    return Scenario.from_dict({
        "schema_version": SCHEMA_VERSION,
        "cluster": {"device": {"name": "g", "kind": "gpu", "peak_flops": 1e13, "efficiency": 0.5,
                               "memory_bandwidth_Bps": 1e11, "memory_bytes": 1e15, "step_overhead_s": 1e-3},
                    "intra_link": {"name": "i", "bandwidth_Bps": 1e10, "latency_s": 0.0},
                    "inter_link": {"name": "e", "bandwidth_Bps": 1e11, "latency_s": 0.0}},
        "workload": {"name": "w", "num_params": 10**7, "flops_per_sample": 1e9, "num_examples": 6400},
        "strategy": {"name": "parameter_server", "num_ps": 2},
        "training": {"global_batch": 64, "steps": 20, "optimizer_bytes_per_param": 28}})


def test_async_minimal_scenario_pays_the_apply():
    """Hand derivation: compute 1 ms + 64 x 1e9 / 5e12 s = 13.8 ms; each
    transfer 4e7 B / 1e11 B/s = 0.4 ms; the apply on the PS host (a CPU: the
    ``this_machine_core`` preset's 1e10 B/s, prediction.py ``ps_apply_s``)
    1e7 x 28 B / 1e10 B/s = 28 ms over 2 shards, 14 ms: 28.6 ms per update
    (before issue 24's fix: 14.6 ms, no apply)."""
    s = _async_apply_minimal()
    hand = 1e-3 + 64 * 1e9 / 5e12 + 2 * 4e7 / 1e11 + 1e7 * 28 / 1e10 / 2
    assert model.async_step_time(s) == pytest.approx(hand, rel=1e-9)
    assert distsim.predict(s).summary.step_time_s == pytest.approx(hand, rel=DETERMINISTIC_TOL)


def _copy_bound():
    """The scenario of :func:`test_async_worker_copies_its_whole_batch` and its hand-derived step, seconds."""
    s = Scenario.from_dict({
        "schema_version": SCHEMA_VERSION,
        "cluster": {"device": {"name": "g", "kind": "gpu", "peak_flops": 1e12, "efficiency": 1.0,
                               "memory_bandwidth_Bps": 1e12, "memory_bytes": 1e15, "step_overhead_s": 1e-3},
                    "intra_link": {"name": "i", "bandwidth_Bps": 1e9, "latency_s": 0.0},
                    "inter_link": {"name": "e", "bandwidth_Bps": 1e12, "latency_s": 0.0}, "num_workers": 2},
        "workload": {"name": "w", "num_params": 1, "flops_per_sample": 1e6, "num_examples": 6400,
                     "input_bytes_per_sample": 10**6},
        "strategy": {"name": "parameter_server"},
        "training": {"global_batch": 64, "steps": 20, "optimizer_bytes_per_param": 0}})
    return s, 32 * 1e6 / 1e9 + 2 * 4 / 1e12


def test_async_worker_copies_its_whole_batch():
    """Hand derivation: 2 workers of one GPU, 32 examples each of 1 MB over a
    1 GB/s intra link: 32 ms of copy, more than the 1 ms overhead and
    0.032 ms of compute it overlaps (prefetch); transfers of 4 bytes at
    1e12 B/s, no apply: 32 ms an update."""
    s, hand = _copy_bound()
    assert model.async_step_time(s) == pytest.approx(hand, rel=1e-6)
    assert distsim.predict(s).summary.step_time_s == pytest.approx(hand, rel=DETERMINISTIC_TOL)


@pytest.mark.parametrize("distribution", ["exponential", "lognormal"])
def test_async_noise_is_on_the_compute_only(distribution):
    """The same 2 workers under noise: only the device's compute is random
    (the timeline's rule), and the 32 ms copy it overlaps hides a 1.032 ms
    device step unless a compute factor exceeds 31 ms / 0.032 ms = 968 (a
    chance of e^-968 a draw for Exp(1), none for a lognormal of sigma 0.5), so
    every update takes exactly the hand-derived 32 ms, as one device's step
    does (the same copy): efficiency 1 less the transfers' 8 ps. When the
    noise multiplied the copy too, an update took the mean of 20 random
    factors times 32 ms, a few tens of percent either way."""
    s, hand = _copy_bound()
    s = s.replace("training.compute_distribution", distribution)
    result = distsim.predict(s)
    assert result.summary.step_time_s == pytest.approx(hand, rel=1e-9)
    assert model.async_step_time(s) == pytest.approx(hand, rel=1e-6)
    assert result.summary.efficiency <= 1.0


def _uneven_minimal():
    """1 worker of 3 GPUs, global batch 4: tf.distribute gives the replicas 2,
    2 and 0 examples. The ring priced as alpha-beta (TensorFlow's default for
    mirrored on GPUs is NCCL, whose tuning latencies the oracle leaves out)."""
    return _one_gpu_worker(3, 1e10, {"name": "mirrored", "protocol": "alpha_beta"}, {})


#: Hand derivation for :func:`_uneven_minimal`: replica j starts after j + 1
#: dispatches of 1 ms; replicas 0 and 1 compute 2 examples at 10 ms each,
#: replica 2 none: the step ends at max(1 + 20, 2 + 20, 3 + 0) = 22 ms, plus a
#: ring of 4 bytes over 3 ranks (4 steps of 4/3 B at 1e12 B/s).
UNEVEN_HAND_S = 2e-3 + 2 * 1e10 / 1e12 + 4 * (4 / 3) / 1e12


def test_uneven_split_by_hand():
    s = _uneven_minimal()
    assert float(np.mean(model.sync_step_times(s)[1:])) == pytest.approx(UNEVEN_HAND_S, rel=1e-9)
    assert _mean_full_step(distsim.predict(s)) == pytest.approx(UNEVEN_HAND_S, rel=1e-9)


def test_closed_form_agrees_on_an_uneven_split():
    """sweep's row (steady.step_model) is the hand derivation too (before the
    fix it charged the last-dispatched replica the busiest batch: 23 ms)."""
    table = distsim.sweep(_uneven_minimal(), {"training.global_batch": [4]})
    assert float(table["step_time_s"][0]) == pytest.approx(UNEVEN_HAND_S, rel=DETERMINISTIC_TOL)


def test_closed_form_agrees_on_150_random_uneven_scenarios():
    """The closed form (sweep's model) against the oracle where the global
    batch is split unevenly, a third on shared CPU cores with CPU-quota
    stragglers (the last worker, whose batch is the smallest)."""
    rng = np.random.default_rng(77)
    uneven = 0
    for i in range(150):
        s = scenarios.sync_scenario(rng, even=False, cpu=i % 3 == 2)
        uneven += s.training.global_batch % s.num_replicas != 0
        want = float(np.mean(model.sync_step_times(s)[1:]))
        assert float(step_model(s).step_time_s) == pytest.approx(want, rel=DETERMINISTIC_TOL), s.to_dict()
    assert uneven >= 50


@pytest.mark.parametrize("prefetch, seed", [(False, 31), (True, 32)])
def test_epoch_time_agrees_on_100_random_scenarios(prefetch, seed):
    """Whole epochs under DATA sharding: 2-6 full steps and a partial last
    one (a multiple of the replicas: the uneven split is
    :func:`test_closed_form_agrees_on_an_uneven_split`), or none with
    drop_remainder; shuffle buffers of 0-5000 (whose fill steady.py counts
    only with prefetch, where the final step hides what it can of it). An
    epoch is ``steps_per_epoch`` mean steps of the run (issue 24, item 2: one
    total simulated time), so a run of three epochs gives the steady epoch:
    the oracle runs three epochs; its second is compared."""
    rng = np.random.default_rng(seed)
    for _ in range(100):
        s = scenarios.sync_scenario(rng, even=True, cpu=bool(rng.random() < 0.3), prefetch=prefetch,
                                    shuffle_buffer=int(rng.choice([0, 100, 5000])), shard_policy="DATA",
                                    drop_remainder=bool(rng.random() < 0.3))
        g, n = s.training.global_batch, s.num_replicas
        s = s.replace("workload.num_examples", int(g * rng.integers(2, 7) + n * rng.integers(0, g // n)))
        per = len(costs.epoch_steps(s))
        s = s.replace("training.steps", 3 * per)
        oracle = _second_epoch_s(s, per)
        result = distsim.predict(s)
        assert result.summary.steps_per_epoch == per
        assert result.summary.epoch_time_s == pytest.approx(oracle, rel=DETERMINISTIC_TOL), s.to_dict()


def _one_device(num_examples: int, input_s_per_sample: float, shuffle_buffer: int = 0) -> Scenario:
    """One GPU computing 1 ms an example, 10 examples a step, nothing else."""
    return Scenario.from_dict({
        "schema_version": SCHEMA_VERSION,
        "cluster": {"device": {"name": "g", "kind": "gpu", "peak_flops": 1e12, "efficiency": 1.0,
                               "memory_bandwidth_Bps": 1e12, "memory_bytes": 1e15, "step_overhead_s": 0.0},
                    "intra_link": {"name": "i", "bandwidth_Bps": 1e12, "latency_s": 0.0},
                    "inter_link": {"name": "e", "bandwidth_Bps": 1e12, "latency_s": 0.0}},
        "workload": {"name": "w", "num_params": 1, "flops_per_sample": 1e9, "num_examples": num_examples,
                     "input_s_per_sample": input_s_per_sample},
        "strategy": {"name": "one_device"},
        "training": {"global_batch": 10, "steps": 12, "optimizer_bytes_per_param": 0,
                     "shuffle_buffer": shuffle_buffer}})


def _second_epoch_s(s: Scenario, per: int) -> float:
    return float(np.sum(model.sync_step_times(s, epochs=3)[per:2 * per]))



def test_epoch_time_hides_the_fill_under_the_previous_step():
    """Hand derivation: 40 examples, 4 steps of 10 ms compute; input 1 ms a
    step, the fill 40 x 0.1 ms = 4 ms. When the last step of an epoch
    starts, the host reads the buffer and the next batch (5 ms) during its
    10 ms: nothing is exposed, 4 x 10 = 40 ms an epoch after the first
    (before the fix predict added the whole fill: 44 ms). The run's 12
    steps are three such epochs."""
    s = _one_device(40, 1e-4, shuffle_buffer=40)
    assert _second_epoch_s(s, 4) == pytest.approx(0.040, rel=1e-9)
    assert distsim.predict(s).summary.epoch_time_s == pytest.approx(0.040, rel=DETERMINISTIC_TOL)


def test_epoch_time_counts_the_input_a_short_last_step_exposes():
    """Hand derivation: 31 examples: steps of 10, 10, 10 and 1 example (10,
    10, 10, 1 ms of compute); input 5 ms a full batch. The next epoch's first
    batch is read from the start of the 1 ms step: 4 ms exposed, so 14 + 10 +
    10 + 1 = 35 ms an epoch after the first (before the fix predict priced
    every step at max(input, device): 31 ms). The run's 12 steps are three
    such epochs."""
    s = _one_device(31, 5e-4)
    assert _second_epoch_s(s, 4) == pytest.approx(0.035, rel=1e-9)
    assert distsim.predict(s).summary.epoch_time_s == pytest.approx(0.035, rel=DETERMINISTIC_TOL)


def _relative_se(step_times: np.ndarray) -> float:
    """Standard error of the mean step over the mean (steps taken as independent)."""
    return float(np.std(step_times) / np.mean(step_times) / np.sqrt(len(step_times)))


@pytest.mark.parametrize("distribution, sigma, steps, seed", [("lognormal", 0.3, 800, 1), ("lognormal", 0.6, 1500, 2),
                                                             ("exponential", 0.1, 2500, 3)])
def test_sync_mean_step_under_noise(distribution, sigma, steps, seed):
    """Two random scenarios of 4 or more replicas per distribution. The
    oracle's own standard error must be under 1 % for the 3 % comparison to
    say something (steps chosen for that)."""
    rng = np.random.default_rng(seed)
    checked = 0
    while checked < 2:
        s = scenarios.sync_scenario(rng, steps=steps, even=True, compute_distribution=distribution,
                                    compute_sigma=sigma, seed=seed)
        if s.num_replicas < 4:
            continue
        oracle_steps = model.sync_step_times(s, seed=seed + 100)[1:]
        assert _relative_se(oracle_steps) < 0.01
        got = _mean_full_step(distsim.predict(s))
        assert got == pytest.approx(float(np.mean(oracle_steps)), rel=NOISY_TOL), s.to_dict()
        checked += 1


@pytest.mark.parametrize("distribution, seed", [("lognormal", 4), ("exponential", 5)])
def test_async_mean_step_under_noise(distribution, seed):
    """Two random async scenarios of 3 or more workers per distribution (no
    apply, no copy, as above), 2500 updates per worker: the rate over 7500+
    updates has a relative standard error under the compute's CV (1 for
    exponential) / sqrt(7500), 1.2 %, on each side."""
    rng = np.random.default_rng(seed)
    checked = 0
    while checked < 2:
        sigma = {"compute_sigma": 0.5} if distribution == "lognormal" else {}  # refused for any other
        s = scenarios.async_scenario(rng, steps=2500, copy=False, compute_distribution=distribution,
                                     optimizer_bytes_per_param=0, seed=seed, **sigma)
        if s.num_replicas < 3:
            continue
        want = model.async_step_time(s, seed=seed + 100)
        assert distsim.predict(s).summary.step_time_s == pytest.approx(want, rel=NOISY_TOL), s.to_dict()
        checked += 1


@pytest.mark.parametrize("distribution, seed", [("lognormal", 4), ("exponential", 5)])
def test_in_process_mean_step_under_noise(distribution, seed):
    """Two random in-process scenarios of 2 or more workers on shared cores per distribution, 2500
    updates per worker, against the oracle's own draws: the same standard-error argument as above."""
    rng = np.random.default_rng(seed)
    checked = 0
    while checked < 2:
        sigma = {"compute_sigma": 0.5} if distribution == "lognormal" else {}
        s = scenarios.in_process_scenario(rng, steps=2500, compute_distribution=distribution, seed=seed, **sigma)
        if s.num_replicas < 2 or not costs.async_costs(s).served:
            continue
        want = model.async_step_time(s, seed=seed + 100)
        assert distsim.predict(s).summary.step_time_s == pytest.approx(want, rel=NOISY_TOL), s.to_dict()
        checked += 1


@pytest.mark.parametrize("distribution, seed", [("lognormal", 6), ("exponential", 8)])
def test_async_mean_step_under_noise_when_the_input_matches_the_device(distribution, seed):
    """As above, with each worker's input read set to its device's mean time
    (step overhead, dispatch and compute): with prefetch a worker then waits
    ``max(input, host + compute x factor)``, whose mean exceeds the deterministic
    time by ``compute x E[(factor - 1 - host/compute)+]`` (for Exp(1) and no host
    time, e^-1 = 37 % of the compute), where noise on the whole worker time
    keeps its mean. The rate over 7500+ updates has a relative standard error
    under 1.2 % (see above), so 3 % separates the two rules."""
    rng = np.random.default_rng(seed)
    checked = 0
    while checked < 2:
        sigma = {"compute_sigma": 0.5} if distribution == "lognormal" else {}
        s = scenarios.async_scenario(rng, steps=2500, copy=False, compute_distribution=distribution,
                                     optimizer_bytes_per_param=0, seed=seed, prefetch=True, **sigma)
        c = costs.async_costs(s)
        # Skip scenarios the PS or the transfers dominate: there the worker's own time hardly counts.
        if s.num_replicas < 3 or 2 * c.transfer_s > c.compute_s or s.num_replicas * 2 * c.shard_s > c.compute_s:
            continue
        speed = s.cluster.host_input_speed * s.training.input_threads
        s = s.replace("workload.input_s_per_sample", (c.host_s + c.work_s) * speed / costs.replica_batch(s))
        want = model.async_step_time(s, seed=seed + 100)
        assert distsim.predict(s).summary.step_time_s == pytest.approx(want, rel=NOISY_TOL), s.to_dict()
        checked += 1


def test_backup_workers_mean_step_under_exponential_noise():
    """Two random scenarios of 4+ replicas keeping 2+ of them, exponential
    compute, 2500 steps: the oracle's standard error stays under 1 % (checked)."""
    rng = np.random.default_rng(43)
    checked = 0
    while checked < 2:
        s = _backup_scenario(rng, steps=2500, compute_distribution="exponential", seed=43)
        if s.num_replicas < 4 or s.num_replicas - s.training.backup_workers < 2:
            continue
        oracle_steps = model.sync_step_times(s, seed=143)[1:]
        assert _relative_se(oracle_steps) < 0.01
        assert _mean_full_step(distsim.predict(s)) == pytest.approx(float(np.mean(oracle_steps)), rel=NOISY_TOL)
        checked += 1
