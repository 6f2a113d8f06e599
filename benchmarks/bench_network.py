"""Predicted vs measured over emulated networks: real tf.distribute with every NIC shaped.

The grid (:data:`LAB_GRID`, 24 cells; ``--full`` for all 72 combinations): every
NIC at 10, 20, 50, 100, 200 or 1000 Mbit/s; 2, 3 or 4 workers;
``mnist_mlp`` (407 KB of gradient) or ``mnist_mlp_wide`` (4.07 MB);
MultiWorkerMirrored (ring all-reduce) and ParameterServer (one process per
task, one PS). Each cell runs with its NICs shaped (:mod:`distsim.real.network`)
and, right beside it in a random order, unshaped (the same namespaces without a
rate), so drift of the shared machine cancels. Cells are shuffled and
repeated (``--repeats``).

The first job calibrates the unshaped gRPC link and the device once
(:func:`distsim.real.calibrate`); every prediction then comes from those
presets and the shaped rate (:func:`distsim.real.netlab.lab_scenario`), with
nothing fitted to the shaped runs. A cell is judged on its step time
(parameter server: ``workers x`` the interval between applied updates) with
the drift cancelled by the unshaped run beside it: ``predicted = measured
unshaped + (predicted shaped - predicted unshaped)``, the time the network adds
as the simulator prices it on top of what the machine measured without it.
The plain error (predicted shaped / measured shaped - 1) is reported too.

The run is resumable: every finished job is appended to
``data/measurements/bench_network_<date>/runs.jsonl`` and skipped next time.
Hold the machine lock for each chunk::

    flock /work/cpu.lock .venv/bin/python benchmarks/bench_network.py --chunk-minutes 20

until it says the grid is done; it then writes
``data/measurements/bench_network_<date>.json`` (every run, the calibration,
provenance and ``summary``) and prints the table. ``--report`` rewrites that
file from the stored runs.

TCP's congestion control can shift how transfers that meet share a NIC
(what the lab saw: ``data/measurements/README.md``). The lab's namespaces inherit the machine's
unless ``--congestion-control`` names another; every run records the one it
used, and one run folder holds one (name the run apart with ``--date``).
"""

from __future__ import annotations

import datetime as dt
import importlib.metadata as md
import json
import os
import platform
import shlex
import subprocess
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from distsim.cli.commands import OneLineParser
from distsim.engines.asyncrun import rhythm_range_s
from distsim.engines.prediction import predict
from distsim.real.calibrate import calibrate, write_presets
from distsim.real.env import cpu_model
from distsim.real.experiment import EmulationUnavailable, run
from distsim.real.launcher import LaunchError
from distsim.real.netlab import (
    LabHardware,
    lab_hardware,
    lab_scenario,
    real_options,
    wire_bound_s,
)
from distsim.real.network import (
    CPU_PERIOD_US,
    SMALL_PACKET_BYTES,
    congestion_control_rule,
    described_congestion_control,
    emulation_from_scenario,
    machine_congestion_control,
)
from distsim.scenario import PRESET_DIR_ENV
from distsim.validation import InputError

REPO = Path(__file__).resolve().parents[1]

RATES_MBIT = (10, 20, 50, 100, 200, 1000)
WORKERS = (2, 3, 4)
WORKLOADS = ("mnist_mlp", "mnist_mlp_wide")
STRATEGIES = ("multi_worker_mirrored", "parameter_server")

#: Seconds of steady-state training each shaped run aims at.
STEADY_S = 6.0
#: Fewest and most steps (PS: updates per worker) a run measures after its warm-up.
MIN_STEPS, MAX_STEPS = 5, 40
#: Fewest updates per worker a parameter-server run measures: its workers start in step
#: (every one pulls at once) and take a few updates to spread out.
MIN_PS_STEPS = 10
#: Leading steps each run leaves out (distsim.real's default warm-up).
WARMUP_STEPS = 2

TARGET_MEDIAN, TARGET_MAX = 10.0, 20.0


@dataclass(frozen=True)
class Cell:
    strategy: str
    workers: int
    workload: str
    rate_mbit: float

    @property
    def key(self) -> str:
        return f"{self.strategy}/{self.workers}/{self.workload}/{self.rate_mbit:g}"

    @property
    def label(self) -> str:
        short = {"multi_worker_mirrored": "ring", "parameter_server": "PS"}[self.strategy]
        return f"{short} {self.workers}w {self.workload} {self.rate_mbit:g} Mbit/s"


