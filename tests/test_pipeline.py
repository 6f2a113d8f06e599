"""Pipeline-parallel simulator: closed forms, ordering of every pass, memory,
shared cores, and rejected inputs."""

from __future__ import annotations

import itertools
import math
from dataclasses import replace

import numpy as np
import pytest
from input_errors import raises_input

from distsim.engines.pipeline import (
    MAX_PASSES,
    MAX_SPLIT_WORK,
    SCHEDULES,
    Layer,
    LayeredModel,
    PipelineConfig,
    balanced_split,
    bubble_fraction_closed_form,
    config_for_hardware,
    data_parallel_estimate,
    data_parallel_scenario,
    dense_model,
    even_split,
    gpipe_step_closed_form_s,
    simulate_pipeline,
    stage_order,
)
from distsim.engines import steady
from distsim.mechanics.stepcosts import step_costs
from distsim.results.result import Result
from distsim.scenario import Device, Link, load_preset
from distsim.results.trace import Trace

# Sums of a few dozen float64 products: relative rounding stays far below 1e-9.
REL = 1e-9


def equal_model(num_layers: int, fwd: float = 3e6, bwd: float = 6e6) -> LayeredModel:
    return LayeredModel(784, tuple(Layer(f"l{i}", 100, fwd, bwd, 64) for i in range(num_layers)))


def random_model(rng: np.random.Generator, num_layers: int) -> LayeredModel:
    layers = tuple(
        Layer(f"l{i}", int(rng.integers(0, 10_000)), float(rng.uniform(1e5, 1e7)),
              float(rng.uniform(1e5, 2e7)), int(rng.integers(1, 2_000)))
        for i in range(num_layers)
    )
    return LayeredModel(int(rng.integers(1, 1_000)), layers)


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
def test_bubble_matches_closed_form_for_equal_stages(schedule):
    for p, m in itertools.product(range(1, 7), [1, 2, 3, 5, 8, 16]):
        cfg = PipelineConfig(equal_model(2 * p), (2,) * p, 48 * m, m, flops_per_s=1e10, schedule=schedule)
        run = simulate_pipeline(cfg)
        assert run.bubble_fraction == pytest.approx(float(bubble_fraction_closed_form(p, m)), rel=REL, abs=1e-12)
        f, b = cfg.stage_times_s()
        assert run.step_time_s == pytest.approx((m + p - 1) * (f[0] + b[0]), rel=REL)


def test_naive_keeps_one_stage_busy_whatever_m():
    for p, m in itertools.product(range(1, 6), [1, 4, 16]):
        cfg = PipelineConfig(equal_model(p), (1,) * p, 16 * m, m, flops_per_s=1e10, schedule="naive")
        run = simulate_pipeline(cfg)
        assert run.bubble_fraction == pytest.approx((p - 1) / p, rel=REL, abs=1e-12)
        assert run.speedup == pytest.approx(1.0, rel=REL)


def test_uneven_gpipe_step_is_the_flow_shop_closed_form():
    rng = np.random.default_rng(7)
    for _ in range(40):
        n = int(rng.integers(1, 9))
        model = random_model(rng, n)
        split = balanced_split(model, int(rng.integers(1, n + 1)))
        m = int(rng.integers(1, 12))
        cfg = PipelineConfig(model, split, 4 * m, m, flops_per_s=1e9, overhead_s=float(rng.uniform(0, 1e-3)))
        f, b = cfg.stage_times_s()
        assert simulate_pipeline(cfg).step_time_s == pytest.approx(gpipe_step_closed_form_s(f, b, m), rel=REL)


def test_slowest_stage_sets_the_pace():
    # Layer 0 costs 3x the others: with many micro-batches the step tends to
    # m x (slowest stage's f + b), not to m x (mean stage's f + b).
    layers = tuple(Layer(f"l{i}", 10, 3e6 if i == 0 else 1e6, 2 * (3e6 if i == 0 else 1e6), 8) for i in range(4))
    cfg = PipelineConfig(LayeredModel(8, layers), (1, 1, 1, 1), 256, 256, flops_per_s=1e9)
    run = simulate_pipeline(cfg)
    f, b = cfg.stage_times_s()
    slowest = 256 * (f.max() + b.max())
    assert slowest < run.step_time_s <= slowest + (f.sum() + b.sum())


