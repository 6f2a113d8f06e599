"""Latency of the what-if dashboard: control change -> redrawn figures.

Run: ``.venv/bin/python benchmarks/bench_dashboard.py [--repeats 3]``.

Drives :class:`distsim.views.widgets.WhatIfLab` headlessly: sets one control at a
time from Python (exactly what a browser event does in the kernel, minus the
websocket) and times the assignment, which runs the observer synchronously:
rebuild the scenario, ``distsim.predict`` (event timeline or async
simulation), the scaling curve (``distsim.sweep``, cached on everything but
the replica count), metrics table, both PNG renders. The changes walk through
default-sized scenarios: up to 8 workers x 8 devices = 64 replicas, up to 91
steps, sync and async strategies, links, models, stragglers, server topology,
NCCL, gradient grouping and the fusion buffer, parameter-server placement and
local sums, compare mode.

Prints wall-clock p50 / p95 / max per kind of change and overall, against
the target p95 <= 100 ms, the same overall in CPU time of this process, the
share of predict and sweep, and the load average: on a shared machine other
processes inflate wall-clock numbers, CPU time shows what the update costs.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from distsim.engines import predict, sweep
from distsim.views.widgets import WhatIfLab, default_scenario
from distsim.views.widgets.what_if_lab import DEFAULT, LOADED

TARGET_P95_S = 0.100

#: (label, control, value) applied in order; the walk returns to the start.
CHANGES: list[tuple[str, str, object]] = (
    [("devices per worker", "devices_per_worker", v) for v in (5, 6, 7, 8, 2, 3, 4)]
    + [("steps", "steps", v) for v in (25, 50)]
    + [("strategy", "strategy", "multi_worker_mirrored")]
    + [("workers", "num_workers", v) for v in (2, 4, 8)]
    + [("devices per worker", "devices_per_worker", 8)]  # 64 replicas, 50 steps
    + [("link", "inter_link", v) for v in ("ethernet_25g", "infiniband_hdr", "ethernet_10g")]
    + [("link", "intra_link", v) for v in ("nvlink2", "pcie3_x16")]
    + [("model", "workload", v) for v in ("resnet50_224", "mnist_mlp", LOADED)]
    + [("batch", "global_batch", v) for v in (512, 1024, 256)]
    + [("stragglers", "compute_distribution", "lognormal")]
    + [("stragglers", "compute_sigma", v) for v in (0.2, 0.4, 0.6)]
    + [("algorithm", "algorithm", v) for v in ("tree", "halving_doubling", "hierarchical", "default")]
    + [("prefetch", "prefetch", v) for v in ("off", "on", "default")]
    + [("strategy", "strategy", "parameter_server")]  # async, 64 workers x 50 updates
    + [("PS shards", "num_ps", v) for v in (2, 4, 8, 1)]
    + [("PS training", "ps_mode", "sync"), ("PS placement", "ps_placement", "worker_hosts"),
       ("PS local sum", "ps_local_sum", True), ("PS placement", "ps_placement", "own_hosts"),
       ("PS local sum", "ps_local_sum", False), ("PS training", "ps_mode", "async")]
    + [("workers", "num_workers", v) for v in (4, 1)]
    + [("strategy", "strategy", "multi_worker_mirrored")]
    + [("topology", "topology", "dgx1_v100"),
       ("collectives", "protocol", "nccl"), ("grouping", "grouping", "fusion"),
       ("fusion buffer", "fusion_mib", 8.0), ("fusion buffer", "fusion_mib", 64.0),
       ("grouping", "grouping", "per_tensor"), ("grouping", "grouping", "buckets"),
       ("algorithm", "algorithm", "hierarchical"), ("between nodes", "inter_algorithm", "nccl_tree"),
       ("between nodes", "inter_algorithm", "ring"), ("algorithm", "algorithm", "default"),
       ("collectives", "protocol", "alpha_beta"), ("collectives", "protocol", DEFAULT),
       ("topology", "topology", "none")]
    + [("devices per worker", "devices_per_worker", 4), ("strategy", "strategy", "mirrored"),
       ("stragglers", "compute_sigma", 0.1), ("stragglers", "compute_distribution", "deterministic"),
       ("steps", "steps", default_scenario().training.steps)]
)


def percentiles(values_s) -> str:
    ms = np.asarray(values_s) * 1e3
    return f"n={len(ms):3d}  p50 {np.percentile(ms, 50):6.1f} ms  p95 {np.percentile(ms, 95):6.1f} ms  " \
           f"max {ms.max():6.1f} ms"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="walks through the list of changes")
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    start = time.perf_counter()
    lab = WhatIfLab()
    print(f"dashboard built and first drawn in {(time.perf_counter() - start) * 1e3:.0f} ms")
    assert lab.scenario == default_scenario()

    by_kind: dict[str, list[tuple[float, float]]] = {}  # (wall, CPU) seconds
    scenarios = []
    for repeat in range(args.repeats):
        if repeat == args.repeats - 1:
            lab.pin_button.value = True  # last walk in compare mode: two timelines, two curves
        for label, name, value in CHANGES:
            t0, c0 = time.perf_counter(), time.process_time()
            lab.controls[name].value = value
            timing = (time.perf_counter() - t0, time.process_time() - c0)
            if lab.error.value:
                raise SystemExit(f"change {name}={value!r} was rejected: {lab.error.value}")
            by_kind.setdefault("(compare mode, any)" if lab.pinned else label, []).append(timing)
            scenarios.append(lab.scenario)
    lab.pin_button.value = False
    assert lab.scenario == default_scenario(), "the walk should end where it started"
    by_kind["ALL"] = [t for ts in by_kind.values() for t in ts]

    print(f"\ncontrol change -> redrawn figures ({args.repeats} walks of {len(CHANGES)} changes); "
          "wall clock | CPU time of this process (what an otherwise idle machine would take):")
    for label, timings in by_kind.items():
        wall, cpu = zip(*timings)
        print(f"  {label:<20} {percentiles(wall)} | CPU p50 {np.percentile(cpu, 50) * 1e3:5.1f} ms  "
              f"p95 {np.percentile(cpu, 95) * 1e3:5.1f} ms")
    everything = [w for w, _ in by_kind["ALL"]]
    p95 = np.percentile(everything, 95)
    cpu_p95 = np.percentile([c for _, c in by_kind["ALL"]], 95)
    print(f"target p95 <= {TARGET_P95_S * 1e3:.0f} ms: wall clock {'met' if p95 <= TARGET_P95_S else 'NOT met'} "
          f"(p95 {p95 * 1e3:.1f} ms), CPU time {'met' if cpu_p95 <= TARGET_P95_S else 'NOT met'} "
          f"(p95 {cpu_p95 * 1e3:.1f} ms)")
    largest = max(scenarios, key=lambda s: s.num_replicas * s.training.steps)
    print(f"largest scenario: {largest.num_replicas} replicas x {largest.training.steps} steps "
          f"({largest.strategy.name})")

    predict_s, sweep_s = [], []
    for s in scenarios[: len(CHANGES)]:
        t0 = time.perf_counter()
        predict(s)
        predict_s.append(time.perf_counter() - t0)
        field = "cluster.num_workers" if s.strategy.name in ("multi_worker_mirrored", "parameter_server") \
            else "cluster.devices_per_worker"
        t0 = time.perf_counter()
        sweep(s, {field: [1, 2, 4, 8]})
        sweep_s.append(time.perf_counter() - t0)
    print("\nwhere the time goes (same scenarios, outside the dashboard):")
    print(f"  distsim.predict      {percentiles(predict_s)}")
    print(f"  distsim.sweep (4 pt) {percentiles(sweep_s)}  (the dashboard caches it per setup)")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
