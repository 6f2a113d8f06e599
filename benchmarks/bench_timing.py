"""Timing-engine speed and memory: predict at cluster scale, sweeps, async simulation.

Run: ``.venv/bin/python benchmarks/bench_timing.py [--limits]`` (hold the
machine lock: ``flock /work/cpu.lock ...``). Prints best-of-N wall times (and
CPU times of this process for predict and the sweeps) and peak memory (``tracemalloc``: every NumPy and Python allocation of the call).

Targets (issue 15):

* ``predict`` of a 10,000-GPU synchronous scenario: <= 50 ms and <= 200 MB peak;
* ``sweep``: >= 1,000,000 scenarios/s over grids that include 100,000 devices;
* the asynchronous PS engine: >= 1,000,000 worker-updates/s.

``--limits`` also measures the largest scenario each bound of
:mod:`distsim.scenario.limits` allows (a timeline of ``MAX_TIMELINE_CELLS``,
``MAX_REPLICAS`` replicas, a sweep of ``MAX_SWEEP_ROWS`` rows,
``MAX_ASYNC_UPDATES`` updates): each must finish in seconds and fit in a few
GB, which is what the bounds promise.
"""

from __future__ import annotations

import argparse
import time
import tracemalloc

import numpy as np

from distsim.engines import predict, sweep
from distsim.engines.asyncps import simulate_async
from distsim.mechanics.collectives import cost_model
from distsim.scenario import limits, make_scenario


def best_s(fn, repeats: int = 5) -> float:
    return best_wall_cpu_s(fn, repeats)[0]


def best_wall_cpu_s(fn, repeats: int = 5) -> tuple[float, float]:
    """Best wall-clock and best CPU time (``time.process_time``: this
    process only, robust to other load on a shared machine) of ``repeats`` calls."""
    wall = cpu = float("inf")
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall, cpu = min(wall, time.perf_counter() - t0), min(cpu, time.process_time() - c0)
    return wall, cpu


def peak_bytes(fn) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def cluster(workers: int, local: int, steps: int, distribution: str = "lognormal", files: int | None = None):
    """ResNet-50 on V100s, NVLink inside a node, InfiniBand between nodes,
    64 images per GPU (capped at the ImageNet size), stragglers, ImageNet in
    at least 1,024 files (FILE sharding needs one per worker)."""
    return make_scenario("v100", "resnet50_224", "multi_worker_mirrored", workers, local,
                         intra_link="nvlink2", inter_link="infiniband_hdr",
                         global_batch=min(64 * workers * local, 1_281_167), steps=steps,
                         compute_distribution=distribution, compute_sigma=0.1, shard_policy="FILE",
                         num_files=files or max(workers, 1024))


def bench_predict() -> None:
    scn = cluster(1250, 8, 20)
    predict(scn)
    t, cpu = best_wall_cpu_s(lambda: predict(scn))
    peak = peak_bytes(lambda: predict(scn))
    print(f"predict, 10,000 V100s (1,250 x 8), 20 steps, lognormal stragglers: {t * 1e3:.1f} ms (CPU {cpu * 1e3:.1f} ms), "
          f"peak {peak / 1e6:.1f} MB (targets <= 50 ms, <= 200 MB)")
    print("predict vs replicas (20 steps):")
    for workers, local in ((8, 8), (125, 8), (1250, 8), (12500, 8)):
        scn = cluster(workers, local, 20)
        predict(scn)
        t = best_s(lambda: predict(scn), repeats=3)
        peak = peak_bytes(lambda: predict(scn))
        result = predict(scn)
        print(f"  {workers * local:>9,} replicas: {t * 1e3:8.1f} ms, peak {peak / 1e6:7.1f} MB, "
              f"step {result.summary.step_time_s * 1e3:.1f} ms, {len(result.trace):,} trace events")
    scn = cluster(8, 8, 100, "deterministic")
    predict(scn)
    print(f"predict, 64 replicas x 100 steps: {best_s(lambda: predict(scn)) * 1e3:.1f} ms")