#: The cells measured by default: every rate, worker count, model and strategy
#: appears, but not every combination (the full product, ``--full``, is 72
#: cells and several hours). The wide model runs at the faster rates, where a
#: run takes seconds rather than minutes (a parameter server moves 2 x 4 MB
#: per update: 7 s at 10 Mbit/s), and a 4-worker ring of the wide model at
#: 10 Mbit/s exceeds TensorFlow's collective RPC deadline.
LAB_GRID: tuple[tuple[str, int, str, float], ...] = (
    *(("multi_worker_mirrored", w, "mnist_mlp", r) for w, r in
      ((2, 10), (2, 50), (2, 200), (2, 1000), (3, 20), (3, 100), (4, 10), (4, 50), (4, 200))),
    *(("multi_worker_mirrored", w, "mnist_mlp_wide", r) for w, r in ((2, 100), (2, 1000), (3, 200), (4, 1000))),
    *(("parameter_server", w, "mnist_mlp", r) for w, r in
      ((2, 10), (2, 50), (2, 200), (3, 20), (3, 100), (3, 1000), (4, 10), (4, 50), (4, 200))),
    *(("parameter_server", w, "mnist_mlp_wide", r) for w, r in ((2, 1000), (4, 200))),
)


def grid(full: bool = False) -> list[Cell]:
    """The cells to measure: :data:`LAB_GRID`, or with ``full`` every combination."""
    if full:
        return [Cell(s, w, m, r) for s in STRATEGIES for w in WORKERS for m in WORKLOADS for r in RATES_MBIT]
    return [Cell(*cell) for cell in LAB_GRID]


# ---- state on disk -------------------------------------------------------------------------------
class State:
    """The folder of one benchmark run: calibration, presets and one line per finished job."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.runs_path = folder / "runs.jsonl"
        self.calibration_path = folder / "calibration.json"
        self.preset_dir = folder / "presets"

    def runs(self) -> list[dict]:
        if not self.runs_path.exists():
            return []
        return [json.loads(line) for line in self.runs_path.read_text().splitlines() if line.strip()]

    def append(self, record: dict) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        with open(self.runs_path, "a") as f:
            f.write(json.dumps(record) + "\n")

    def calibrated(self) -> bool:
        return self.calibration_path.exists() and self.preset_dir.is_dir()


def hardware(state: State) -> LabHardware:
    """The calibrated presets of this benchmark run (its own preset folder)."""
    os.environ[PRESET_DIR_ENV] = str(state.preset_dir)
    found = lab_hardware()
    if not found.calibrated:
        raise SystemExit(f"no calibrated presets in {state.preset_dir}; the calibration job has not run")
    return found


def steps_for(cell: Cell, hw: LabHardware) -> int:
    """Steps (PS: updates per worker) that make about :data:`STEADY_S` of the shaped run."""
    predicted = predict(lab_scenario(cell.strategy, cell.workers, cell.rate_mbit, workload=cell.workload,
                                     steps=20, hardware=hw)).summary.step_time_s
    least = MIN_PS_STEPS if cell.strategy == "parameter_server" else MIN_STEPS
    return int(np.clip(round(STEADY_S / predicted), least, MAX_STEPS)) + WARMUP_STEPS


def jobs(repeats: int, seed: int, full: bool = False) -> list[tuple[int, Cell]]:
    """Every (repeat, cell), each repeat in its own seeded random order."""
    rng = np.random.default_rng(seed)
    cells = grid(full)
    return [(r, cells[i]) for r in range(repeats) for i in rng.permutation(len(cells))]


# ---- measuring ------------------------------------------------------------------------------------
def measure(cell: Cell, steps: int, shaped: bool, hw: LabHardware, congestion_control: str | None) -> dict:
    scenario = lab_scenario(cell.strategy, cell.workers, cell.rate_mbit if shaped else None,
                            workload=cell.workload, steps=steps, hardware=hw)
    predicted_s = predict(scenario).summary.step_time_s
    emulation = emulation_from_scenario(scenario, "shaped" if shaped else "namespaces", congestion_control)
    started = time.time()
    with warnings.catch_warnings():
        warnings.simplefilter("error", EmulationUnavailable)  # a benchmark never falls back silently
        result = run(scenario, emulation=emulation, progress=False,
                     timeout_s=max(600.0, 20 * steps * cell.workers * predicted_s), **real_options(scenario))
    return {
        "measured_step_s": result.summary.step_time_s,
        "worker_step_s": json.loads(result.meta.get("worker_step_time_s", "{}")),
        "step_times_s": [float(x) for x in result.step_times_s],
        "mean_staleness": result.summary.mean_staleness,
        "nic_counters": json.loads(result.meta.get("nic_counters", "{}")),
        "network": result.meta.get("network"),
        "date": result.meta.get("date"),
        "wall_s": time.time() - started,
    }


def run_calibration(state: State) -> None:
    print("calibrating the unshaped gRPC link and the device (3 rounds)...", file=sys.stderr, flush=True)
    started = time.time()
    cal = calibrate(workload="mnist_mlp", repeats=3, workers=WORKERS, write=False, progress=True)
    state.folder.mkdir(parents=True, exist_ok=True)
    write_presets(cal, state.preset_dir)
    state.calibration_path.write_text(json.dumps(cal.to_dict() | {"elapsed_s": time.time() - started}, indent=1))


def run_chunk(state: State, args) -> bool:
    """Run jobs until the grid is done or the chunk's time is up; True when done."""
    deadline = time.time() + args.chunk_minutes * 60
    if not state.calibrated():
        run_calibration(state)
    hw = hardware(state)
    used = congestion_controls(state.runs())
    wanted = args.congestion_control or machine_congestion_control()
    if used - {wanted}:
        raise SystemExit(f"--congestion-control={args.congestion_control}; allowed: what the runs in "
                         f"{state.folder} used ({', '.join(sorted(used))}): one run folder, one congestion control")
    done = {(r["repeat"], r["cell"]) for r in state.runs()}
    todo = [(rep, cell) for rep, cell in jobs(args.repeats, args.seed, args.full) if (rep, cell.key) not in done]
    total = args.repeats * len(grid(args.full))
    rng = np.random.default_rng([args.seed, len(done)])
    for rep, cell in todo:
        if time.time() > deadline:
            print(f"chunk time up: {total - len(todo)}/{total} cells done; run again to continue",
                  file=sys.stderr)
            return False
        steps = steps_for(cell, hw)
        record = {"repeat": rep, "cell": cell.key, "steps": steps, "shaped_first": bool(rng.random() < 0.5)}
        try:
            for shaped in ((True, False) if record["shaped_first"] else (False, True)):
                record["shaped" if shaped else "unshaped"] = measure(cell, steps, shaped, hw, args.congestion_control)
        except LaunchError as exc:
            record["failed"] = failure_line(exc.outcome)
        state.append(record)
        todo_left = len(todo) - todo.index((rep, cell)) - 1
        done_text = (f"FAILED: {record['failed']}" if "failed" in record else
                     f"{record['shaped']['measured_step_s'] * 1e3:.1f} ms shaped, "
                     f"{record['unshaped']['measured_step_s'] * 1e3:.1f} ms unshaped "
                     f"({record['shaped']['wall_s'] + record['unshaped']['wall_s']:.0f} s)")
        print(f"[{total - todo_left}/{total}] repeat {rep + 1} {cell.label}: {done_text}", file=sys.stderr, flush=True)
    return True


