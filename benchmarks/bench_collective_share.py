"""How much of a core a localhost worker process keeps busy during an all-reduce.

Run from the repository root (about 20 s per launch on the 2-core VM: 10 launches took 3 minutes on 2026-11-27)::

    .venv/bin/python benchmarks/bench_collective_share.py [--rounds 5]

Two MultiWorkerMirrored worker processes all-reduce the calibration's message
sizes (:func:`distsim.real.calibrate.measure_collective`), alternately free on
every core and pinned together on one core (``os.sched_setaffinity``, which
the worker processes inherit). If each process keeps a share ``u`` of a core
busy while the collective runs, two of them on one core take ``max(1, 2 u)``
times as long, so ``u`` is at most half the pinned / unpinned ratio (at
most 1/2 when pinning costs nothing: :func:`summarize`). The question it
answers (``data/measurements/README.md``, "bench_real held out: where the
errors come from"): does ``max(1, P u / C)`` explain why 3 processes on the
2 cores all-reduce 1.13-1.35 times slower than the 2-process ring predicts?
That prediction for P = 3, C = 2 is printed; it uses only 2-process runs.

Writes ``data/measurements/collective_share_<date>.json`` (``--out``) with
every round's times per size and provenance.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import tempfile
from pathlib import Path

import numpy as np

from distsim.real.calibrate import measure_collective
from distsim.real.env import cpu_model

REPO = Path(__file__).resolve().parents[1]


def one_round(workload: str, cores: set[int]) -> dict[str, float]:
    """All-reduce seconds per message size with this process (and so its workers) on ``cores``."""
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cores)
    try:
        with tempfile.TemporaryDirectory(prefix="collective-share-") as workdir:
            measured = measure_collective(workload, Path(workdir), workers=2)
    finally:
        os.sched_setaffinity(0, before)
    return {str(n): float(t) for n, t in zip(measured["sizes_bytes"], measured["allreduce_s"])}


def summarize(rounds: list[dict]) -> dict:
    """Median seconds per placement and size over ``rounds``, their ratio, and the
    bound on ``u`` it gives: a ratio r means ``max(1, 2 u) <= r``, so ``u <= r / 2``
    (at a ratio of 1 or less the pinned processes lost nothing: ``u <= 1/2``)."""
    sizes = list(rounds[0]["allreduce_s"])
    median = {name: dict(zip(sizes, np.median([[r["allreduce_s"][k] for k in sizes] for r in rounds
                                                if r["placement"] == name], axis=0).tolist()))
              for name in ("unpinned", "pinned")}
    ratio = {k: median["pinned"][k] / median["unpinned"][k] for k in sizes}
    return {"median_s": median, "median_ratio_by_size": ratio, "u_at_most": max(1.0, max(ratio.values())) / 2}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="mnist_mlp")
    parser.add_argument("--rounds", type=int, default=5, help="pairs of (unpinned, pinned) launches")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    every = os.sched_getaffinity(0)
    if len(every) < 2:
        raise SystemExit(f"error: this process may run on {len(every)} core(s); the comparison needs at least 2")
    one = {min(every)}
    rounds = []
    for i in range(args.rounds):
        for name, cores in (("unpinned", every), ("pinned", one)):
            times = one_round(args.workload, cores)
            rounds.append({"round": i, "placement": name, "cores": sorted(cores), "allreduce_s": times})
            print(f"round {i + 1}/{args.rounds} {name:<8} " + "  ".join(
                f"{int(k) / 1024:.0f} KiB {v * 1e3:.2f} ms" for k, v in times.items()), flush=True)
    summary = summarize(rounds)
    print("\nsize        unpinned    pinned   ratio")
    for k, r in summary["median_ratio_by_size"].items():
        a, b = (summary["median_s"][name][k] for name in ("unpinned", "pinned"))
        print(f"{int(k) / 1024:>7.0f} KiB {a * 1e3:8.2f} ms {b * 1e3:8.2f} ms {r:6.2f}")
    print(f"\nshare of a core per process during a collective: u <= {summary['u_at_most']:.3f} "
          "(half the largest median pinned / unpinned ratio)")
    print(f"rule max(1, P u / C) for 3 processes on {len(every)} cores: at most x{max(1.0, 3 * summary['u_at_most'] / len(every)):.3f}")
    out = args.out or REPO / "data" / "measurements" / f"collective_share_{dt.date.today()}.json"
    out.write_text(json.dumps({
        "what": __doc__.splitlines()[0], "workload": args.workload, "rounds": rounds,
        **summary,
        "provenance": {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                       "cpu_model": cpu_model(), "cores": len(every), "python": platform.python_version(),
                       "load_average_end": os.getloadavg()[0]}}, indent=1) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