def test_more_microbatches_shrink_the_bubble_and_step():
    cfg = PipelineConfig(equal_model(8), (2, 2, 2, 2), 256, 1, flops_per_s=1e10,
                         link_latency_s=1e-6, link_bandwidth_Bps=1e9)
    ms = [1, 2, 4, 8, 16, 32, 64]
    runs = {s: [simulate_pipeline(PipelineConfig(**{**vars(cfg), "num_microbatches": m, "schedule": s}))
                for m in ms] for s in ("gpipe", "1f1b")}
    for s, rs in runs.items():
        bubbles = np.array([r.bubble_fraction for r in rs])
        steps = np.array([r.step_time_s for r in rs])
        assert np.all(np.diff(bubbles) < 0), (s, bubbles)
        assert np.all(np.diff(steps) < 0), (s, steps)


def test_fixed_overhead_makes_too_many_microbatches_slower():
    # A per-pass overhead is paid m times, so past some m the step grows again.
    base = dict(model=equal_model(4), layers_per_stage=(1, 1, 1, 1), global_batch=1024, flops_per_s=1e10,
                overhead_s=2e-4)
    steps = [simulate_pipeline(PipelineConfig(num_microbatches=m, **base)).step_time_s for m in (1, 8, 1024)]
    assert steps[1] < steps[0] and steps[1] < steps[2]


def _passes(trace: Trace):
    """{(direction, stage, micro-batch): [(start, end), ...]} from the trace's compute events."""
    out: dict[tuple[str, int, int], list[tuple[float, float]]] = {}
    for e in trace.events():
        if e.kind == "compute":
            direction, _, mb = e.label.split()
            stage = trace.devices.index(e.device)
            out.setdefault((direction, stage, int(mb)), []).append((e.start_s, e.end_s))
    return out


@pytest.mark.parametrize("schedule", SCHEDULES)
@pytest.mark.parametrize("shared", [False, True])
def test_every_microbatch_passes_every_stage_forward_then_backward(schedule, shared):
    rng = np.random.default_rng(11)
    for _ in range(15):
        n = int(rng.integers(1, 7))
        p = int(rng.integers(1, n + 1))
        m = int(rng.integers(1, 9))
        cfg = PipelineConfig(random_model(rng, n), even_split(n, p), 2 * m, m, flops_per_s=1e9,
                             link_latency_s=float(rng.uniform(0, 1e-3)), link_bandwidth_Bps=float(rng.uniform(1e6, 1e9)),
                             overhead_s=float(rng.uniform(0, 1e-4)), schedule=schedule, devices_share_cores=shared)
        run = simulate_pipeline(cfg)
        passes = _passes(run.trace)
        assert len(passes) == 2 * p * m and all(len(v) == 1 for v in passes.values())
        hop = cfg.transfer_s()
        for j in range(m):
            fwd = [passes[("forward", s, j)][0] for s in range(p)]
            bwd = [passes[("backward", s, j)][0] for s in range(p)]
            for s in range(p - 1):
                assert fwd[s + 1][0] >= fwd[s][1] + hop[s] * (1 - REL)
                assert bwd[s][0] >= bwd[s + 1][1] + hop[s] * (1 - REL)
            assert bwd[p - 1][0] >= fwd[p - 1][1]
        # One pass at a time per stage (and on the one processor when cores are shared).
        groups = [range(p)] if shared else [[s] for s in range(p)]
        for stages in groups:
            spans = sorted(v[0] for k, v in passes.items() if k[1] in stages)
            assert all(a[1] <= b[0] * (1 + REL) for a, b in zip(spans, spans[1:]))
        # Every stage's row is covered exactly by compute + idle up to the step end.
        for s in range(p):
            row = [e for e in run.trace.events() if e.kind != "comm" and e.device == run.trace.devices[s]]
            assert sum(e.duration_s for e in row) == pytest.approx(run.step_time_s, rel=REL)


