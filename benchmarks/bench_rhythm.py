"""How often the event engine's turns exceed the lockstep of its own draws (``distsim.rhythm_range_s``).

Run: ``.venv/bin/python benchmarks/bench_rhythm.py [--seed 3] [--runs 20000]`` (about 20 s
here). Each run is the event engine (:func:`distsim.engines.asyncps.simulate_async`) with
random workers (2-8), updates per worker (1-9), a PS on one server or full duplex, transfer, host and
apply times, mean compute and its distribution; the worker's own link adds nothing (push = s + a,
pull = s, 70 % of runs) or a random latency. It prints, for each kind of server and distribution, the
runs and those whose turns exceed ``max_w mean_k own_wk + links + W (2 s + a)`` over each worker's first
``steps`` draws, the lockstep ``rhythm_range_s`` prices, and the largest ratio of the two; and the
largest ratio of turns to the bound derived from the stations, which adds ``(W - 1)(2 s + a) / steps``
(``tests/physical_invariants.py::fifo_bound_s``).

2026-11-27, seed 3, 20,000 runs: 12 exceeded it, all on one server under noise (the worst by 22 %, 7
workers, one exponential update each); none with deterministic compute or a full-duplex PS. None
exceeded the stations' bound; the closest came to 0.9974 of it (full duplex, deterministic), so its
last term is not slack to drop.
"""

from __future__ import annotations

import argparse
import collections

import numpy as np

from distsim.engines import asyncps


def one_run(rng: np.random.Generator) -> tuple[str, str, float, float]:
    """(server, distribution, turns / lockstep, turns / bound) of one random run."""
    workers, steps, duplex = int(rng.integers(2, 9)), int(rng.integers(1, 10)), bool(rng.integers(2))
    service = float(10 ** rng.uniform(-2, 0))
    apply = float(10 ** rng.uniform(-3, 0.3)) if rng.random() < 0.8 else 0.0
    request = float(service * rng.uniform(0, 1)) if duplex else 0.0
    mean = float(10 ** rng.uniform(-2, 1))
    distribution = ("exponential", "lognormal", "deterministic")[int(rng.integers(3))]
    sigma = float(rng.uniform(0.1, 2.0))
    latency = (0.0, 0.0) if rng.random() < 0.7 else tuple(10 ** rng.uniform(-4, -1, 2))
    push_s, pull_s = service + apply + latency[0], service + latency[1]
    seed = int(rng.integers(1 << 31))
    log = asyncps.simulate_async(workers, workers * steps, mean, distribution, sigma=sigma, push_s=push_s,
                                 pull_s=pull_s, ps_service_s=service, seed=seed, duplex=duplex,
                                 ps_request_s=request, ps_apply_s=apply, engine="events")
    own = asyncps.own_time_means_s(np.full(workers, steps), mean, distribution, sigma=sigma, seed=seed)
    lockstep = own.max() + push_s + pull_s - 2 * service - apply + workers * (2 * service + apply)
    turns, queued = workers / log.updates_per_s, (workers - 1) * (2 * service + apply) / steps
    return "full duplex" if duplex else "one server", distribution, turns / lockstep, turns / (lockstep + queued)


def main(seed: int = 3, runs: int = 20_000) -> None:
    rng = np.random.default_rng(seed)
    counts, over, worst = collections.Counter(), collections.Counter(), collections.defaultdict(float)
    bound = collections.defaultdict(float)
    for _ in range(runs):
        server, distribution, ratio, to_bound = one_run(rng)
        counts[server, distribution] += 1
        over[server, distribution] += ratio > 1 + 1e-9  # asyncrun._RHYTHM_RTOL
        worst[server, distribution] = max(worst[server, distribution], ratio)
        bound[server, distribution] = max(bound[server, distribution], to_bound)
    for key in sorted(counts):
        print(f"{key[0]:<12} {key[1]:<13} runs {counts[key]:6d}  turns > lockstep {over[key]:4d}  "
              f"largest turns / lockstep {worst[key]:.4f}  largest turns / bound {bound[key]:.4f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=3, help="seeds the random runs")
    parser.add_argument("--runs", type=int, default=20_000, help="random engine runs (>= 1)")
    args = parser.parse_args()
    if args.runs < 1:
        parser.error(f"--runs={args.runs}; allowed: an integer >= 1")
    main(args.seed, args.runs)
