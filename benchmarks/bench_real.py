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
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from distsim.results.compare import compare
from distsim.engines.prediction import predict
from distsim.real.calibrate import (
    DEVICE_PRESET,
    INTER_LINK_PRESET,
    INTRA_LINK_PRESET,
    DEFAULT_WORKERS,
    fit,
    measure_collective,
    measure_local,
    measure_ps,
    workload_preset_name,
    write_presets,
)
from distsim.real.env import cpu_model
from distsim.real.experiment import run
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


def scenario(strategy: str, workers: int, devices: int, args, calibrated: bool):
    """The configuration as a Scenario: built-in presets to run, calibrated ones to predict."""
    hardware = (
        dict(device=DEVICE_PRESET, workload=workload_preset_name(args.workload),
             intra_link=INTRA_LINK_PRESET, inter_link=INTER_LINK_PRESET)
        if calibrated
        else dict(device="this_machine_core", workload=args.workload)
    )
    # Every worker here runs on this one host: W worker processes (or in-process
    # PS workers) share its cores, cores / W each.
    cores = os.cpu_count() / workers
    # distsim.real's localhost parameter-server cluster runs every task in one process.
    ps_cluster = "in_process" if strategy == "parameter_server" else "processes"
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", default="mnist_mlp", help="mnist_mlp, mnist_small_cnn or mnist_softmax")
    parser.add_argument("--global-batch", type=int, default=192, help="divisible by 1, 2, 3 and 4 replicas")
    parser.add_argument("--steps", type=int, default=300, help="steps per run (PS: updates per worker)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0, help="seeds the order of configurations in each round")
    parser.add_argument("--out", type=Path, help="JSON file (default: data/measurements/bench_real_<...>.json)")
    args = parser.parse_args()

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

    cal = fit(local_rounds, collective_rounds, ps_rounds, workload=args.workload)
    preset_dir = work / "presets"
    write_presets(cal, preset_dir)
    os.environ[PRESET_DIR_ENV] = str(preset_dir)
    predicted = [predict(scenario(*cfg, args, calibrated=True)) for _, *cfg in CONFIGS]
    table = compare(predicted, [measured[label] for label, *_ in CONFIGS],
                    labels=[label for label, *_ in CONFIGS], baseline=0,
                    paired_baselines=[beside[label] for label, *_ in CONFIGS])

    print(f"\n{args.workload}, global batch {args.global_batch}, {args.steps} steps, {args.rounds} rounds, "
          f"{cpu_model()} ({os.cpu_count()} cores)")
    print(f"calibration: overhead {cal.step_overhead_s * 1e3:.2f} ms/step + {cal.replica_dispatch_s * 1e3:.2f} ms "
          f"per replica ({cal.replica_variable_s * 1e3:.2f} ms of it for its variables), "
          f"{cal.compute_s_per_example * 1e6:.1f} us/example, "
          f"input {cal.input_s_per_sample * 1e6:.1f} us/example, "
          f"memory link {cal.intra.latency_s * 1e6:.0f} us + {cal.intra.bandwidth_Bps / 1e9:.2f} GB/s, "
          f"gRPC link {cal.inter.latency_s * 1e6:.0f} us + {cal.inter.bandwidth_Bps / 1e9:.2f} GB/s, "
          f"PS request {cal.ps_request_s * 1e3:.2f} ms\n")
    print(table.to_text())

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
        "comparison": table.to_dict(),
        "calibration": cal.to_dict(),
        "measured": {label: [_summary(r) for r in runs] for label, runs in measured.items()},
        "baseline_beside": {label: [_summary(r) for r in runs] for label, runs in beside.items()},
        "predicted": {label: p.summary.__dict__ for (label, *_), p in zip(CONFIGS, predicted)},
        "elapsed_s": time.time() - started,
    }
    out = args.out or REPO / "data" / "measurements" / (
        f"bench_real_{args.workload}_{dt.date.today().isoformat()}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=1, default=float))
    print(f"\nwrote {out} ({time.time() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