def test_stage_orders_hold_each_pass_once():
    for schedule, p, m in itertools.product(SCHEDULES, range(1, 6), range(1, 9)):
        for s in range(p):
            order = stage_order(schedule, p, m, s)
            assert sorted(order) == [(d, j) for d in (0, 1) for j in range(m)]
            assert all(order.index((0, j)) < order.index((1, j)) for j in range(m))


def test_transfer_time_is_alpha_beta():
    model = dense_model([784, 300, 10])
    latency, bandwidth = 5e-4, 2e8
    cfg = PipelineConfig(model, (1, 1), 64, 1, flops_per_s=1e9, link_latency_s=latency, link_bandwidth_Bps=bandwidth)
    f, b = cfg.stage_times_s()
    hop = latency + 64 * 300 * 4 / bandwidth  # 300 float32 activations per example
    run = simulate_pipeline(cfg)
    assert run.step_time_s == pytest.approx(f.sum() + b.sum() + 2 * hop, rel=REL)
    assert run.trace.busy_s("comm") == pytest.approx(2 * hop, rel=REL)


def test_hardware_config_moves_messages_at_the_links_effective_rate():
    # TCP over 1 Gbit/s Ethernet: 1448 payload bytes per 1514 on the wire; a stack of 80 MB/s is slower still.
    model = dense_model([784, 300, 10])
    core = _preset(Device, "device", "this_machine_core")
    wire = Link("nic", bandwidth_Bps=1.25e8, latency_s=1e-4, payload_fraction=1448 / 1514)
    assert config_for_hardware(model, (1, 1), 64, 4, core, wire).link_bandwidth_Bps == pytest.approx(
        1.25e8 * 1448 / 1514, rel=1e-12)
    stacked = Link("nic", bandwidth_Bps=1.25e8, latency_s=1e-4, payload_fraction=1448 / 1514,
                   stack_bandwidth_Bps=8e7)
    cfg = config_for_hardware(model, (1, 1), 64, 4, core, stacked)
    assert cfg.link_bandwidth_Bps == pytest.approx(8e7, rel=1e-12)
    hop = 1e-4 + 16 * 300 * 4 / 8e7  # a micro-batch of 16 examples' 300 float32 activations
    assert cfg.transfer_s() == pytest.approx([hop], rel=REL)


def test_memory_per_stage():
    model = dense_model([784, 256, 128, 10])
    for schedule, expect in (("naive", [1, 1, 1]), ("gpipe", [8, 8, 8]), ("1f1b", [3, 2, 1])):
        cfg = PipelineConfig(model, (1, 1, 1), 64, 8, schedule=schedule, param_copies=2)
        run = simulate_pipeline(cfg)
        assert run.stashed_microbatches.tolist() == expect
        stash_values = np.array([784, 256, 128 + 10])  # layer inputs, and the logits on the last stage
        assert run.activation_bytes.tolist() == (np.array(expect) * stash_values * 8 * 4).tolist()
        params = np.array([784 * 256 + 256, 256 * 128 + 128, 128 * 10 + 10])
        assert run.param_bytes.tolist() == (params * 4 * 2).tolist()
        assert run.single_device_bytes == params.sum() * 8 + (784 + 256 + 128 + 10) * 64 * 4


def test_fits_compares_each_stage_with_device_memory():
    model = dense_model([1000, 4000, 4000, 10])
    cfg = PipelineConfig(model, (1, 2), 32, 4, device_memory_bytes=150e6)
    run = simulate_pipeline(cfg)
    assert run.fits.tolist() == (run.memory_bytes <= 150e6).tolist()
    assert run.single_device_fits is False and run.fits.tolist() == [True, True]
    assert simulate_pipeline(PipelineConfig(model, (1, 2), 32, 4)).fits is None