def bench_sweep() -> None:
    base = cluster(2, 8, 20, "deterministic", files=12500)
    grid = {"cluster.num_workers": [1, 16, 128, 1250, 12500],  # up to 100,000 GPUs
            "training.global_batch": list(range(128_000, 128_000 + 2000 * 64, 64)),
            "cluster.inter_link.bandwidth_Bps": list(np.linspace(1e9, 5e10, 100))}
    n = 5 * 2000 * 100
    sweep(base, grid)
    t, cpu = best_wall_cpu_s(lambda: sweep(base, grid), repeats=3)
    print(f"sweep, {n:,} scenarios over 8 to 100,000 GPUs x batch x bandwidth: {t * 1e3:.0f} ms = "
          f"{n / t:,.0f} scenarios/s (target >= 1,000,000/s); CPU {cpu * 1e3:.0f} ms = {n / cpu:,.0f}/s")
    layouts = {"cluster.devices_per_worker": [1, 2, 4, 8], "training.global_batch": list(range(8, 8 * 2501, 8))}
    base = make_scenario("gtx_1080_ti", "mobilenet_v2_224", "mirrored", devices_per_worker=4, global_batch=256,
                         shuffle_buffer=1024)
    sweep(base, layouts)
    t, cpu = best_wall_cpu_s(lambda: sweep(base, layouts), repeats=3)
    print(f"sweep, {4 * 2500:,} scenarios over 4 replica layouts: {t * 1e3:.1f} ms = {4 * 2500 / t:,.0f}/s; "
          f"CPU {cpu * 1e3:.1f} ms")


def bench_async() -> None:
    simulate_async(64, 20_000 * 64, 1.0, seed=0)
    t = best_s(lambda: simulate_async(64, 20_000 * 64, 1.0, seed=0), repeats=3)
    print(f"async PS, 64 workers x 20,000 updates: {t:.3f} s = {64 * 20_000 / t:,.0f} worker-updates/s "
          "(target >= 1,000,000/s)")


def bench_cost_model() -> None:
    for algorithm, options in (("ring", {"ranks_per_node": 8}), ("tree", {"ranks_per_node": 8}),
                               ("halving_doubling", {"ranks_per_node": 8}), ("hierarchical", {"ranks_per_node": 8})):
        t = best_s(lambda: float(cost_model(algorithm, 1_000_000, **options).time_s(1e8, 1e-6, 1e11, 2e-6, 2.5e10)))
        print(f"cost model, {algorithm} over 1,000,000 ranks (8 per node): {t * 1e6:.0f} us")


def bench_limits() -> None:
    """The largest scenario each bound allows."""
    workers = limits.MAX_WORKERS
    local = limits.MAX_REPLICAS // workers
    steps = limits.MAX_TIMELINE_CELLS // (limits.MAX_REPLICAS + 1)
    scn = cluster(workers, local, steps)
    t0 = time.perf_counter()
    peak = peak_bytes(lambda: predict(scn))
    print(f"limits: MAX_REPLICAS={limits.MAX_REPLICAS:,} x {steps} steps (MAX_TIMELINE_CELLS="
          f"{limits.MAX_TIMELINE_CELLS:,}): {time.perf_counter() - t0:.2f} s, peak {peak / 1e6:.0f} MB")
    steps = limits.MAX_STEPS
    scn = cluster(1, 1, steps, files=1)
    t0 = time.perf_counter()
    peak = peak_bytes(lambda: predict(scn))
    print(f"limits: MAX_STEPS={steps:,} steps of one replica: {time.perf_counter() - t0:.2f} s, peak {peak / 1e6:.0f} MB")
    steps = limits.MAX_TRACE_EVENTS // (limits.MAX_TRACE_REPLICAS * 10)  # 10 events a traced replica a step
    scn = cluster(125, 8, steps)
    t0 = time.perf_counter()
    peak = peak_bytes(lambda: predict(scn))
    print(f"limits: 1,000 replicas x {steps:,} steps (MAX_TRACE_EVENTS={limits.MAX_TRACE_EVENTS:,}): "
          f"{time.perf_counter() - t0:.2f} s, peak {peak / 1e6:.0f} MB")
    base = cluster(2, 8, 20, "deterministic")
    rows = limits.MAX_SWEEP_ROWS
    grid = {"training.global_batch": list(range(64, 64 * 10_001, 64)),
            "cluster.inter_link.bandwidth_Bps": list(np.linspace(1e9, 5e10, rows // 10_000))}
    t0 = time.perf_counter()
    peak = peak_bytes(lambda: sweep(base, grid))
    print(f"limits: MAX_SWEEP_ROWS={rows:,} sweep: {time.perf_counter() - t0:.2f} s, peak {peak / 1e6:.0f} MB")
    updates = limits.MAX_ASYNC_UPDATES
    scn = make_scenario("k80", "resnet50_224", "parameter_server", 100, 1, global_batch=6400,
                        steps=updates // 100, shard_policy="FILE", num_files=100)
    t0 = time.perf_counter()
    peak = peak_bytes(lambda: predict(scn))
    print(f"limits: MAX_ASYNC_UPDATES={updates:,} (predict, 100 async workers): {time.perf_counter() - t0:.2f} s, "
          f"peak {peak / 1e6:.0f} MB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limits", action="store_true", help="also time the largest scenario each bound allows")
    args = parser.parse_args()
    bench_predict()
    bench_sweep()
    bench_async()
    bench_cost_model()
    if args.limits:
        bench_limits()


if __name__ == "__main__":
    main()
