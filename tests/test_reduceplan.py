"""distsim.mechanics.reduceplan: the compiled all-reduce is bit-identical to collectives.execute."""

import numpy as np
import pytest
from input_errors import raises_input

from distsim.mechanics import collectives
from distsim.mechanics.reduceplan import compile_schedule
from distsim.numerics.train import chunk_element_bounds

CASES = [
    ("ring", p, {}) for p in (1, 2, 3, 5, 8, 64)
] + [
    ("tree", p, {}) for p in (2, 3, 7, 64)
] + [
    ("halving_doubling", p, {}) for p in (2, 3, 6, 8, 13)
] + [
    ("hierarchical", 8, {"ranks_per_node": 4}),
    ("hierarchical", 12, {"ranks_per_node": 3}),
    ("torus2d", 12, {}),
    ("torus2d", 16, {"dims": (2, 8)}),
    ("reduce_to_one", 5, {"root": 2}),
    ("reduce_to_one", 4, {"extra_root": True}),
    ("parameter_server", 4, {"num_shards": 3}),
    ("parameter_server", 3, {"num_shards": 7}),
]


@pytest.mark.parametrize("algorithm, p, options", CASES, ids=[f"{a}-{p}-{o}" for a, p, o in CASES])
@pytest.mark.parametrize("n", [1, 5, 1001])
def test_plan_equals_execute_bit_for_bit(algorithm, p, options, n):
    rng = np.random.default_rng(p * 1000 + n)
    # float32 makes summation-order differences visible: any deviation from the
    # schedule's order of additions would show up as a mismatch in the last bits.
    grads = rng.standard_normal((p, n)).astype(np.float32) * rng.uniform(0.01, 100, (p, 1)).astype(np.float32)
    schedule = collectives.build_schedule(algorithm, p, n * 4, **options)
    plan = compile_schedule(schedule, chunk_element_bounds(schedule, n))
    reference = collectives.execute(schedule, list(grads))
    out = plan.reduce(grads)
    assert plan.ranks_agree
    for rank in schedule.result_ranks:
        np.testing.assert_array_equal(out, reference[rank])


def test_ring_plan_shape_and_depth():
    schedule = collectives.build_schedule("ring", 8, 8000 * 8)
    plan = compile_schedule(schedule, chunk_element_bounds(schedule, 8000))
    # Each of the 8 chunks is folded over 8 ranks: 7 additions each, 7 levels deep.
    assert plan.depth == 7 and plan.num_additions == 8 * 7


def test_plan_rejects_wrong_shape():
    schedule = collectives.build_schedule("tree", 4, 80)
    plan = compile_schedule(schedule, chunk_element_bounds(schedule, 10))
    with raises_input("grads.shape", "(3, 10)", "(4, 10): one row of 10 gradient values per rank of this plan"):
        plan.reduce(np.zeros((3, 10)))
    with raises_input("grads.shape", "(40,)", "(4, 10)"):
        plan.reduce(np.zeros(40))


T = collectives.Transfer


def _two_ranks(*transfers, result_ranks=(0, 1)):
    """A hand-made 2-rank, 1-chunk schedule: rank 1 sends its gradient to rank 0, which sends the sum back."""
    transfers = transfers or (T(0, 1, 0, 0, 8, "reduce"), T(1, 0, 1, 0, 8, "copy"))
    return collectives.Schedule("ring", 2, 1, transfers, 8, 2, result_ranks, (0, 0))


def test_hand_made_schedule_runs():
    plan = compile_schedule(_two_ranks(), np.array([0, 3]))
    np.testing.assert_array_equal(plan.reduce(np.array([[1.0, 2, 3], [10, 20, 30]])), [11, 22, 33])


@pytest.mark.parametrize(
    "schedule, path, value, allowed",
    [
        (_two_ranks(T(0, 1, 0, 0, 8, "add")), "schedule.transfers[0].op", "'add'", "one of ('reduce', 'copy')"),
        (_two_ranks(T(0, 1, 0, 0, 8, "reduce"), T(1, 0, 2, 0, 8, "copy")), "schedule.transfers[1].dst", "2",
         "an integer >= 0 and <= 1 (a rank of the schedule)"),
        (_two_ranks(T(0, -1, 0, 0, 8, "reduce")), "schedule.transfers[0].src", "-1", "a rank of the schedule"),
        (_two_ranks(T(0, 1, 0, 1, 8, "reduce")), "schedule.transfers[0].chunk", "1",
         "an integer >= 0 and <= 0 (a chunk of the schedule)"),
        (_two_ranks(T(0, 1, 0, 0.0, 8, "reduce")), "schedule.transfers[0].chunk", "0.0", "a chunk of the schedule"),
        (_two_ranks(result_ranks=(0, -1)), "schedule.result_ranks[1]", "-1", "a rank of the schedule"),
        # Rank 2 is a server (it has no gradient of its own) that no transfer reaches: a
        # hand-made schedule can leave a result rank without a value.
        (collectives.Schedule("parameter_server", 3, 1, (T(0, 1, 0, 0, 8, "reduce"),), 8, 2, (0, 2), (0, 0, 0)),
         "schedule.result_ranks", "(0, 2)", "ranks that end with every chunk; rank 2 never receives chunk 0"),
    ],
)
def test_bad_hand_made_schedules_are_rejected(schedule, path, value, allowed):
    with raises_input(path, value, allowed):
        compile_schedule(schedule, np.array([0, 3]))


@pytest.mark.parametrize("bounds", [[0, 3, 5], [1, 3], [3, 0], [0.0, 3.0]])
def test_bad_chunk_bounds_are_rejected(bounds):
    with raises_input("chunk_bounds", repr(bounds), "2 integer element offsets from 0, never decreasing"):
        compile_schedule(_two_ranks(), bounds)


def test_plan_detects_ranks_that_disagree():
    """A hand-made schedule whose two ranks sum in different orders is flagged."""
    T = collectives.Transfer
    # 3 ranks; ranks 0 and 1 each build the sum with different association.
    transfers = (
        T(0, 1, 0, 0, 8, "reduce"),  # r0 = g0 + g1
        T(0, 2, 1, 0, 8, "reduce"),  # r1 = g1 + g2
        T(1, 2, 0, 0, 8, "reduce"),  # r0 = (g0 + g1) + g2
        T(1, 0, 1, 0, 8, "reduce"),  # r1 = (g1 + g2) + (g0 + g1)   -- not the same sum
    )
    schedule = collectives.Schedule("ring", 3, 1, transfers, 8, 3, (0, 1), (0, 0, 0))
    plan = compile_schedule(schedule, np.array([0, 1]))
    assert not plan.ranks_agree
    grads = np.array([[1.0], [2.0], [3.0]])
    out = plan.reduce(grads)
    np.testing.assert_array_equal(out, [[6.0], [8.0]])