def test_shared_cores_give_no_speedup():
    # One processor for all stages: the step can't beat the total work.
    for schedule in SCHEDULES:
        cfg = PipelineConfig(equal_model(4), (2, 2), 64, 8, flops_per_s=1e9, schedule=schedule,
                             devices_share_cores=True)
        run = simulate_pipeline(cfg)
        assert run.step_time_s == pytest.approx(run.single_device_step_s, rel=REL)
        assert run.speedup == pytest.approx(1.0, rel=REL)


def test_balanced_split_is_optimal():
    rng = np.random.default_rng(3)
    for _ in range(30):
        n = int(rng.integers(1, 8))
        model = random_model(rng, n)
        p = int(rng.integers(1, n + 1))
        cost = np.array([layer.forward_flops + layer.backward_flops for layer in model.layers])

        def worst(split):
            edges = np.cumsum((0,) + tuple(split))
            return max(cost[a:b].sum() for a, b in zip(edges[:-1], edges[1:]))

        every = [c for c in itertools.product(range(1, n + 1), repeat=p) if sum(c) == n]
        got = balanced_split(model, p)
        assert sum(got) == n and min(got) >= 1 and all(type(c) is int for c in got)
        assert worst(got) == pytest.approx(min(worst(c) for c in every), rel=REL)


def test_even_split_and_dense_model():
    assert even_split(7, 3) == (3, 2, 2)
    model = dense_model([784, 128, 10])
    assert model.num_params == 784 * 128 + 128 + 128 * 10 + 10
    assert model.layers[0].forward_flops == 2 * 784 * 128


def test_result_round_trip():
    cfg = PipelineConfig(dense_model([784, 64, 64, 10]), (2, 1), 32, 4, link_latency_s=1e-5, link_bandwidth_Bps=1e9)
    run = simulate_pipeline(cfg)
    result = run.to_result()
    back = Result.from_dict(result.to_dict())
    assert back.strategy == "pipeline_gpipe" and back.num_replicas == 2
    assert back.summary.step_time_s == run.step_time_s
    assert 0 < back.summary.comm_fraction < 1
    assert len(back.trace) == len(run.trace)


ADDS_UP = "one layer count (>= 1) per stage, adding up to the model's 3 layers"


@pytest.mark.parametrize(
    "change, path, value, allowed",
    [
        ({"layers_per_stage": (1, 1)}, "layers_per_stage", "(1, 1)", ADDS_UP),
        ({"layers_per_stage": (0, 3)}, "layers_per_stage[0]", "0", "an integer >= 1"),
        ({"layers_per_stage": ()}, "layers_per_stage", "()", ADDS_UP),
        ({"layers_per_stage": 3}, "layers_per_stage", "3", ADDS_UP),
        ({"num_microbatches": 5}, "num_microbatches", "5", "a divisor of global_batch=64"),
        ({"num_microbatches": 0}, "num_microbatches", "0", "an integer >= 1"),
        ({"global_batch": 2.5}, "global_batch", "2.5", "an integer >= 1"),
        ({"global_batch": True}, "global_batch", "True", "an integer >= 1"),
        ({"flops_per_s": 0}, "flops_per_s", "0", "a finite number > 0 (FLOP/s)"),
        ({"flops_per_s": math.inf}, "flops_per_s", "inf", "a finite number > 0 (FLOP/s)"),
        ({"link_latency_s": -1.0}, "link_latency_s", "-1.0", "a finite number >= 0 (seconds)"),
        ({"link_bandwidth_Bps": 0.0}, "link_bandwidth_Bps", "0.0", "> 0 (bytes/s), or math.inf for free transfers"),
        ({"link_bandwidth_Bps": math.nan}, "link_bandwidth_Bps", "nan", "or math.inf for free transfers"),
        ({"link_bandwidth_Bps": -math.inf}, "link_bandwidth_Bps", "-inf", "or math.inf for free transfers"),
        ({"overhead_s": math.nan}, "overhead_s", "nan", "a finite number >= 0 (seconds)"),
        ({"schedule": "pipedream"}, "schedule", "'pipedream'", "one of ('naive', 'gpipe', '1f1b')"),
        ({"param_copies": 0}, "param_copies", "0", "an integer >= 1"),
        ({"devices_share_cores": 1}, "devices_share_cores", "1", "true or false"),
        ({"device_memory_bytes": -5}, "device_memory_bytes", "-5", "a finite number > 0 (bytes), or null (unknown)"),
        ({"model": "mlp"}, "model", "'mlp'", "a LayeredModel"),
    ],
)
def test_invalid_config_is_rejected(change, path, value, allowed):
    base = dict(model=dense_model([784, 32, 32, 10]), layers_per_stage=(2, 1), global_batch=64, num_microbatches=4)
    with raises_input(f"PipelineConfig.{path}", value, allowed):
        PipelineConfig(**{**base, **change})


