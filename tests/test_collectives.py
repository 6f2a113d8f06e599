"""Collective schedules: executed on integer arrays every result rank must hold
the exact sum; schedule costs must equal the closed-form alpha-beta formulas."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from distsim.mechanics.collectives import ALGORITHMS, Transfer, build_schedule, cost_model, execute


def _options(algorithm, p, draw_int):
    if algorithm == "hierarchical":
        divisors = [d for d in range(1, p + 1) if p % d == 0]
        return {"ranks_per_node": divisors[draw_int(0, len(divisors) - 1)]}
    if algorithm == "parameter_server":
        return {"num_shards": draw_int(1, 4)}
    if algorithm == "reduce_to_one":
        return {"extra_root": bool(draw_int(0, 1))}
    return {}


@settings(max_examples=120, deadline=None)
@given(
    algorithm=st.sampled_from(ALGORITHMS),
    p=st.integers(1, 12),
    length=st.integers(1, 40),
    seed=st.integers(0, 2**32 - 1),
    data=st.data(),
)
def test_every_result_rank_ends_with_exact_sum(algorithm, p, length, seed, data):
    options = _options(algorithm, p, lambda lo, hi: data.draw(st.integers(lo, hi)))
    schedule = build_schedule(algorithm, p, 4 * length, **options)
    rng = np.random.default_rng(seed)
    # Integers make the sum exact whatever order the algorithm adds in.
    inputs = [rng.integers(-1000, 1000, size=length) for _ in range(p)]
    before = [a.copy() for a in inputs]
    out = execute(schedule, inputs)
    total = np.sum(inputs, axis=0)
    assert all(np.array_equal(a, b) for a, b in zip(inputs, before))  # inputs untouched
    assert len(out) == schedule.num_ranks
    assert schedule.result_ranks, "some rank must get the sum"
    for rank in schedule.result_ranks:
        np.testing.assert_array_equal(out[rank], total)
    if algorithm == "parameter_server":
        assert schedule.result_ranks == tuple(range(p))
        bounds = np.cumsum([0] + [len(c) for c in np.array_split(total, schedule.num_chunks)])
        for shard in range(options["num_shards"]):
            lo, hi = bounds[shard], bounds[shard + 1]
            np.testing.assert_array_equal(out[p + shard][lo:hi], total[lo:hi])
    else:
        assert set(schedule.result_ranks) == set(range(schedule.num_ranks))


def test_transfer_is_frozen_and_schedule_is_explicit():
    s = build_schedule("ring", 3, 300)
    assert isinstance(s.transfers[0], Transfer)
    with pytest.raises(AttributeError):
        s.transfers[0].step = 5
    # Ring on 3 ranks: 2(p-1) = 4 steps, each rank sends one 100-byte chunk a step.
    assert s.num_steps == 4 and len(s.transfers) == 12
    assert {t.bytes for t in s.transfers} == {100}
    assert {t.op for t in s.transfers if t.step < 2} == {"reduce"}
    assert {t.op for t in s.transfers if t.step >= 2} == {"copy"}


def _option_sets(algorithm, p):
    """Every placement option worth checking for ``algorithm`` on ``p`` ranks."""
    divisors = [d for d in range(1, p + 1) if p % d == 0]
    if algorithm in ("ring", "tree", "halving_doubling", "hierarchical"):
        return [{"ranks_per_node": d} for d in divisors]
    if algorithm == "reduce_to_one":
        return [{"ranks_per_node": d, "root": r, "extra_root": x}
                for d in divisors for r in sorted({0, p // 2, p - 1}) for x in (False, True)]
    if algorithm == "parameter_server":
        return [{"num_shards": k, "ps_on_worker_nodes": c} for k in (1, 3, 8) for c in (False, True)]
    return [{"dims": (r, p // r)} for r in divisors]


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_closed_form_equals_the_priced_schedule_up_to_64_ranks(algorithm):
    # Every p in 1..64, one placement per p (cycling through the options so
    # every kind of node layout shows up), a message size that does not
    # divide into the chunks, and links whose two classes differ.
    rng = np.random.default_rng(64)
    for p in range(1, 65):
        sets = _option_sets(algorithm, p)
        options = sets[p % len(sets)]
        n = int(rng.integers(0, 40 * p)) * 7 + 5  # rarely a multiple of the chunk count
        links = (rng.uniform(0, 1e-3), rng.uniform(1, 100), rng.uniform(0, 1e-2), rng.uniform(0.5, 50))
        schedule = build_schedule(algorithm, p, n, **options).time_s(*links)
        closed = float(cost_model(algorithm, p, **options).exact_time_s(n, *links))
        # Same sums of the same terms in another order: float rounding only.
        assert closed == pytest.approx(schedule, rel=1e-12), (p, options, n)


@settings(max_examples=150, deadline=None)
@given(algorithm=st.sampled_from(ALGORITHMS), p=st.integers(1, 24), n=st.integers(0, 5000), data=st.data())
def test_closed_form_equals_the_schedule_for_any_placement_and_size(algorithm, p, n, data):
    options = data.draw(st.sampled_from(_option_sets(algorithm, p)))
    links = (1e-4, 3.0, 2e-3, 0.7)
    schedule = build_schedule(algorithm, p, n, **options).time_s(*links)
    assert float(cost_model(algorithm, p, **options).exact_time_s(n, *links)) == pytest.approx(schedule, rel=1e-12)


def test_closed_forms_are_the_textbook_formulas_for_divisible_messages():
    # Independent hand derivations (DESIGN.md), with n divisible by every chunk count.
    alpha, bw, n = 1e-5, 1e9, 720720 * 64
    for p in (2, 3, 8, 12, 64):
        ring = 2 * (p - 1) * alpha + 2 * (p - 1) / p * n / bw
        tree = 2 * math.ceil(math.log2(p)) * (alpha + n / bw)
        to_one = 2 * (alpha + (p - 1) * n / bw)
        for algorithm, expected in (("ring", ring), ("tree", tree), ("reduce_to_one", to_one)):
            assert float(cost_model(algorithm, p).time_s(n, alpha, bw)) == pytest.approx(expected, rel=1e-12)
            assert float(cost_model(algorithm, p).exact_time_s(n, alpha, bw)) == pytest.approx(expected, rel=1e-12)
    for p in (2, 4, 32):
        hd = 2 * math.log2(p) * alpha + 2 * (p - 1) / p * n / bw
        assert float(cost_model("halving_doubling", p).time_s(n, alpha, bw)) == pytest.approx(hd, rel=1e-12)
    # Two levels: L ranks per node, M nodes, the NIC carries the node's whole message.
    L, M, a2, b2 = 4, 8, 2e-5, 1e8
    hier = 2 * (L - 1) * alpha + 2 * (L - 1) / L * n / bw + 2 * (M - 1) * a2 + 2 * (M - 1) / M * n / b2
    model = cost_model("hierarchical", L * M, ranks_per_node=L)
    assert float(model.time_s(n, alpha, bw, a2, b2)) == pytest.approx(hier, rel=1e-12)
    # Parameter server with k shards and w workers: each direction max(n/B, w n/(k B)).
    for w, k in ((1, 1), (8, 2), (3, 8)):
        ps = 2 * (alpha + max(n / bw, w * n / (k * bw)))
        assert float(cost_model("parameter_server", w, num_shards=k).time_s(n, alpha, bw)) == pytest.approx(ps)


def test_fluid_model_is_the_large_message_limit_of_the_exact_one():
    for algorithm in ALGORITHMS:
        model = cost_model(algorithm, 12, **_option_sets(algorithm, 12)[1])
        n = 10**15 + 7  # chunk rounding is a part in 10^14 of this
        assert float(model.time_s(n, 1e-6, 1e9, 1e-5, 1e8)) == pytest.approx(
            float(model.exact_time_s(n, 1e-6, 1e9, 1e-5, 1e8)), rel=1e-12)


def test_cost_model_prices_100000_ranks_without_a_schedule():
    # 2 x 100,000 ranks would be 2e10 transfers as a schedule; the closed form is a few classes.
    ring = cost_model("ring", 100_000, ranks_per_node=8)
    t = float(ring.time_s(1e8, 1e-6, 1e11, 1e-5, 1e10))
    # Every step one 1e8/1e5-byte chunk crosses each NIC: 2(p-1) (alpha' + n/(p B')).
    assert t == pytest.approx(2 * 99_999 * (1e-5 + 1e3 / 1e10), rel=1e-12)
    assert ring.num_steps == 2 * 99_999
    hd = cost_model("halving_doubling", 98_304, ranks_per_node=6)  # nodes not a power of two: counted by rank
    assert np.isfinite(float(hd.time_s(1e8, 1e-6, 1e11, 1e-5, 1e10)))


def test_costs_grow_with_bytes_and_ranks():
    for algorithm in ("ring", "tree", "halving_doubling", "reduce_to_one", "parameter_server"):
        times = [build_schedule(algorithm, 8, n).time_s(1e-5, 1e9) for n in (0, 1000, 10**6, 10**8)]
        assert all(a < b for a, b in zip(times, times[1:])), algorithm
        times = [build_schedule(algorithm, p, 10**6).time_s(1e-5, 1e9) for p in (2, 4, 8, 16)]
        assert all(a <= b for a, b in zip(times, times[1:])), algorithm


def test_ring_busbw_approaches_link_bandwidth():
    s = build_schedule("ring", 8, 8 * 10**8)
    t = s.time_s(0.0, 1e10)
    # With zero latency the ring moves 2(p-1)/p n per port: busbw equals B exactly.
    assert s.busbw_Bps(t) == pytest.approx(1e10, rel=1e-12)
    assert s.algbw_Bps(t) == pytest.approx(1e10 * 8 / 14, rel=1e-12)


def test_nic_is_shared_by_ranks_of_a_node():
    # Ring over 2 nodes x 4 ranks with a slow inter link: the 4 ranks' inter-node
    # sends in a step share one NIC, so the ring is slower than a hierarchical one.
    ring = build_schedule("ring", 8, 8 * 10**6, ranks_per_node=4).time_s(0, 1e11, 0, 1e9)
    hier = build_schedule("hierarchical", 8, 8 * 10**6, ranks_per_node=4).time_s(0, 1e11, 0, 1e9)
    assert hier < ring


@pytest.mark.parametrize(
    "args, options, match",
    [
        (("butterfly", 4, 100), {}, "algorithm='butterfly'"),
        (("ring", 0, 100), {}, "num_ranks=0"),
        (("ring", 4, -1), {}, "message_bytes=-1"),
        (("hierarchical", 6, 100), {"ranks_per_node": 4}, "ranks_per_node=4"),
        (("torus2d", 6, 100), {"dims": (4, 2)}, "dims="),
        (("ring", 4, 100), {"num_shards": 2}, "num_shards"),
        (("reduce_to_one", 4, 100), {"root": 7}, "root=7"),
    ],
)
def test_bad_schedule_requests(args, options, match):
    with pytest.raises(ValueError, match=match):
        build_schedule(*args, **options)


def test_bad_link_and_arrays():
    s = build_schedule("ring", 2, 8)
    with pytest.raises(ValueError, match="bandwidth_Bps=-1"):
        s.time_s(0.0, -1)
    with pytest.raises(ValueError, match="got 3 arrays"):
        execute(s, [np.zeros(2)] * 3)
