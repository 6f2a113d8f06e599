"""Where a parameter server's workers sit in each other's cycle, from one real lab run.

Workers of an asynchronous PS can take turns at its NIC or meet there
(:func:`distsim.rhythm_range_s`), and the benchmark sees only the step time that
results. This runs one network-lab point (:func:`distsim.real.run_point`) and reads
the phase straight from the run's apply times: every update worker ``k`` (``k >= 1``)
applies falls somewhere between two consecutive applies of worker 0, and its phase is
how far along: 0 (or 1) together, 0.5 half a cycle apart, which for two workers is
turns (:func:`distsim.views.plots.ps_phases`). Printed in order, so a drift over the run shows::

    flock /work/cpu.lock .venv/bin/python benchmarks/phase_ps.py --rate-mbit 200 --steps 14

``--save`` appends the run (prediction, rhythms, apply times and provenance) to
``data/measurements/phase_ps/runs.jsonl``.

Needs root for the shaped network, as the lab does; presets as the lab finds them
(``DISTSIM_PRESET_DIR`` to use a benchmark's).
"""

from __future__ import annotations

import datetime as dt
import importlib.metadata as md
import json
import shlex
import subprocess
import sys
from pathlib import Path

from distsim.cli.commands import OneLineParser
from distsim.engines.asyncrun import rhythm_range_s
from distsim.real import lab_hardware, lab_scenario, run_point
from distsim.real.env import cpu_model
from distsim.validation import InputError
from distsim.views.plots.network import ps_phases

REPO = Path(__file__).resolve().parents[1]
#: Where ``--save`` appends one JSON line per run (the figure of notebook 05b reads it).
STORE = REPO / "data" / "measurements" / "phase_ps" / "runs.jsonl"


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate-mbit", type=float, required=True, help="every NIC's rate, Mbit/s")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--workload", default="mnist_mlp_wide")
    parser.add_argument("--steps", type=int, default=14, help="updates per worker")
    parser.add_argument("--save", action="store_true", help=f"append the run, with its apply times, to {STORE}")
    args = parser.parse_args(argv)
    try:
        scenario = lab_scenario("parameter_server", args.workers, args.rate_mbit, workload=args.workload,
                                steps=args.steps, hardware=lab_hardware())
    except InputError as exc:
        parser.error(str(exc))
    turns, lockstep = rhythm_range_s(scenario)
    point = run_point(scenario)
    measured = point.measured
    print(f"{args.workers} workers, {args.workload}, {args.rate_mbit:g} Mbit/s ({point.network or 'localhost'}): "
          f"measured {measured.summary.step_time_s * 1e3:.0f} ms per step, predicted "
          f"{point.predicted.summary.step_time_s * 1e3:.0f}; turns {turns * 1e3:.0f}, lockstep {lockstep * 1e3:.0f}")
    for k, ph in ps_phases(measured.curve.time_s, measured.staleness.worker).items():
        print(f"worker {k}'s applies in worker 0's cycle: {' '.join(f'{x:.2f}' for x in ph)}")
    if args.save:
        STORE.parent.mkdir(parents=True, exist_ok=True)
        with open(STORE, "a") as f:
            f.write(json.dumps(point.to_dict() | {"rhythm_range_s": [turns, lockstep]} | provenance(measured)) + "\n")
    return 0


def provenance(measured) -> dict:
    """What ran, where and when, for a stored run."""
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    return {"command": shlex.join([sys.executable, *sys.argv]), "date": measured.meta.get("date"),
            "written": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "git_commit": commit.strip(), "cpu_model": cpu_model(), "tensorflow": md.version("tensorflow"),
            "calibrated_presets": lab_hardware().calibrated}


if __name__ == "__main__":
    sys.exit(main())