def failure_line(outcome) -> str:
    """The launch's reason and the first TensorFlow error line of a failed task, on one line."""
    for task in outcome.tasks:
        lines = task.log_text().splitlines()
        for i, line in enumerate(lines):
            if "StartAbort" in line or "is aborted by" in line:
                # TensorFlow puts the RPC that failed on the next line.
                return f"{outcome.reason}; {task.name}: {line.strip()} {lines[i + 1].strip() if i + 1 < len(lines) else ''}"
    return outcome.reason


# ---- judging ---------------------------------------------------------------------------------------
def evaluate(state: State) -> dict:
    """Predict every cell from the stored presets and compare with the stored runs."""
    hw = hardware(state)
    by_cell: dict[str, list[dict]] = {}
    failed: dict[str, list[str]] = {}
    for r in state.runs():
        if "failed" in r:
            failed.setdefault(r["cell"], []).append(r["failed"])
        else:
            by_cell.setdefault(r["cell"], []).append(r)
    rows = []
    for cell in grid(full=True):  # every measured cell, in or out of LAB_GRID
        runs = by_cell.get(cell.key, [])
        if not runs:
            continue
        steps = runs[0]["steps"]
        shaped = lab_scenario(cell.strategy, cell.workers, cell.rate_mbit, workload=cell.workload,
                              steps=steps, hardware=hw)
        unshaped = lab_scenario(cell.strategy, cell.workers, None, workload=cell.workload, steps=steps, hardware=hw)
        p_s, p_u = predict(shaped).summary.step_time_s, predict(unshaped).summary.step_time_s
        m_s = np.array([r["shaped"]["measured_step_s"] for r in runs])
        m_u = np.array([r["unshaped"]["measured_step_s"] for r in runs])
        paired = m_u + (p_s - p_u)
        rows.append({
            "cell": cell.key, "strategy": cell.strategy, "workers": cell.workers, "workload": cell.workload,
            "rate_mbit": cell.rate_mbit, "repeats": len(runs), "steps": steps,
            "predicted_step_s": p_s, "predicted_unshaped_step_s": p_u,
            "measured_step_s": float(np.median(m_s)), "measured_unshaped_step_s": float(np.median(m_u)),
            "measured_spread": float((m_s.max() - m_s.min()) / np.median(m_s)),
            "paired_predicted_step_s": float(np.median(paired)),
            "error_pct": 100 * float(np.median(paired / m_s - 1)),
            "runs_vs_paired_pct": [100 * float(x) for x in m_s / paired - 1],
            "plain_error_pct": 100 * (p_s / float(np.median(m_s)) - 1),
            "wire_bound_s": wire_bound_s(shaped),
            **_rhythm(cell, shaped, m_s, m_u - p_u),
        })
    errors = np.abs([r["error_pct"] for r in rows])
    plain = np.abs([r["plain_error_pct"] for r in rows])
    summary = {
        "median_abs_error": float(np.median(errors)) if rows else None,
        "max_abs_error": float(np.max(errors)) if rows else None,
        "cells": len(rows),
        "judged_on": "step time; drift cancelled by the unshaped run beside each (see the module docstring)",
        "target": {"median_abs_error": TARGET_MEDIAN, "max_abs_error": TARGET_MAX, "cells": 24},
        "plain_median_abs_error": float(np.median(plain)) if rows else None,
        "plain_max_abs_error": float(np.max(plain)) if rows else None,
        "failed_runs": sum(len(v) for v in failed.values()),
        "lab_grid": _summary([r for r in rows if r["cell"] in {c.key for c in grid()}]),
        # The range the PS phase caveat (distsim.engines.asyncrun.PHASE_CAVEAT) states, over every benchmark.
        "ps_runs_vs_paired_pct": _extremes([x for r in rows if r["strategy"] == "parameter_server"
                                            for x in r["runs_vs_paired_pct"]]),
        # Where PS runs of 2+ workers sat between their two rhythms (rhythm_range_s): 0 turns, 1 lockstep.
        "ps_runs_rhythm_position": _extremes([x for r in rows for x in r.get("runs_rhythm_position", [])]),
    }
    return {"summary": summary, "cells": rows, "failed": failed}