def test_config_accepts_numpy_numbers_and_free_transfers():
    # NumPy integers are integers (a grid from np.arange must work); they are stored as Python ints.
    cfg = PipelineConfig(dense_model([8, 8, 8]), np.array([1, 1]), np.int64(64), np.int32(4),
                         link_bandwidth_Bps=np.float64(math.inf), devices_share_cores=np.bool_(True))
    assert cfg.layers_per_stage == (1, 1) and type(cfg.layers_per_stage[0]) is int
    assert type(cfg.global_batch) is int and type(cfg.num_microbatches) is int
    assert cfg.link_bandwidth_Bps == math.inf and cfg.devices_share_cores is True
    assert simulate_pipeline(cfg).step_time_s > 0


def test_micro_batches_are_bounded_by_the_pass_budget():
    model = dense_model([8, 8, 8, 8, 8])
    most = MAX_PASSES // (2 * 4)  # 2 passes (forward, backward) per stage and micro-batch
    with raises_input("PipelineConfig.num_microbatches", f"{2 * most}", f"at most {most:,} with 4 stages"):
        PipelineConfig(model, (1, 1, 1, 1), 2 * most, 2 * most)
    assert PipelineConfig(model, (1, 1, 1, 1), most, most).num_microbatches == most


def test_invalid_model_is_rejected():
    with raises_input("Layer.output_values", "0", "an integer >= 1"):
        Layer("x", 1, 1.0, 1.0, 0)
    with raises_input("Layer.forward_flops", "-1.0", "a finite number >= 0 (FLOP per example)"):
        Layer("x", 1, -1.0, 1.0, 1)
    with raises_input("Layer.num_params", "1.5", "an integer >= 0"):
        Layer("x", 1.5, 1.0, 1.0, 1)
    with raises_input("LayeredModel.layers", "()", "a non-empty sequence of Layer"):
        LayeredModel(784, ())
    with raises_input("LayeredModel.layers[1]", "'dense'", "a Layer"):
        LayeredModel(784, (Layer("x", 1, 1.0, 1.0, 1), "dense"))
    with raises_input("LayeredModel.input_values", "0", "an integer >= 1"):
        LayeredModel(0, (Layer("x", 1, 1.0, 1.0, 1),))
    with raises_input("sizes", "(784,)", "at least two sizes (the input and one layer)"):
        dense_model([784])
    with raises_input("sizes[1]", "-3", "an integer >= 1"):
        dense_model([784, -3])
    with raises_input("num_stages", "4", "an integer >= 1 and <= 3 (num_layers=3: every stage needs a layer)"):
        even_split(3, 4)
    with raises_input("num_layers", "0", "an integer >= 1"):
        even_split(0, 1)
    with raises_input("num_stages", "4", "<= 3 (num_layers=3: every stage needs a layer)"):
        balanced_split(dense_model([8, 8, 8, 8]), 4)
    with raises_input("model", "[8, 8]", "a LayeredModel"):
        balanced_split([8, 8], 1)
    with raises_input("config", "{'schedule': 'gpipe'}", "a PipelineConfig"):
        simulate_pipeline({"schedule": "gpipe"})
    with raises_input("schedule", "'pipedream'", "one of ('naive', 'gpipe', '1f1b')"):
        stage_order("pipedream", 2, 2, 0)


