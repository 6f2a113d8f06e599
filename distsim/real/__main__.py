"""``python -m distsim.real``: run real tf.distribute experiments from the command line.

Subcommands:

* ``worker``: run one task of an experiment in this process. This is what
  the localhost launcher starts for every task, and it is also how one task
  of a real multi-machine cluster is run, with a TF_CONFIG you supply::

      python -m distsim.real worker --tf-config '<json>' --scenario S.json

* ``run``: launch a whole experiment on this machine (one process per task)
  and print its measured summary.
* ``calibrate``: time the micro-benchmarks and write a "this machine" preset.
* ``netlab``: predict one configuration, then run it with every task on its
  own emulated host whose NIC runs at a given rate; print both.
* ``tpu``: say in one line whether a TPU is attached.

TensorFlow is imported only after the arguments are parsed, so ``--help`` is
fast. Exit codes: 0 success, 2 bad input, 3 no TPU.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import signal
import sys
import time
from pathlib import Path

from distsim.cli import OneLineParser, run_command
from distsim.validation import Integer, Number, checked_path, output_path, read_json, write_json
from distsim.real.protocol import EXIT_NO_TPU, PARENT_PID_ENV, PROGRESS_PREFIX, NoTPUError

_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """Ask Linux to SIGKILL this process when its launcher dies, even by SIGKILL.

    Only for processes started by :mod:`distsim.real.launcher` (which sets
    ``DISTSIM_PARENT_PID``). A no-op elsewhere and on other systems.
    """
    parent = os.environ.get(PARENT_PID_ENV)
    if not parent or not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != int(parent):  # the launcher died before prctl took effect
        os._exit(1)


class _ProgressPrinter:
    """Prints ``distsim-progress <done> <total> <loss>`` at most every ``every_s``
    seconds, and always at the end of each epoch of ``steps_per_epoch`` steps."""

    def __init__(self, steps_per_epoch: int, every_s: float = 0.5) -> None:
        self.steps_per_epoch = steps_per_epoch
        self.every_s = every_s
        self._last = 0.0

    def __call__(self, done: int, total: int, loss: float) -> None:
        now = time.monotonic()
        if done % self.steps_per_epoch == 0 or now - self._last >= self.every_s:
            self._last = now
            print(f"{PROGRESS_PREFIX} {done} {total} {loss:.6g}", flush=True)


def _load_plan(args: argparse.Namespace):
    """``(plan, scenario or None)`` from ``--plan`` or ``--scenario``."""
    from distsim.real.experiment import plan_from_scenario_file
    from distsim.real.plan import RunPlan

    if args.plan:
        return RunPlan.load(args.plan), None
    return plan_from_scenario_file(args.scenario)


def cmd_worker(args: argparse.Namespace) -> int:
    die_with_parent()
    from distsim.real.tfconfig import validate_tf_config

    every_s = Number(0, 3_600, unit="seconds")("--progress-every-s", args.progress_every_s)
    out = None if args.out is None else output_path(args.out, "result file", "--out")
    plan, scenario = _load_plan(args)
    tf_config = validate_tf_config(args.tf_config) if args.tf_config is not None else None
    if tf_config is None and os.environ.get("TF_CONFIG"):
        tf_config = validate_tf_config(os.environ["TF_CONFIG"])
    if plan.strategy == "parameter_server" and tf_config:
        plan = plan.with_(ps_cluster="processes")  # a TF_CONFIG means one process per task
    if plan.strategy == "parameter_server" and tf_config and tf_config["task"]["type"] in ("worker", "ps"):
        os.environ["TF_CONFIG"] = json.dumps(tf_config)
        from distsim.real.env import prepare_environment
        from distsim.real.scripts import PS_SCRIPT, load_script

        prepare_environment()
        load_script(PS_SCRIPT).serve()  # until killed
        return 0
    from distsim.real.runners import run_plan

    try:
        result = run_plan(
            plan,
            tf_config=tf_config,
            on_progress=_ProgressPrinter(plan.steps_per_epoch, every_s),
            backup_dir=args.backup_dir,
            model_dir=args.model_dir,
        )
    except NoTPUError as exc:
        print(str(exc), flush=True)
        return EXIT_NO_TPU
    result.scenario = scenario
    if out is not None:
        result.save(out)
    s = result.summary
    print(
        f"distsim-result {plan.label}: {s.step_time_s * 1e3:.2f} ms/step, "
        f"{s.throughput_samples_per_s:.0f} samples/s ({result.meta.get('task', '')})",
        flush=True,
    )
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from distsim.real.experiment import run
    from distsim.real.plan import RunPlan

    timeout_s = _TIMEOUT("--timeout", args.timeout)
    out = None if args.out is None else output_path(args.out, "result file", "--out")
    plan = RunPlan(
        strategy=args.strategy,
        num_workers=args.workers,
        replicas_per_worker=args.replicas,
        num_ps=args.ps,
        per_replica_batch=args.batch,
        steps_per_epoch=args.steps,
        epochs=args.epochs,
        seed=args.seed,
        ps_loop=args.ps_loop,
    )
    result = run(plan, timeout_s=timeout_s, progress=True)
    if out is not None:
        result.save(out)
    s = result.summary
    print(json.dumps({"plan": plan.label, "step_time_ms": s.step_time_s * 1e3,
                      "throughput_samples_per_s": s.throughput_samples_per_s,
                      "mean_staleness": s.mean_staleness, "cross_device_op": result.meta.get("cross_device_op"),
                      "device": result.meta.get("device")}, indent=1))
    return 0


def cmd_microbench(args: argparse.Namespace) -> int:
    die_with_parent()
    from distsim.real.tfconfig import validate_tf_config

    out = None if args.out is None else output_path(args.out, "measurements file", "--out")
    spec = read_json(args.spec, "micro-benchmark spec")
    tf_config = validate_tf_config(args.tf_config) if args.tf_config is not None else None
    from distsim.real.microbench import run_spec

    measured = run_spec(spec, tf_config)
    if out is not None:
        write_json(out, measured, what="measurements file")
    print("distsim-microbench done", flush=True)
    return 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    from distsim.real.calibrate import calibrate

    repeats = Integer(1, 100)("--repeats", args.repeats)
    out = None if args.out is None else output_path(args.out, "calibration file", "--out")
    preset_dir = None if args.preset_dir is None else checked_path(args.preset_dir, "preset folder", "--preset-dir")
    cal = calibrate(workload=args.workload, repeats=repeats, out=out, preset_dir=preset_dir, progress=True)
    print(json.dumps(cal.to_dict(), indent=1))
    return 0


def cmd_netlab(args: argparse.Namespace) -> int:
    import warnings

    from distsim.real.experiment import EmulationUnavailable
    from distsim.real.netlab import RATE_MBIT, lab_hardware, lab_scenario, run_point
    from distsim.scenario import limits
    from distsim.real.network import congestion_control_rule, emulation_from_scenario
    from distsim.real.plan import WORKLOAD_MODELS
    from distsim.validation import OneOf, Optional

    workload = OneOf(tuple(sorted(WORKLOAD_MODELS)))("--workload", args.workload)
    workers = Integer(1, 16)("--workers", args.workers)
    rate = RATE_MBIT("--rate-mbit", args.rate_mbit)  # before any host is built
    steps = Integer(3, 10_000)("--steps", args.steps)
    straggler = Optional(Number(limits.MIN_CORES, limits.MAX_CORES, unit="cores"), "no straggler")(
        "--straggler-cores", args.straggler_cores)
    timeout_s = _TIMEOUT("--timeout", args.timeout)
    congestion = congestion_control_rule()("--congestion-control", args.congestion_control)
    hardware = lab_hardware()
    if not hardware.calibrated:
        print("note: this machine is not calibrated (python -m distsim.real calibrate); predicting with the "
              "built-in presets", file=sys.stderr)
    scenario = lab_scenario(args.strategy, workers, rate, workload=workload, steps=steps,
                            straggler_cores=straggler, hardware=hardware)
    emulation = emulation_from_scenario(scenario, args.network, congestion)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", EmulationUnavailable)
        point = run_point(scenario, emulation=emulation, timeout_s=timeout_s, progress=not args.json)
    for warning in caught:
        print(f"warning: {warning.message}", file=sys.stderr)
    out = point.to_dict() | {"calibrated": hardware.calibrated,
                             "measured_worker_step_s": json.loads(point.measured.meta.get("worker_step_time_s", "{}"))}
    if args.json:
        print(json.dumps(out, indent=1))
    else:
        print(f"{scenario.name}: predicted {out['predicted_step_s'] * 1e3:.1f} ms/step, measured "
              f"{out['measured_step_s'] * 1e3:.1f} ms/step ({out['error']:+.0%}); {out['network']}")
        if out["caveat"]:
            print(f"caveat: {out['caveat']}")
    return 0


#: ``--timeout``: seconds before a launched experiment is killed (a week at most).
_TIMEOUT = Number(1, 7 * 86_400, unit="seconds")


def cmd_tpu(args: argparse.Namespace) -> int:
    from distsim.real.experiment import tpu_status

    available, line = tpu_status()
    print(line)
    return 0 if available else EXIT_NO_TPU


def build_parser() -> argparse.ArgumentParser:
    from distsim.real.plan import PS_LOOPS, STRATEGIES

    parser = OneLineParser(prog="python -m distsim.real", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", metavar="<command>", required=True)

    worker = sub.add_parser("worker", help="run one task of an experiment (localhost or a real cluster)")
    source = worker.add_mutually_exclusive_group(required=True)
    source.add_argument("--scenario", type=Path, help="a distsim Scenario JSON file")
    source.add_argument("--plan", type=Path, help="a distsim.real RunPlan JSON file")
    worker.add_argument("--tf-config", help="this task's TF_CONFIG JSON (default: $TF_CONFIG)")
    worker.add_argument("--out", type=Path, help="write this task's measured Result JSON here")
    worker.add_argument("--backup-dir", type=Path, help="BackupAndRestore folder (resume after a failure)")
    worker.add_argument("--model-dir", type=Path, help="save the final model here (chief keeps it)")
    worker.add_argument("--progress-every-s", type=float, default=0.5,
                        help="least seconds between progress lines (0: every step)")
    worker.set_defaults(func=cmd_worker)

    run = sub.add_parser("run", help="launch a whole experiment on this machine and print its summary")
    run.add_argument("--strategy", choices=STRATEGIES, required=True)
    run.add_argument("--workers", type=int, default=1, help="worker processes / PS workers")
    run.add_argument("--replicas", type=int, default=1, help="devices per worker")
    run.add_argument("--ps", type=int, default=0, help="parameter servers")
    run.add_argument("--batch", type=int, default=64, help="per-replica batch (examples)")
    run.add_argument("--steps", type=int, default=50, help="steps per epoch")
    run.add_argument("--epochs", type=int, default=1)
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--ps-loop", choices=PS_LOOPS, default="fit")
    run.add_argument("--timeout", type=float, default=600.0, help="seconds before everything is killed")
    run.add_argument("--out", type=Path, help="write the measured Result JSON here")
    run.set_defaults(func=cmd_run)

    cal = sub.add_parser("calibrate", help="micro-benchmarks -> a 'this machine' hardware preset")
    cal.add_argument("--repeats", type=int, default=3)
    cal.add_argument("--workload", default="mnist_mlp", help="MNIST workload preset to calibrate with")
    cal.add_argument("--out", type=Path, help="also write the raw and fitted calibration JSON here")
    cal.add_argument("--preset-dir", type=Path,
                     help="where to write the presets (default: $DISTSIM_PRESET_DIR or ~/.config/distsim/presets)")
    cal.set_defaults(func=cmd_calibrate)

    micro = sub.add_parser("microbench", help="one calibration micro-benchmark task (started by calibrate)")
    micro.add_argument("--spec", type=Path, required=True, help="JSON spec written by distsim.real.calibrate")
    micro.add_argument("--tf-config", help="this task's TF_CONFIG JSON (collective part)")
    micro.add_argument("--out", type=Path, help="write the measurements here")
    micro.set_defaults(func=cmd_microbench)

    lab = sub.add_parser("netlab", help="predict, then run, one configuration over emulated NICs of a given rate")
    lab.add_argument("--strategy", choices=("multi_worker_mirrored", "parameter_server"), required=True)
    lab.add_argument("--workers", type=int, default=2, help="worker processes")
    lab.add_argument("--rate-mbit", type=float, required=True, help="every NIC's rate, Mbit/s, each direction")
    lab.add_argument("--workload", default="mnist_mlp", help="MNIST workload preset (mnist_mlp, mnist_mlp_wide, ...)")
    lab.add_argument("--steps", type=int, default=30, help="steps (parameter server: updates per worker)")
    lab.add_argument("--straggler-cores", type=float, help="CPU quota of the last worker, in cores")
    lab.add_argument("--network", choices=("shaped", "namespaces", "localhost"), default="shaped",
                     help="shaped NICs (default), namespaces without a rate, or plain localhost")
    lab.add_argument("--congestion-control", help="TCP congestion control in the hosts' namespaces (e.g. cubic, "
                     "bbr; default: the machine's own, which is left unchanged)")
    lab.add_argument("--timeout", type=float, default=900.0, help="seconds before everything is killed")
    lab.add_argument("--json", action="store_true", help="print one JSON object")
    lab.set_defaults(func=cmd_netlab)

    tpu = sub.add_parser("tpu", help="say whether a TPU is attached")
    tpu.set_defaults(func=cmd_tpu)
    return parser


def main(argv: list[str] | None = None) -> int:
    return run_command(build_parser(), argv)


if __name__ == "__main__":
    sys.exit(main())
