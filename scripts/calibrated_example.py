"""Give an example scenario this machine's measured costs, from a stored bench_real record.

    .venv/bin/python scripts/calibrated_example.py data/measurements/bench_real_mnist_mlp_2026-11-27_run11.json \\
        examples/scenarios/localhost_parameter_server_async_mnist.json

Fits the record's micro-benchmarks on its calibration counts, as ``bench_real.py`` judges it
(``judge``), and writes the scenario back with the fitted device, both links and the workload's
input cost in place of its own, each field's source and each part's name naming the record. Nothing
else changes. It runs no TensorFlow.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

import bench_real  # noqa: E402

from distsim import Scenario  # noqa: E402

#: The part of a calibrated preset's source that names the machine and the fit's time, replaced by the record.
_HOW = re.compile(r"distsim\.real\.calibrate\(\) on [^,]*, [0-9T:.+-]+")


def calibrated(scenario: Scenario, record_path: Path) -> dict:
    """``scenario`` as JSON data, its device, links and workload fitted from the record at ``record_path``."""
    record = json.loads(record_path.read_text())
    cal, _, _ = bench_real.judge(record, bench_real.CALIBRATION_DEVICES, bench_real.CALIBRATION_WORKERS)
    with bench_real._presets(cal):
        for field, preset in (("cluster.device", bench_real.DEVICE_PRESET),
                              ("cluster.intra_link", bench_real.INTRA_LINK_PRESET),
                              ("cluster.inter_link", bench_real.INTER_LINK_PRESET),
                              ("workload", bench_real.workload_preset_name(cal.workload))):
            scenario = scenario.replace(field, preset)
    data = scenario.to_dict()
    name = record_path.relative_to(REPO) if record_path.is_relative_to(REPO) else record_path
    where = f"micro-benchmarks of {name}, fitted on its calibration counts as bench_real.py judges"
    for part in (data["cluster"]["device"], data["cluster"]["intra_link"], data["cluster"]["inter_link"],
                 data["workload"]):
        part["sources"] = {k: _HOW.sub(where, v) for k, v in part["sources"].items()}
        if part is not data["workload"]:  # its name must stay "<workload>@<machine>" for real runs
            part["name"] += f" ({record_path.stem})"  # not a user's own calibrate() presets of the same name
    return data


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("record", type=Path, help="a stored bench_real_*.json")
    parser.add_argument("scenario", type=Path, help="the scenario JSON to rewrite")
    args = parser.parse_args(argv)
    data = calibrated(Scenario.load(args.scenario), args.record.resolve())
    args.scenario.write_text(json.dumps(data, indent=2) + "\n")
    print(f"wrote {args.scenario}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