def _rhythm(cell: Cell, shaped, measured_s: np.ndarray, drift_s: np.ndarray) -> dict:
    """A PS cell's two rhythms (:func:`distsim.engines.asyncrun.rhythm_range_s`), each paired with
    every run as its prediction is (``drift_s`` = measured less predicted unshaped), and where each
    run sat between them: 0 at turns, 1 at lockstep. Empty for a ring or one worker."""
    if cell.strategy != "parameter_server" or cell.workers < 2:
        return {}
    turns, lockstep = rhythm_range_s(shaped)
    return {"rhythm_range_s": [turns, lockstep],
            "runs_rhythm_position": [float(x) for x in (measured_s - drift_s - turns) / (lockstep - turns)]}


def _extremes(values: list[float]) -> list[float] | None:
    """[lowest, highest] of ``values`` (``None`` if there are none)."""
    return [min(values), max(values)] if values else None


def _summary(rows: list[dict]) -> dict:
    """Median and largest |error| (percent) of ``rows``, paired and plain, and how many."""
    errors = np.abs([r["error_pct"] for r in rows])
    plain = np.abs([r["plain_error_pct"] for r in rows])
    return {"median_abs_error": float(np.median(errors)) if rows else None,
            "max_abs_error": float(np.max(errors)) if rows else None, "cells": len(rows),
            "plain_median_abs_error": float(np.median(plain)) if rows else None,
            "plain_max_abs_error": float(np.max(plain)) if rows else None}


def table(rows: list[dict]) -> str:
    head = (f"{'cell':<40}{'pred ms':>10}{'beside':>9}{'paired':>10}{'meas ms':>10}{'err':>8}{'plain':>8}"
            f"{'spread':>8}")
    lines = [head, "-" * len(head)]
    for r in rows:
        cell = Cell(r["strategy"], r["workers"], r["workload"], r["rate_mbit"])
        lines.append(f"{cell.label:<40}{r['predicted_step_s'] * 1e3:>10.1f}{r['measured_unshaped_step_s'] * 1e3:>9.1f}"
                     f"{r['paired_predicted_step_s'] * 1e3:>10.1f}{r['measured_step_s'] * 1e3:>10.1f}"
                     f"{r['error_pct']:>+7.1f}%{r['plain_error_pct']:>+7.1f}%{100 * r['measured_spread']:>7.0f}%")
    return "\n".join(lines)