def test_balanced_split_is_bounded():
    layers = 5_000  # 5,000^2 x 80 stages = 2 x 10^9 cells of search: the bound; 81 is over it
    model = LayeredModel(4, (Layer("x", 1, 1.0, 1.0, 4),) * layers)
    assert MAX_SPLIT_WORK // layers**2 == 80
    with raises_input("num_stages", "81", "at most 80 stages for 5,000 layers (stages x layers^2 <= 2,000,000,000"):
        balanced_split(model, 81)
    with raises_input("num_stages", "100000", "an integer >= 1 and <= 5,000 (num_layers=5000: every stage"):
        balanced_split(model, 100_000)


def test_data_parallel_estimate_uses_the_same_costs():
    model = dense_model([784, 512, 512, 10])
    latency, bandwidth = 1e-5, 1e10
    cfg = PipelineConfig(model, (2, 1), 256, 8, flops_per_s=1e11, link_latency_s=latency,
                         link_bandwidth_Bps=bandwidth, device_memory_bytes=1e9)
    dp = data_parallel_estimate(cfg)
    run = simulate_pipeline(cfg)
    n = model.num_params * 4
    assert dp.compute_s == pytest.approx(run.single_device_step_s / 2, rel=REL)
    assert dp.allreduce_s == pytest.approx(2 * latency + 2 * (1 / 2) * n / bandwidth, rel=REL)  # ring, p = 2
    assert dp.memory_bytes == n * 2 + (784 + 512 + 512 + 10) * 128 * 4
    assert dp.fits is True
    shared = data_parallel_estimate(PipelineConfig(**{**vars(cfg), "devices_share_cores": True}))
    assert shared.compute_s == pytest.approx(run.single_device_step_s, rel=REL)
    with raises_input("PipelineConfig.global_batch", "255", "a multiple of the 2 devices"):
        data_parallel_estimate(PipelineConfig(**{**vars(cfg), "global_batch": 255, "num_microbatches": 1}))


# Data parallelism priced from the StepCosts of the equivalent scenario: every number below is derived by hand.
def _dp_case(**options):
    """4 stages of a 4-layer MLP on devices of 5e11 FLOP/s, over TCP: a 1.25e8 B/s wire carrying 1448 of every
    1514 bytes, behind a host stack of 8e7 B/s (the effective rate: 8e7)."""
    model = dense_model([784, 256, 256, 256, 10])
    device = Device("d", "gpu", peak_flops=1e12, efficiency=0.5, memory_bandwidth_Bps=1e11, memory_bytes=1.6e10,
                    step_overhead_s=0.0)
    link = Link("tcp", bandwidth_Bps=1.25e8, latency_s=1e-4, payload_fraction=1448 / 1514, stack_bandwidth_Bps=8e7)
    return config_for_hardware(model, (1, 1, 1, 1), 256, 8, device, link, overhead_s=1e-5, **options)


#: Forward (2ab) and backward (4ab) FLOP per example of the layers above, and their parameter bytes.
DP_FLOP = 6 * (784 * 256 + 256 * 256 * 2 + 256 * 10)
DP_BYTES = 4 * (784 * 256 + 256 + 2 * (256 * 256 + 256) + 256 * 10 + 10)


