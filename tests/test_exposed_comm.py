"""Exposed communication (``comm_fraction``) with replicas dispatched one after another.

The definition (``distsim.engines.steady``'s module docstring): a step exposes
the communication from the end of the last backward pass of any replica until
the last gradient collective ends. With a per-replica host dispatch, an earlier
replica with a larger batch can end its backward pass after the last-dispatched
one, whose first tensors start (and so end) the collectives. The closed form
used to count the exposure after the backward pass of that later replica (the
one whose own chain ends the step), the timeline after the last backward pass:
``bench_invariants --n 20000 --seed 801`` found sweep != predict on the two
CentralStorage scenarios below. Each test here fails on commit 543c705.
"""

import pytest

from distsim import make_scenario, predict, sweep

# bench_invariants --n 20000 --seed 801: sweep row != predict, comm_fraction only (step times agreed).
FOUND = [
    (dict(device="tpu_v4_core", workload="alexnet_227", strategy="central_storage", devices_per_worker=8,
          global_batch=234, compute_distribution="deterministic", num_buckets=6), 0.00018340372981085284),
    (dict(device="a100", workload="inception_v3_299", strategy="central_storage", devices_per_worker=3,
          compute_distribution="deterministic", shard_policy="FILE", num_files=23, grouping="per_tensor"),
     0.001006772093950746),
]


@pytest.mark.parametrize("kwargs, dispatch", FOUND)
def test_sweep_comm_fraction_is_predicts_with_per_replica_dispatch(kwargs, dispatch):
    scenario = make_scenario(**kwargs).replace("cluster.device.replica_dispatch_s", dispatch)
    want = predict(scenario).summary.comm_fraction
    row = sweep(scenario, {"training.seed": [0]})
    # Deterministic compute: one model, its sums taken in another order (closed form against the event
    # timeline), so float rounding only: about 1e-15 relative here; 1e-9 leaves room, and the bug was 2e-3.
    assert row["comm_fraction"][0] == pytest.approx(want, rel=1e-9)
    assert row["step_time_s"][0] == pytest.approx(predict(scenario).summary.step_time_s, rel=1e-9)


def _two_replicas(**training):
    """Two V100s under CentralStorage, 3 examples a step: replica 0 gets 2, replica 1 gets 1."""
    device = {"preset": "v100", "step_overhead_s": 0.75e-3, "replica_dispatch_s": 1.25e-3,
              "replica_variable_s": 0.25e-3, "kernel_launch_s": 0.0}
    workload = {"name": "two_tensors", "num_params": 125_000, "bytes_per_param": 4, "flops_per_sample": 1e6,
                "compute_s_per_sample": 1.2e-3, "num_examples": 300, "num_gradient_tensors": 2,
                "input_s_per_sample": 0.0, "input_bytes_per_sample": 0}
    return make_scenario(device, workload, "central_storage", devices_per_worker=2, global_batch=3,
                         intra_link={"preset": "pcie3_x16", "latency_s": 0.5e-3, "bandwidth_Bps": 1e9},
                         num_buckets=2, optimizer_bytes_per_param=0, compute_distribution="deterministic",
                         steps=4, **training)


def test_exposure_by_hand_counts_from_the_last_backward_pass():
    """By hand, in ms, times from the end of the host's fixed work:

    * host: central_storage pays the variables' share once, so the fixed work is 0.75 + 0.25 = 1.0
      and each replica's dispatch 1.25 - 0.25 = 1.0; replica j starts computing at (j + 1) x 1.0.
    * compute (1.2 per example; forward 1/3, backward 2/3): replica 0, 2 examples: starts 1.0,
      forward ends 1.8, half its backward at 2.6, backward ends 3.4. Replica 1, 1 example: starts 2.0,
      forward ends 2.4, half its backward at 2.8, backward ends 3.2.
    * collectives: 2 buckets of 250,000 bytes; reduce_to_one onto the host CPU over the one intra link
      (2 replicas + the host root: 2 x 250,000 bytes each way): 2 x (0.5 + 500,000 / 1e9 s) = 2.0 each.
      Bucket 0 is ready once both replicas are half way: 2.8 (replica 1), ends 4.8; bucket 1 ready at
      3.4, starts when the link is free, 4.8, and ends 6.8.
    * step: 1.0 + 6.8 = 7.8 (no input, update or metric time); exposed: 6.8 - 3.4 = 3.4 (replica 0's
      backward pass is the last to end), so comm_fraction = 3.4 / 7.8. Counting from replica 1's
      backward end (3.2), the one whose bucket 0 starts the chain, gives 3.6 / 7.8: the old closed form.
    * bottleneck (the closed form's pieces of the step): compute until the last backward pass ends,
      1.0 + 3.4 = 4.4, against the exposed 3.4: compute, 4.4 / 7.8 of the step (before: 4.2 / 7.8).
    """
    scenario = _two_replicas()
    # Float rounding of sums of a few terms; the values the test tells apart differ by 2.6 %.
    tol = dict(rel=1e-9)
    result = predict(scenario).summary
    assert result.step_time_s == pytest.approx(7.8e-3, **tol)
    assert result.comm_fraction == pytest.approx(3.4 / 7.8, **tol)
    assert (result.bottleneck, result.bottleneck_share) == ("compute", pytest.approx(4.4 / 7.8, **tol))
    row = sweep(scenario, {"training.seed": [0]})
    assert row["step_time_s"][0] == pytest.approx(7.8e-3, **tol)
    assert row["comm_fraction"][0] == pytest.approx(3.4 / 7.8, **tol)
