"""Command line: ``python -m distsim <subcommand>``.

Each subcommand is a small function ``cmd_<name>(args) -> int`` registered in
:func:`build_parser`. Output goes to stdout; errors to stderr with exit code 2.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.metadata
import importlib.util
import json
import platform
import sys

from distsim import __version__
from distsim.validation import InputError, output_path
from distsim.datasets.mnist import MNIST_SHA256, REGENERATE_HINT, default_mnist_path, file_sha256, tfds_data_dir

#: Packages whose versions ``info`` reports (distribution names).
_REPORTED_PACKAGES = (
    "numpy",
    "tensorflow",
    "tf-keras",
    "keras",
    "tensorflow-datasets",
    "matplotlib",
    "ipywidgets",
    "jupyterlab",
)


def _installed_version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _mnist_status() -> str:
    """The file's checksum decides; decompressing the arrays would add nothing."""
    path = default_mnist_path()
    if not path.is_file():
        return f"PROBLEM: not found at {path}. {REGENERATE_HINT}"
    if file_sha256(path) != MNIST_SHA256:
        return f"PROBLEM: {path} is corrupt or truncated (wrong SHA-256). {REGENERATE_HINT}"
    return f"ok ({path}, sha256 {MNIST_SHA256[:12]}...)"


def collect_info() -> dict[str, object]:
    """Versions and data status, without importing TensorFlow."""
    tfds_dir = tfds_data_dir() / "mnist"
    return {
        "distsim": __version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "packages": {name: _installed_version(name) for name in _REPORTED_PACKAGES},
        "mnist_npz": _mnist_status(),
        "tfds_mnist": f"built ({tfds_dir})" if tfds_dir.is_dir() else "not built (make data)",
    }


def cmd_info(args: argparse.Namespace) -> int:
    info = collect_info()
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    for key, value in info.items():
        if isinstance(value, dict):
            print(f"{key}:")
            for name, version in value.items():
                print(f"  {name:<22} {version}")
        else:
            print(f"{key:<24} {value}")
    return 0


def _summary_rows(result) -> list[tuple[str, str]]:
    s = result.summary
    rows = [
        ("scenario", result.scenario.name if result.scenario is not None and result.scenario.name else "-"),
        ("strategy", f"{result.strategy} ({result.meta.get('tf_class', '')})"),
        ("replicas", str(result.num_replicas)),
        ("global batch", str(result.global_batch)),
        ("algorithm", result.meta.get("algorithm", "-")),
        ("mode / prefetch", f"{result.meta.get('mode', '-')} / {result.meta.get('prefetch', '-')}"),
        ("step time", f"{s.step_time_s * 1e3:.3f} ms"),
        ("throughput", f"{s.throughput_samples_per_s:,.1f} examples/s"),
        ("speedup, weak scaling", f"{s.speedup:.3f} x one device running one replica's batch "
                                  f"({result.scenario.per_replica_batch} examples)"),
        ("speedup, strong scaling", f"{s.strong_speedup:.3f} x one device running the global batch "
                                    f"({result.global_batch} examples)"),
        ("scaling efficiency", f"{s.efficiency:.1%} (weak speedup / replicas)"),
        ("exposed communication", f"{s.comm_fraction:.1%} of a step"),
        ("steps per epoch", f"{s.steps_per_epoch:,}"),
        ("epoch time", f"{s.epoch_time_s:.2f} s"),
        ("memory per replica", f"{s.memory_bytes_per_replica / 1e6:,.1f} MB of "
                               f"{result.scenario.cluster.device.memory_bytes / 1e9:,.1f} GB (a lower bound)"),
    ]
    if s.mean_staleness is not None:
        rows.append(("mean staleness", f"{s.mean_staleness:.2f} updates"))
    if s.bottleneck is not None:
        rows.append(("bottleneck", f"{s.bottleneck} ({s.bottleneck_share:.0%} of the step)"))
    if result.meta.get("warning"):
        rows.append(("warning", result.meta["warning"]))
    if result.meta.get("caveat"):
        rows.append(("caveat", result.meta["caveat"]))
    return rows


def cmd_predict(args: argparse.Namespace) -> int:
    from distsim.engines.prediction import predict
    from distsim.scenario import Scenario

    trace = None if args.trace is None else output_path(args.trace, "trace file", "--trace")  # before the work
    result = predict(Scenario.load(args.scenario))
    if trace is not None:
        result.trace.save_chrome_trace(trace)
    if args.json:
        out = {
            "scenario": result.scenario.name,
            "strategy": result.strategy,
            "num_replicas": result.num_replicas,
            "global_batch": result.global_batch,
            "summary": dataclasses.asdict(result.summary),
            "meta": result.meta,
        }
        print(json.dumps(out, indent=2, sort_keys=True))
        return 0
    for key, value in _summary_rows(result):
        print(f"{key:<24} {value}")
    if args.trace:
        print(f"{'trace':<24} {args.trace} (open in https://ui.perfetto.dev)")
    return 0


