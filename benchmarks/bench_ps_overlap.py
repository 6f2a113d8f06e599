"""Does a second worker of an in-process parameter-server cluster overlap the first one's updates?

Run from the repository root (about 30 s per launch on the 2-core VM)::

    flock /tmp/cpu.lock .venv/bin/python benchmarks/bench_ps_overlap.py [--rounds 5] [--batches 16 512] [--workers 1 2]

Real ``ParameterServerStrategy`` training on the in-process cluster
(``ps_cluster="in_process"``: the chief, one PS and the workers are threads of
one process on this machine's cores), with 1 and with 2 workers, at a small
and a large per-worker batch (``--batches``, ``--workers``). Each run's step is
the seconds per update times the workers (:mod:`distsim.real.ps`), so

    ``serial = step(W workers) / (W step(1 worker))``

is 1 when the other workers add no throughput at all (every update's
compute and transfers take the cores in turn) and 1/W when they overlap
perfectly. FIFO lanes that let one worker compute while the PS serves
another give less than 1, the more so the larger the compute; the engine
since the in-process rule (``distsim/engines/costs.py``, ``async_costs``)
gives exactly 1. Each run also records the cores its process kept busy in
the steady state (``steady_cores_busy``, :class:`distsim.real.ps.CpuSampler`). The question comes from bench_real (``data/measurements/README.md``,
"bench_real run7"): its 2-worker PS step was the sum of both workers' compute
and transfers in run6 and run7. These batches (16 and 512 per worker) are not
bench_real's (96 per worker), so this is separate evidence.

Writes ``data/measurements/ps_overlap_<date>.json`` (``--out``) with every
run's step and provenance.
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
BATCHES = (16, 512)
WORKERS = (1, 2)
UPDATES = 60


def summarize(rounds: list[dict]) -> dict:
    """Median step seconds per (batch, workers) over ``rounds``, and ``serial``
    per batch and worker count ``W > 1``: the ``W``-worker median over ``W``
    times the 1-worker median."""
    median = {b: {w: float(np.median([r["step_s"][b][w] for r in rounds])) for w in per_batch}
              for b, per_batch in rounds[0]["step_s"].items()}
    serial = {b: {w: m[w] / (int(w) * m["1"]) for w in m if w != "1"} for b, m in median.items()}
    return {"median_step_s": median, "serial": serial}


def one_run(workload: str, batch: int, workers: int) -> tuple[float, float]:
    """A run's step (seconds) and the cores its process kept busy in the steady state."""
    from distsim.real.calibrate import calibration_plan
    from distsim.real.experiment import run

    plan = calibration_plan(workload).with_(strategy="parameter_server", num_workers=workers, num_ps=1,
                                            per_replica_batch=batch, steps_per_epoch=UPDATES,
                                            ps_cluster="in_process")
    result = run(plan, progress=False, timeout_s=600)
    return result.summary.step_time_s, float(result.meta["steady_cores_busy"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="mnist_mlp")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batches", type=int, nargs="+", default=list(BATCHES), help="examples per worker")
    parser.add_argument("--workers", type=int, nargs="+", default=list(WORKERS), help="worker counts, 1 among them")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.rounds < 1:
        raise SystemExit(f"error: --rounds={args.rounds}; allowed: an integer >= 1")
    if 1 not in args.workers or min(args.workers) < 1 or min(args.batches) < 1:
        raise SystemExit(f"error: --workers={args.workers} --batches={args.batches}; allowed: integers >= 1, "
                         "the workers including 1 (every ratio divides by the 1-worker step)")
    from distsim.real.env import cpu_model

    rounds = []
    for i in range(args.rounds):
        runs = {str(b): {str(w): one_run(args.workload, b, w) for w in args.workers} for b in args.batches}
        rounds.append({"round": i, "step_s": {b: {w: r[0] for w, r in per.items()} for b, per in runs.items()},
                       "cores_busy": {b: {w: r[1] for w, r in per.items()} for b, per in runs.items()}})
        print(f"round {i + 1}/{args.rounds}: " + "  ".join(
            f"batch {b}: " + ", ".join(f"{w} worker(s) {r[0] * 1e3:.2f} ms ({r[1]:.2f} cores busy)"
                                       for w, r in per.items()) for b, per in runs.items()), flush=True)
    s = summarize(rounds)
    for b, ratios in s["serial"].items():
        for w, value in ratios.items():
            print(f"batch {b} per worker: step({w}) / ({w} step(1)) = {value:.3f}  (1: nothing overlaps; "
                  f"{1 / int(w):.2f}: all of it)")
    out = args.out or REPO / "data" / "measurements" / f"ps_overlap_{dt.date.today()}.json"
    out.write_text(json.dumps({
        "what": __doc__.splitlines()[0], "workload": args.workload, "updates_per_worker": UPDATES,
        "rounds": rounds, **s,
        "provenance": {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                       "cpu_model": cpu_model(), "cores": len(os.sched_getaffinity(0)),
                       "python": platform.python_version(), "load_average_end": os.getloadavg()[0]}},
        indent=1) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