def congestion_controls(runs: list[dict]) -> set[str]:
    """The TCP congestion controls the stored runs name in their network
    (runs from before the lab named it ran with the machine's: BBR here)."""
    named = {described_congestion_control((r.get(side) or {}).get("network") or "")
             for r in runs for side in ("shaped", "unshaped")}
    return named - {None}


def provenance(state: State) -> dict:
    runs = state.runs()
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()


    return {
        "what": "predicted vs measured step times of real tf.distribute runs with every NIC shaped (CPU, one machine)",
        "command": shlex.join([sys.executable, *sys.argv]),
        "written": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "first_run": min((r["shaped"]["date"] for r in runs if "shaped" in r), default=None),
        "last_run": max((r["shaped"]["date"] for r in runs if "shaped" in r), default=None),
        "git_commit_of_the_report": commit,
        "cpu_model": cpu_model(),
        "cores": os.cpu_count(),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "tensorflow": md.version("tensorflow"),
        "tcp_congestion_control": ", ".join(sorted(congestion_controls(runs))) or machine_congestion_control(),
        "emulation": (f"one network namespace per task through a bridge; each NIC limited by htb at the rate in "
                      f"each direction, packets under {SMALL_PACKET_BYTES} bytes first; CFS period "
                      f"{CPU_PERIOD_US} us for CPU quotas"),
        "calibration": json.loads(state.calibration_path.read_text()),
        "note": "shared 2-core machine under load from other jobs; each shaped run has an unshaped run beside it",
    }


def report(state: State, out: Path) -> dict:
    result = evaluate(state)
    record = {"summary": result["summary"], **provenance(state), "cells": result["cells"],
              "failed_cells": result["failed"], "runs": state.runs()}
    out.write_text(json.dumps(record, indent=1, default=float))
    s = result["summary"]
    print(table(result["cells"]))
    for cell, reasons in result["failed"].items():
        print(f"FAILED {cell} ({len(reasons)} run(s)): {reasons[0]}")
    lab = s["lab_grid"]
    print(f"\n{s['cells']} cells, plain (predicted shaped / measured shaped - 1): median |error| "
          f"{s['plain_median_abs_error']:.1f} %, max {s['plain_max_abs_error']:.1f} %; paired with the unshaped run "
          f"beside each: {s['median_abs_error']:.1f} %, {s['max_abs_error']:.1f} %; the {lab['cells']} of LAB_GRID: "
          f"plain {lab['plain_median_abs_error']:.1f} %, {lab['plain_max_abs_error']:.1f} %, paired "
          f"{lab['median_abs_error']:.1f} %, {lab['max_abs_error']:.1f} %; wrote {out}")
    if s["ps_runs_vs_paired_pct"]:
        low, high = s["ps_runs_vs_paired_pct"]
        print(f"parameter-server runs against their paired prediction: {low:+.1f} % to {high:+.1f} %")
    if s["ps_runs_rhythm_position"]:
        low, high = s["ps_runs_rhythm_position"]
        print(f"parameter-server runs of 2+ workers between turns (0) and lockstep (1): {low:+.2f} to {high:+.2f}")
    return record


def main() -> int:
    parser = OneLineParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--date", default=dt.date.today().isoformat(), help="names the run (default: today)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0, help="seeds the order of the cells")
    parser.add_argument("--chunk-minutes", type=float, default=20.0, help="start no job after this long")
    parser.add_argument("--full", action="store_true", help="every combination of the grid (72 cells), not LAB_GRID")
    parser.add_argument("--report", action="store_true", help="only rewrite the JSON from the stored runs")
    parser.add_argument("--congestion-control", help="TCP congestion control in the lab's namespaces "
                        "(default: the machine's, which they inherit); name the run with --date to keep it apart")
    args = parser.parse_args()
    try:
        congestion_control_rule()("--congestion-control", args.congestion_control)
    except InputError as exc:
        parser.error(str(exc))
    state = State(REPO / "data" / "measurements" / f"bench_network_{args.date}")
    out = REPO / "data" / "measurements" / f"bench_network_{args.date}.json"
    if args.report or run_chunk(state, args):
        report(state, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
