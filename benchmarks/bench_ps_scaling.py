"""Does a localhost parameter-server cluster scale with workers? Real runs, measured updates/s.

``distsim.real`` runs ParameterServerStrategy on an in-process cluster by
default (every server inside the coordinator's process) and can run one
process per task instead (``--cluster processes``). This script trains the
MNIST MLP with 1, 2 and 3 workers, in rounds, and prints the updates per
second the PS applied. The simulator's ``strategy.ps_cluster="in_process"``
model on shared CPU cores serves every worker's compute, transfers and
applies in turn, so more workers add nothing; ``bench_ps_overlap.py``
measures how far that holds at each batch size (small updates overlap).

Run from the repository root::

    .venv/bin/python benchmarks/bench_ps_scaling.py --rounds 2
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from distsim.real.experiment import run
from distsim.real.plan import RunPlan
from distsim.scenario import PS_CLUSTERS


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--batch", type=int, default=64, help="examples per update")
    parser.add_argument("--updates", type=int, default=150, help="updates per worker")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--cluster", choices=PS_CLUSTERS, default="in_process")
    args = parser.parse_args()
    rates: dict[int, list[float]] = {w: [] for w in args.workers}
    start = time.perf_counter()
    for r in range(args.rounds):
        for w in args.workers:
            plan = RunPlan("parameter_server", num_workers=w, num_ps=1, per_replica_batch=args.batch,
                           steps_per_epoch=args.updates * w, ps_cluster=args.cluster)
            result = run(plan, progress=False)
            rates[w].append(result.summary.throughput_samples_per_s / args.batch)
            print(f"round {r + 1}/{args.rounds}: {w} worker(s): {rates[w][-1]:.1f} updates/s "
                  f"({time.perf_counter() - start:.0f} s)", flush=True)
    print(f"\n{args.cluster} cluster, {args.batch} examples per update, {args.updates} updates per worker")
    one = np.median(rates[args.workers[0]])
    for w in args.workers:
        med = float(np.median(rates[w]))
        print(f"{w} worker(s): median {med:6.1f} updates/s (runs {', '.join(f'{x:.1f}' for x in rates[w])}), "
              f"{med / one:.2f}x the {args.workers[0]}-worker rate")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
