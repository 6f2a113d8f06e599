"""Predicted vs measured on this machine: calibrate, measure, predict, compare, in one run.

For every round (``--rounds``), in a seeded random order: one round of the
calibration micro-benchmarks, and one real run of every configuration
(OneDevice, Mirrored over 1/2/4 logical CPUs, MultiWorkerMirrored over 2 and 3
localhost worker processes, ParameterServer 2 workers + 1 PS, CentralStorage
over 2 logical CPUs), each in fresh processes. Then the calibration is fitted
(medians over rounds), written as "this machine" presets, every configuration
is predicted with ``distsim.predict``, and ``distsim.results.compare`` reports the
signed errors, judged on step time relative to a one-device run made right
next to each run (the machine is shared, so absolute times drift within
seconds).

**Held out.** The fit sees only the micro-benchmark points of
:data:`CALIBRATION_DEVICES` logical devices and :data:`CALIBRATION_WORKERS`
worker processes (:func:`distsim.real.calibrate.restrict_rounds`): the counts
of the configurations in :data:`CALIBRATION_CONFIGS`. The others
(:data:`HELD_OUT`: Mirrored over 4 devices, MultiWorkerMirrored over 3
processes, the 2-worker parameter server, whose micro-benchmark has one
worker) run counts the fit never saw; the report gives their errors apart,
against the target of :data:`TARGET` (issue 24).

``--report FILE...`` re-evaluates stored JSONs offline with today's code (no
TensorFlow run): it refits the calibration from the stored per-point medians
(:func:`distsim.real.calibrate.rounds_from_calibration`), predicts, compares
with the stored measurements and rewrites ``summary``, ``comparison`` and
``predicted``; ``scripts/rereport_measurements.py`` does so for every stored
benchmark. ``--explain FILE...`` prints, without rewriting anything, where
each configuration's ratio error comes from (:func:`explain`): the predicted
step's parts, the bias of the predicted one-device step that every ratio
divides by, the measured ratio's bootstrap interval over rounds, and the
micro-benchmark points of the held-out counts against what the fit
extrapolates to them (the analysis in ``data/measurements/README.md``).

Run from the repository root::

    .venv/bin/python benchmarks/bench_real.py

The defaults, 300 steps and 5 rounds, take about 24 minutes on the 2-core
development VM; with fewer, the machine's noise shows through. It prints the
table and writes ``data/measurements/bench_real_<workload>_<date>.json`` with
the raw per-round numbers, the calibration and provenance.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from distsim.engines.costs import async_costs
from distsim.engines.prediction import predict
from distsim.engines.steady import step_model
from distsim.mechanics.stepcosts import step_costs
from distsim.mechanics.strategies import plan
from distsim.real.calibrate import (
    DEFAULT_WORKERS,
    DEVICE_PRESET,
    INTER_LINK_PRESET,
    INTRA_LINK_PRESET,
    Calibration,
    fit,
    measure_collective,
    measure_local,
    measure_ps,
    restrict_rounds,
    rounds_from_calibration,
    workload_preset_name,
    write_presets,
)
from distsim.real.env import cpu_model
from distsim.real.experiment import run
from distsim.results.compare import Comparison, ComparisonRow, compare
from distsim.results.result import Result, Summary
from distsim.scenario import PRESET_DIR_ENV, make_scenario

REPO = Path(__file__).resolve().parents[1]

#: (label, strategy, num_workers, devices_per_worker)
CONFIGS: list[tuple[str, str, int, int]] = [
    ("one_device", "one_device", 1, 1),
    ("mirrored x1", "mirrored", 1, 1),
    ("mirrored x2", "mirrored", 1, 2),
    ("mirrored x4", "mirrored", 1, 4),
    ("multi_worker_mirrored 2 workers", "multi_worker_mirrored", 2, 1),
    ("multi_worker_mirrored 3 workers", "multi_worker_mirrored", 3, 1),
    ("parameter_server 2w+1ps", "parameter_server", 2, 1),
    ("central_storage x2", "central_storage", 1, 2),
]

#: Logical-device and worker-process counts whose micro-benchmark points the fit uses.
CALIBRATION_DEVICES: tuple[int, ...] = (2,)
CALIBRATION_WORKERS: tuple[int, ...] = (2,)

#: The configurations that run only those counts (one_device is the baseline of every ratio).
CALIBRATION_CONFIGS: tuple[str, ...] = ("one_device", "mirrored x1", "mirrored x2",
                                        "multi_worker_mirrored 2 workers", "central_storage x2")

#: Configurations with counts the fit never saw: judged apart.
HELD_OUT: tuple[str, ...] = tuple(label for label, *_ in CONFIGS if label not in CALIBRATION_CONFIGS)

#: Issue 24's target for the held-out ratios (|predicted / measured - 1|).
TARGET = {"median_abs_error": 0.08, "max_abs_error": 0.20}


def scenario(strategy: str, workers: int, devices: int, args, calibrated: bool, machine_cores: float | None = None):
    """The configuration as a Scenario: built-in presets to run, calibrated ones to predict
    (``machine_cores``: of the machine that ran it, default this one's)."""
    hardware = (
        dict(device=DEVICE_PRESET, workload=workload_preset_name(args.workload),
             intra_link=INTRA_LINK_PRESET, inter_link=INTER_LINK_PRESET)
        if calibrated
        else dict(device="this_machine_core", workload=args.workload)
    )
    # Every worker here runs on this one host: W worker processes share its cores, cores / W each.
    # distsim.real's localhost parameter-server cluster runs every task in one process, whose workers
    # take turns on all of its cores (Strategy.ps_cluster="in_process").
    in_process = strategy == "parameter_server"
    cores = (machine_cores or os.cpu_count()) / (1 if in_process else workers)
    ps_cluster = "in_process" if in_process else "processes"
    # Mirrored sums with ReductionToOneDevice here, in the real runs and in the
    # prediction: the op the calibrated link is fitted on, and the op of the
    # stored results in data/measurements/ (TensorFlow's default is a collective ring).
    algorithm = "reduce_to_one" if strategy == "mirrored" else None
    return make_scenario(
        strategy=strategy, num_workers=workers, devices_per_worker=devices, physical_cores=cores,
        global_batch=args.global_batch, steps=args.steps, seed=0, ps_cluster=ps_cluster, algorithm=algorithm,
        **hardware,
    )


def _summary(r) -> dict:
    return {"step_time_s": r.summary.step_time_s, "throughput_samples_per_s": r.summary.throughput_samples_per_s,
            "mean_staleness": r.summary.mean_staleness, "cross_device_op": r.meta.get("cross_device_op"),
            "num_replicas": r.num_replicas, "global_batch": r.global_batch, "date": r.meta.get("date")}


# ---- judging (live and --report) ----------------------------------------------------------------------
@contextmanager
def _presets(cal: Calibration):
    """The calibration's presets, in a temporary folder, for as long as the block runs."""
    before = os.environ.get(PRESET_DIR_ENV)
    with tempfile.TemporaryDirectory(prefix="bench-real-presets-") as folder:
        write_presets(cal, folder)
        os.environ[PRESET_DIR_ENV] = folder
        try:
            yield
        finally:
            if before is None:
                os.environ.pop(PRESET_DIR_ENV, None)
            else:
                os.environ[PRESET_DIR_ENV] = before


def _as_result(stored: dict, strategy: str) -> Result:
    """A stored run (:func:`_summary`) as the measured Result compare() takes."""
    return Result(source="measured", strategy=strategy, num_replicas=stored["num_replicas"],
                  global_batch=stored["global_batch"],
                  summary=Summary(stored["step_time_s"], stored["throughput_samples_per_s"]))


def judge(record: dict, devices, workers) -> tuple[Calibration, Comparison, list[Result]]:
    """Fit on the micro-benchmark points of ``devices`` and ``workers`` only, predict every
    configuration, and compare with the record's runs (ratios to the one-device run beside each)."""
    stored = record.get("rounds")
    local, collective, ps = ((stored["local"], stored["collective"], stored["ps"]) if stored
                             else rounds_from_calibration(record["calibration"]))
    local, collective = restrict_rounds(local, collective, devices=devices, workers=workers)
    settings = SimpleNamespace(**record["settings"])
    cal = fit(local, collective, ps, workload=settings.workload,
              physical_cores=record["calibration"]["physical_cores"])
    with _presets(cal):
        predicted = [predict(scenario(*cfg, settings, calibrated=True, machine_cores=record["cores"]))
                     for _, *cfg in CONFIGS]
    runs = {key: [[_as_result(r, strategy) for r in record[key][label]] for label, strategy, *_ in CONFIGS]
            for key in ("measured", "baseline_beside")}
    table = compare(predicted, runs["measured"], labels=[label for label, *_ in CONFIGS], baseline=0,
                    paired_baselines=runs["baseline_beside"])
    return cal, table, predicted


def _errors(table: Comparison, labels) -> dict:
    """Median and largest |ratio error| over the rows of ``labels`` (the baseline's is 1 by construction)."""
    errors = np.abs([r.ratio_error for r in table.rows if r.label in labels and r.label != table.baseline])
    return {"configurations": [label for label in labels if label != table.baseline],
            "median_abs_error": float(np.median(errors)), "max_abs_error": float(np.max(errors))}


def evaluate(record: dict) -> dict:
    """``summary``, ``comparison``, ``predicted`` and ``calibration_fit`` of a record, from its
    runs and calibration inputs alone (the fit sees only the calibration counts)."""
    cal, table, predicted = judge(record, CALIBRATION_DEVICES, CALIBRATION_WORKERS)
    measured_counts = rounds_from_calibration(record["calibration"])
    _, in_sample, _ = judge(record, sorted({int(n) for n in measured_counts[0][0]["allreduce_s"]}),
                            sorted({int(r["workers"]) for r in measured_counts[1]}))
    labels = [label for label, *_ in CONFIGS]
    fitted = {k: v for k, v in cal.to_dict().items() if k != "meta"}
    return {
        "summary": {
            "judged_on": "step time / the one-device run beside it; error = predicted ratio / measured ratio - 1",
            "calibrated_on": {"devices": list(CALIBRATION_DEVICES), "workers": list(CALIBRATION_WORKERS)},
            "held_out": _errors(table, HELD_OUT) | {"target": TARGET},
            "calibration_configs": _errors(table, CALIBRATION_CONFIGS),
            "fitted_on_every_count": _errors(in_sample, labels),
        },
        "comparison": table.to_dict(),
        "predicted": {label: p.summary.__dict__ for label, p in zip(labels, predicted)},
        "calibration_fit": fitted,
    }


def text(record: dict) -> str:
    """The calibration, the table and the held-out figures of an evaluated record."""
    cal, s = record["calibration_fit"], record["summary"]
    table = compare_text(record["comparison"])
    lines = [
        f"calibration (micro-benchmarks on {s['calibrated_on']['devices']} devices and "
        f"{s['calibrated_on']['workers']} worker processes): overhead {cal['step_overhead_s'] * 1e3:.2f} ms/step + "
        f"{cal['replica_dispatch_s'] * 1e3:.2f} ms per replica ({cal['replica_variable_s'] * 1e3:.2f} ms of it for "
        f"its variables), {cal['compute_s_per_example'] * 1e6:.1f} us/example, "
        f"input {cal['input_s_per_sample'] * 1e6:.1f} us/example, "
        f"memory link {cal['intra']['latency_s'] * 1e6:.0f} us + {cal['intra']['bandwidth_Bps'] / 1e9:.2f} GB/s, "
        f"gRPC link {cal['inter']['latency_s'] * 1e6:.0f} us + {cal['inter']['bandwidth_Bps'] / 1e9:.2f} GB/s, "
        f"PS request {cal['ps_request_s'] * 1e3:.2f} ms",
        "",
        table,
    ]
    for key, what in (("held_out", "HELD OUT"), ("calibration_configs", "calibration configurations"),
                      ("fitted_on_every_count", "for contrast, fitted on every count (in-sample)")):
        e = s[key]
        lines.append(f"{what} ({', '.join(e['configurations'])}): median |ratio error| "
                     f"{e['median_abs_error']:.1%}, max {e['max_abs_error']:.1%}")
    t = s["held_out"]["target"]
    lines[-3] += f" (target <= {t['median_abs_error']:.0%}, <= {t['max_abs_error']:.0%})"
    return "\n".join(lines)


def compare_text(comparison: dict) -> str:
    """:meth:`Comparison.to_text` of a stored comparison, held-out rows marked."""
    rows = tuple(ComparisonRow(**r) for r in comparison["rows"])
    lines = Comparison(rows, comparison["baseline"]).to_text().splitlines()
    return "\n".join(line + ("  held out" if any(line.startswith(h) for h in HELD_OUT) else "")
                      for line in lines[:-1])


# ---- --explain: where the ratio errors come from ------------------------------------------------------
def _boot_medians(ratios, *, draws: int = 10_000, seed: int = 0) -> np.ndarray:
    """Medians of ``draws`` resamplings (with replacement) of per-round ratios. The seed is fixed, so
    every configuration of a record draws the same rounds: a round is one stretch of the machine's
    load, and the rounds are resampled jointly."""
    ratios = np.asarray(ratios, dtype=float)
    picks = np.random.default_rng(seed).integers(0, len(ratios), (draws, len(ratios)))
    return np.median(ratios[picks], axis=1)


def ratio_interval(ratios, *, level: float = 0.90) -> tuple[float, float]:
    """The ``level`` bootstrap interval of the median of per-round ratios: how far the measured
    ratio that a prediction is judged against could move with other rounds of the same run."""
    lo, hi = np.percentile(_boot_medians(ratios), [50 * (1 - level), 50 * (1 + level)])
    return float(lo), float(hi)


def exact_model_misses(record: dict) -> tuple[float, float]:
    """How often a model that predicts every held-out configuration's measured ratio exactly would
    still miss :data:`TARGET` (median, max) against a resampling of the record's rounds: the share
    of bootstrap draws (:func:`_boot_medians`) whose held-out median and max |ratio error| exceed it."""
    errors = []
    for label in HELD_OUT:
        runs = [m["step_time_s"] / b["step_time_s"]
                for m, b in zip(record["measured"][label], record["baseline_beside"][label])]
        errors.append(np.abs(np.median(runs) / _boot_medians(runs) - 1))
    errors = np.asarray(errors)
    return (float(np.mean(np.median(errors, axis=0) > TARGET["median_abs_error"])),
            float(np.mean(errors.max(axis=0) > TARGET["max_abs_error"])))


def _parts_ms(scenario_) -> str:
    """The predicted step's parts, milliseconds (sync: the slowest worker's step; PS: one worker's update)."""
    if scenario_.strategy.name == "parameter_server":
        c = async_costs(step_costs(scenario_), plan(scenario_))
        return (f"worker compute {float(c.compute_s) * 1e3:.2f}, push {float(c.push_s) * 1e3:.2f}, pull "
                f"{float(c.pull_s) * 1e3:.2f}, PS busy per transfer {float(c.ps_service_s) * 1e3:.2f}")
    p = step_model(scenario_).parts
    ms = {k: float(np.ravel(getattr(p, k))[0]) * 1e3 for k in
          ("overhead_s", "dispatch_s", "forward_s", "backward_s", "exposed_comm_s", "metric_comm_s", "update_s")}
    return (f"host {ms['overhead_s']:.2f} + dispatch {ms['dispatch_s']:.2f} + compute "
            f"{ms['forward_s'] + ms['backward_s']:.2f} + exposed all-reduce {ms['exposed_comm_s']:.2f} + "
            f"metrics {ms['metric_comm_s']:.2f} + update {ms['update_s']:.2f}")


def explain(record: dict) -> str:
    """Where each configuration's ratio error comes from, for a stored record (nothing rewritten).

    ``bias`` is the predicted one-device step over the median of every one-device run of the record
    (the baselines beside every configuration and the one_device configuration itself): every
    predicted ratio divides by that prediction, so a bias b multiplies every ratio by 1 / b, and
    "without the bias" is the ratio error had the one-device step been predicted exactly."""
    cal, table, predicted = judge(record, CALIBRATION_DEVICES, CALIBRATION_WORKERS)
    settings = SimpleNamespace(**record["settings"])
    one_device = [r["step_time_s"] for runs in record["baseline_beside"].values() for r in runs]
    one_device += [r["step_time_s"] for r in record["measured"]["one_device"]]
    measured_one = float(np.median(one_device))
    bias = predicted[0].summary.step_time_s / measured_one
    stored = record["calibration"]
    curve = float(np.interp(settings.global_batch, stored["batches"], stored["step_time_s"]))
    lines = [f"one-device step: predicted {predicted[0].summary.step_time_s * 1e3:.2f} ms, the micro-benchmark "
             f"curve at {settings.global_batch} examples {curve * 1e3:.2f} ms, the record's {len(one_device)} "
             f"one-device runs {measured_one * 1e3:.2f} ms (median): bias {bias - 1:+.1%}", ""]
    with _presets(cal):
        for (label, *cfg), row in zip(CONFIGS[1:], table.rows[1:]):
            runs = [m["step_time_s"] / b["step_time_s"]
                    for m, b in zip(record["measured"][label], record["baseline_beside"][label])]
            lo, hi = ratio_interval(runs)
            lines += [f"{label}{'  (held out)' if label in HELD_OUT else ''}: "
                      f"{_parts_ms(scenario(*cfg, settings, calibrated=True, machine_cores=record['cores']))}",
                      f"    ratio predicted {row.predicted_ratio:.2f}, measured {row.measured_ratio:.2f} "
                      f"(90 % over rounds: {lo:.2f}-{hi:.2f}, errors {row.predicted_ratio / hi - 1:+.0%} to "
                      f"{row.predicted_ratio / lo - 1:+.0%}): error {row.ratio_error:+.1%}, without the one-device "
                      f"bias {(1 + row.ratio_error) * bias - 1:+.1%}"]
    misses = exact_model_misses(record)
    lines += ["", f"a model exact on every held-out measured ratio would miss the target's median in {misses[0]:.0%} "
                  f"and its max in {misses[1]:.0%} of resamplings of these rounds"]
    return "\n".join(lines + [*_held_out_points(record, cal), *_oversubscribed(record, cal, table, predicted)])


def _oversubscribed(record: dict, cal: Calibration, table: Comparison, predicted: list[Result]) -> list[str]:
    """The held-out MultiWorkerMirrored rows predicted with the rule "P processes on C cores slow every
    collective by P / C" (the gRPC link's latency times it, its bandwidth over it), for the record."""
    settings = SimpleNamespace(**record["settings"])
    lines = []
    for (label, strategy, workers, devices), row in zip(CONFIGS, table.rows):
        if strategy != "multi_worker_mirrored" or workers in CALIBRATION_WORKERS:
            continue
        k = max(1.0, workers / record["cores"])
        slowed = replace(cal, inter=replace(cal.inter, latency_s=cal.inter.latency_s * k,
                                            bandwidth_Bps=cal.inter.bandwidth_Bps / k))
        with _presets(slowed):
            step = predict(scenario(strategy, workers, devices, settings, calibrated=True,
                                    machine_cores=record["cores"])).summary.step_time_s
        ratio = step / predicted[0].summary.step_time_s
        lines.append(f"{label} with every collective slowed by {workers}/{record['cores']}: ratio {ratio:.2f}, "
                     f"error {ratio / row.measured_ratio - 1:+.1%}")
    return lines


def _held_out_points(record: dict, cal: Calibration) -> list[str]:
    """The micro-benchmark points of the counts the fit never saw, against what it extrapolates."""
    stored, cores = record["calibration"], record["cores"]
    inter = stored["inter"]
    lines = []
    for workers in sorted(set(inter["ranks"]) - set(CALIBRATION_WORKERS)):
        keep = [i for i, n in enumerate(inter["ranks"]) if n == workers]
        points = [[inter[k][i] for i in keep] for k in ("ranks", "message_bytes", "time_s")]
        ring = type(cal.inter)(cal.inter.latency_s, cal.inter.bandwidth_Bps, "ring", *points).predicted_s()
        measured = np.asarray(points[2])
        lines.append(f"all-reduce across {workers} processes ({len(keep)} sizes, 4 KiB-4 MiB), measured / the "
                     f"{list(CALIBRATION_WORKERS)}-process fit's ring: "
                     + " ".join(f"{x:.2f}" for x in measured / ring)
                     + f"; / ring x {workers}/{cores} processes per core: "
                     + " ".join(f"{x:.2f}" for x in measured / (ring * max(1.0, workers / cores))))
    counts, tiny = stored["replica_counts"], stored["replica_step_time_s"]
    seen = [i for i, n in enumerate(counts) if n <= max(CALIBRATION_DEVICES)]
    if len(seen) >= 2 and len(counts) > len(seen):
        local_slope = np.polyfit([counts[i] for i in seen], [tiny[i] for i in seen], 1)[0]
        every_slope = np.polyfit(counts, tiny, 1)[0]
        lines.append(f"tiny-batch Mirrored step per added replica: {local_slope * 1e3:.2f} ms over counts "
                     f"{[counts[i] for i in seen]} (what the fit sees), {every_slope * 1e3:.2f} ms over {counts}")
    return lines


def rereport(path: Path) -> dict:
    """Re-evaluate a stored JSON with today's code and rewrite it; the record."""
    record = json.loads(path.read_text())
    record |= evaluate(record)
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True)
    record["reported"] = {"command": shlex.join([sys.executable, *sys.argv]),
                          "written": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                          "git_commit_of_the_report": commit.stdout.strip()}
    path.write_text(json.dumps(record, indent=1, default=float))
    return record


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", default="mnist_mlp", help="mnist_mlp, mnist_small_cnn or mnist_softmax")
    parser.add_argument("--global-batch", type=int, default=192, help="divisible by 1, 2, 3 and 4 replicas")
    parser.add_argument("--steps", type=int, default=300, help="steps per run (PS: updates per worker)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0, help="seeds the order of configurations in each round")
    parser.add_argument("--out", type=Path, help="JSON file (default: data/measurements/bench_real_<...>.json)")
    parser.add_argument("--report", type=Path, nargs="+", metavar="FILE",
                        help="only re-evaluate these stored JSONs with today's code and rewrite them (no TF run)")
    parser.add_argument("--explain", type=Path, nargs="+", metavar="FILE",
                        help="only print where the ratio errors of these stored JSONs come from (no rewrite)")
    args = parser.parse_args()
    if args.explain:
        for path in args.explain:
            print(f"== {path}\n{explain(json.loads(path.read_text()))}\n")
        return 0
    if args.report:
        for path in args.report:
            print(f"== {path}\n{text(rereport(path))}\n")
        return 0

    started = time.time()
    rng = np.random.default_rng(args.seed)
    measured: dict[str, list] = {label: [] for label, *_ in CONFIGS}
    beside: dict[str, list] = {label: [] for label, *_ in CONFIGS}  # one-device run next to each run
    local_rounds, collective_rounds, ps_rounds = [], [], []
    work = Path(tempfile.mkdtemp(prefix="bench-real-"))
    jobs = [("calibrate", None)] + [(label, cfg) for label, *cfg in CONFIGS]
    baseline_cfg = CONFIGS[0][1:]
    for r in range(args.rounds):
        for i in rng.permutation(len(jobs)):
            label, cfg = jobs[i]
            if cfg is None:
                local_rounds.append(measure_local(args.workload, work / f"local{r}"))
                for w in DEFAULT_WORKERS:
                    collective_rounds.append(measure_collective(args.workload, work / f"coll{r}-{w}", workers=w))
                ps_rounds.append(measure_ps(args.workload))
            else:
                # Load drifts within seconds on a shared machine: measure the
                # baseline right before every configuration, in a random order.
                pair = [(beside, baseline_cfg), (measured, cfg)]
                for store, c in (pair if rng.random() < 0.5 else pair[::-1]):
                    store[label].append(run(scenario(*c, args, calibrated=False), progress=False, timeout_s=600))
            print(f"round {r + 1}/{args.rounds}: {label} done ({time.time() - started:.0f} s)", file=sys.stderr)

    rounds = {"local": local_rounds, "collective": collective_rounds, "ps": ps_rounds}
    first = measured["one_device"][0]
    record = {
        "what": "predicted vs measured step times of real tf.distribute runs on this machine (CPU)",
        "command": shlex.join([sys.executable, *sys.argv]),
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "device": first.meta.get("device"),
        "cpu_model": cpu_model(),
        "cores": os.cpu_count(),
        "tf_version": first.meta.get("tf_version"),
        "keras_version": first.meta.get("keras_version"),
        "python": platform.python_version(),
        "note": "shared machine under load from other jobs; judge ratios to the one-device run of the same round",
        "settings": vars(args) | {"out": str(args.out) if args.out else None},
        "calibration": fit(local_rounds, collective_rounds, ps_rounds, workload=args.workload).to_dict(),
        "rounds": rounds,
        "measured": {label: [_summary(r) for r in runs] for label, runs in measured.items()},
        "baseline_beside": {label: [_summary(r) for r in runs] for label, runs in beside.items()},
        "elapsed_s": time.time() - started,
    }
    record |= evaluate(record)
    print(f"\n{args.workload}, global batch {args.global_batch}, {args.steps} steps, {args.rounds} rounds, "
          f"{cpu_model()} ({os.cpu_count()} cores)")
    print(text(record))
    out = args.out or REPO / "data" / "measurements" / (
        f"bench_real_{args.workload}_{dt.date.today().isoformat()}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=1, default=float))
    print(f"\nwrote {out} ({time.time() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