def _parse_value(text: str):
    """A ``--set`` value as JSON would read it: an integer, a number, true,
    false, null, or else the text itself (a preset name, a choice)."""
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:  # not a number, or an integer of more than 4,300 digits (the rule then refuses it)
            pass
    return {"true": True, "false": False, "null": None}.get(text.lower(), text)


def _int_list(option: str, text: str) -> list[int]:
    allowed = "a comma-separated list of integers, e.g. 1,2,4,8"
    if len(text) > 10_000:
        raise InputError(option, text, allowed + " (at most 10,000 characters)")
    try:
        return [int(v) for v in text.split(",")]
    except ValueError:
        raise InputError(option, text, allowed) from None


#: Options of ``sweep`` that set a grid field, and the field.
_OPTION_FIELDS = {"--workers": "cluster.num_workers", "--devices": "cluster.devices_per_worker"}


def _grid(args: argparse.Namespace, scenario) -> dict[str, list]:
    """The sweep's grid from ``--workers``, ``--devices`` and every ``--set``;
    a field given twice is refused, never silently overwritten."""
    over: dict[str, list] = {}
    given = {"--workers": args.workers, "--devices": args.devices}
    for option, text in given.items():
        if text is not None:
            over[_OPTION_FIELDS[option]] = _int_list(option, text)
    if args.devices is None and args.workers is None:
        default = "1,2,4,8" if scenario.cluster.num_workers == 1 else str(scenario.cluster.devices_per_worker)
        over["cluster.devices_per_worker"] = _int_list("--devices", default)
    options = {field: option for option, field in _OPTION_FIELDS.items() if given[option] is not None}
    for item in args.set or []:
        path, sep, values = item.partition("=")
        if not sep or not path or not values:
            raise InputError("--set", item, "PATH=V1,V2,... e.g. training.global_batch=64,256")
        if path in over:
            earlier = options.get(path, f"an earlier --set {path}=...")
            raise InputError("--set", item, f"a field not given already ({path} is set by {earlier}; give its "
                             "values once)")
        over[path] = [_parse_value(v) for v in values.split(",")]
    return over


def cmd_sweep(args: argparse.Namespace) -> int:
    from distsim.engines import sweep
    from distsim.scenario import Scenario

    scenario = Scenario.load(args.scenario)
    table = sweep(scenario, _grid(args, scenario))
    if args.json:
        print(json.dumps(table.to_dict(), indent=1, sort_keys=True))
    else:
        print(table.to_text())
    return 0


class OneLineParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose usage errors are one line (``error: ...``, exit 2)."""

    def error(self, message: str):
        self.exit(2, f"error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="python -m distsim",
        description="Simulate, run and compare data-parallel training with tf.distribute.",
    )
    parser.add_argument("--version", action="version", version=f"distsim {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="<command>", required=True)

    info = sub.add_parser("info", help="versions of the stack and status of the offline MNIST data")
    info.add_argument("--json", action="store_true", help="print JSON instead of a table")
    info.set_defaults(func=cmd_info)

    pred = sub.add_parser("predict", help="predict step time, speedup and a timeline for a scenario JSON")
    pred.add_argument("scenario", help="scenario JSON file (see examples/scenarios/)")
    pred.add_argument("--json", action="store_true", help="print JSON with stable keys instead of a table")
    pred.add_argument("--trace", metavar="OUT.json", help="write the timeline as Chrome-trace JSON (Perfetto)")
    pred.set_defaults(func=cmd_predict)

    sw = sub.add_parser("sweep", help="speedup and efficiency table over device counts (closed-form model)")
    sw.add_argument("scenario", help="scenario JSON file")
    sw.add_argument("--devices", metavar="N,N,...", help="devices per worker to sweep (default 1,2,4,8)")
    sw.add_argument("--workers", metavar="N,N,...", help="workers to sweep")
    sw.add_argument("--set", action="append", metavar="PATH=V1,V2", help="also sweep a scenario field (repeatable)")
    sw.add_argument("--json", action="store_true", help="print JSON instead of a table")
    sw.set_defaults(func=cmd_sweep)
    return parser


def run_command(parser: argparse.ArgumentParser, argv: list[str] | None) -> int:
    """Parse ``argv`` and run the chosen ``cmd_*``; bad input (an
    :class:`InputError`) becomes one ``error: ...`` line and exit code 2."""
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def main(argv: list[str] | None = None) -> int:
    return run_command(build_parser(), argv)


if __name__ == "__main__":
    sys.exit(main())
