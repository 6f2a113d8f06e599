"""Does the host's dispatch of a replica overlap another replica's compute on shared CPU cores?

Run from the repository root (about 40 s per round on the 2-core VM)::

    flock /tmp/cpu.lock .venv/bin/python benchmarks/bench_dispatch_overlap.py [--rounds 8]

Real Keras training steps of the calibration's workload under MirroredStrategy
on 1, 2 and 4 logical CPU devices of this process
(:func:`distsim.real.microbench.replica_step_times`), at several *global*
batches, so the compute of a step is the same for every device count and only
the replicas' count changes. ``extra(n, B) = step(n, B) - step(1, B)`` is what
the n - 1 added replicas cost. Two stated models predict it differently:

* **flow shop** (one replica's compute hides the next one's dispatch,
  ``L max(d, q) + min(d, q)``): ``extra`` shrinks as the batch grows and is
  only the all-reduce once a replica's compute ``q = compute(B) / n`` exceeds
  the dispatch ``d``;
* **taking turns** (dispatch needs the cores the compute holds:
  ``L (d + q)``): ``extra = (n - 1) d`` plus the all-reduce, whatever the
  batch.

:func:`summarize` gives the medians, ``d`` from the smallest batch and the
flow shop's prediction at the largest one. Writes
``data/measurements/dispatch_overlap_<date>.json`` (``--out``) with every
round's step times and provenance.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
BATCHES = (16, 64, 192, 512, 1024)
COUNTS = (1, 2, 4)
STEPS = 40


def summarize(rounds: list[dict]) -> dict:
    """Median step seconds per (batch, count) over ``rounds``; the extra seconds
    of n replicas over one; the dispatch ``d`` the smallest batch gives,
    ``extra(n, B_min) / (n - 1)``; and the compute of one replica at the
    largest batch, ``(step(1, B_max) - step(1, B_min)) / n``, against it."""
    counts = rounds[0]["counts"]
    median = np.median([r["step_s"] for r in rounds], axis=0)  # [batch][count]
    extra = {str(n): (median[:, i] - median[:, 0]).tolist() for i, n in enumerate(counts) if n > 1}
    dispatch = {k: v[0] / (int(k) - 1) for k, v in extra.items()}
    compute_max = float(median[-1, 0] - median[0, 0])
    return {"median_step_s": median.tolist(), "extra_s": extra, "dispatch_s_at_smallest_batch": dispatch,
            "replica_compute_s_at_largest_batch": {k: compute_max / int(k) for k in extra}}


def one_round(plan, batches, counts) -> list[list[float]]:
    from distsim.real import microbench

    return [[microbench.replica_step_times(plan, [n], b // n, STEPS)[0] for n in counts] for b in batches]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="mnist_mlp")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.rounds < 1:
        raise SystemExit(f"error: --rounds={args.rounds}; allowed: an integer >= 1")
    from distsim.real.building import configure_for_plan
    from distsim.real.calibrate import calibration_plan
    from distsim.real.env import cpu_model, describe_tensorflow

    plan = calibration_plan(args.workload)
    configure_for_plan(plan.with_(strategy="mirrored", replicas_per_worker=max(COUNTS), device="cpu"))
    rounds = []
    for i in range(args.rounds):
        steps = one_round(plan, BATCHES, COUNTS)
        rounds.append({"round": i, "batches": list(BATCHES), "counts": list(COUNTS), "step_s": steps})
        print(f"round {i + 1}/{args.rounds}: " + "  ".join(
            f"B={b}: " + "/".join(f"{t * 1e3:.2f}" for t in row) + " ms" for b, row in zip(BATCHES, steps)), flush=True)
    s = summarize(rounds)
    print("\nglobal batch  " + "  ".join(f"extra({n}) ms" for n in s["extra_s"]))
    for i, b in enumerate(BATCHES):
        print(f"{b:>12}  " + "  ".join(f"{v[i] * 1e3:11.2f}" for v in s["extra_s"].values()))
    for n, d in s["dispatch_s_at_smallest_batch"].items():
        q = s["replica_compute_s_at_largest_batch"][n]
        print(f"{n} replicas: d = {d * 1e3:.2f} ms per added replica at B={BATCHES[0]}; at B={BATCHES[-1]} each "
              f"replica computes {q * 1e3:.2f} ms, so a flow shop would hide {'every' if q >= d else 'part of each'} "
              f"dispatch; taking turns keeps extra = {(int(n) - 1) * d * 1e3:.2f} ms")
    out = args.out or REPO / "data" / "measurements" / f"dispatch_overlap_{dt.date.today()}.json"
    out.write_text(json.dumps({
        "what": __doc__.splitlines()[0], "workload": args.workload, "steps_per_point": STEPS, "rounds": rounds, **s,
        "provenance": {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                       "cpu_model": cpu_model(), "cores": len(os.sched_getaffinity(0)),
                       "tensorflow": describe_tensorflow().tf_version, "python": platform.python_version(),
                       "load_average_end": os.getloadavg()[0]}}, indent=1) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