@pytest.mark.parametrize("algorithm, allreduce_s", [
    ("ring", 2 * 3 * 1e-4 + 2 * (3 / 4) * DP_BYTES / 8e7),  # 2(p-1) alpha + 2 (p-1)/p n / B, p = 4
    ("halving_doubling", 2 * 2 * 1e-4 + 2 * (3 / 4) * DP_BYTES / 8e7),  # 2 log2(p) alpha + 2 (p-1)/p n / B
])
def test_data_parallel_estimate_is_priced_from_the_step_costs(algorithm, allreduce_s):
    cfg = _dp_case()
    replica_s = 64 * DP_FLOP / 5e11 + 2 * 1e-5  # 256 / 4 examples, one overhead per pass (forward, backward)
    dp = data_parallel_estimate(cfg, algorithm)
    assert (dp.compute_s, dp.allreduce_s) == (pytest.approx(replica_s, rel=REL), pytest.approx(allreduce_s, rel=REL))
    # The costs it reads are the scenario's, at the link's effective rate (not the 1.25e8 B/s wire).
    scenario = data_parallel_scenario(cfg, algorithm)
    costs = step_costs(scenario)
    assert float(costs.intra_Bps) == pytest.approx(8e7, rel=REL)
    assert float(steady.seconds_per_example(costs)) * 64 == pytest.approx(64 * DP_FLOP / 5e11, rel=REL)
    assert float(costs.gradient_bytes) == DP_BYTES
    assert (scenario.num_replicas, scenario.training.global_batch) == (4, 256)


def test_data_parallel_estimate_on_shared_cores_free_links_and_one_device():
    # Logical devices sharing one processor of 2 x 5e11 FLOP/s: the 4 replicas compute one after another.
    shared = data_parallel_estimate(_dp_case(physical_cores=2))
    assert shared.compute_s == pytest.approx(4 * (64 * DP_FLOP / 1e12 + 2 * 1e-5), rel=REL)
    # A free link (math.inf) leaves the ring's 2(p-1) latencies.
    free = data_parallel_estimate(replace(_dp_case(), link_bandwidth_Bps=math.inf))
    assert free.allreduce_s == pytest.approx(6 * 1e-4, rel=REL)
    # One device sums nothing, whatever the algorithm: data parallelism is the single device's step.
    one = replace(_dp_case(), model=dense_model([784, 256]), layers_per_stage=(1,))
    for algorithm in ("ring", "parameter_server"):
        dp = data_parallel_estimate(one, algorithm)
        assert dp.allreduce_s == 0.0
        assert dp.step_time_s == pytest.approx(256 * 6 * 784 * 256 / 5e11 + 2 * 1e-5, rel=REL)
    with raises_input("algorithm", "'allgather'", "one of ('ring', 'tree'"):
        data_parallel_estimate(_dp_case(), "allgather")
    with raises_input("config", "None", "a PipelineConfig"):
        data_parallel_scenario(None)
    # A number a Scenario bounds tighter than the pipeline is named by the config's field.
    with raises_input("PipelineConfig.flops_per_s", "1e+21", "<= 1e+20 (FLOP/s) (data_parallel_estimate prices it"):
        data_parallel_estimate(replace(_dp_case(), flops_per_s=1e21))


def _preset(cls, kind, name):
    values, sources = load_preset(kind, name)
    return cls(name=name, sources=sources, **values)


def test_config_for_hardware_reads_presets():
    core = _preset(Device, "device", "this_machine_core")
    memory = _preset(Link, "link", "shared_memory")
    model = dense_model([784, 64, 10])
    cfg = config_for_hardware(model, (1, 1), 64, 4, core, memory, physical_cores=2)
    assert cfg.devices_share_cores and cfg.flops_per_s == core.effective_flops * 2
    assert (cfg.link_latency_s, cfg.link_bandwidth_Bps) == (memory.latency_s, memory.bandwidth_Bps)
    v100 = _preset(Device, "device", "v100")
    cfg = config_for_hardware(model, (1, 1), 64, 4, v100, _preset(Link, "link", "nvlink2"), schedule="1f1b")
    assert not cfg.devices_share_cores and cfg.flops_per_s == v100.effective_flops
    assert cfg.device_memory_bytes == v100.memory_bytes and cfg.schedule == "1f1b"
    with raises_input("physical_cores", "0", "an integer >= 1, or null (every stage is its own hardware)"):
        config_for_hardware(model, (1, 1), 64, 4, core, memory, physical_cores=0)
    with raises_input("device", "'v100'", "a distsim.scenario.Device"):
        config_for_hardware(model, (1, 1), 64, 4, "v100", memory)
    with raises_input("link", "None", "a distsim.scenario.Link"):
        config_for_hardware(model, (1, 1), 64, 4, core, None)
