"""Re-evaluate every stored benchmark in ``data/measurements/`` with today's code and rewrite it.

Run after any change that moves predicted numbers (engines, presets,
calibration fit)::

    .venv/bin/python scripts/rereport_measurements.py

It runs no TensorFlow: ``benchmarks/bench_network.py --report --date <name>``
for every ``bench_network_<name>.json`` (from its run folder) and
``benchmarks/bench_real.py --report`` on every ``bench_real_*.json`` (from the
stored measurements and calibration medians). ``tests/test_stored_measurements.py``
fails until this has been run and the rewritten JSONs committed; read the
diff of their ``summary`` before committing, and update the figures that
README.md and data/measurements/README.md quote.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MEASUREMENTS = REPO / "data" / "measurements"


def commands() -> list[list[str]]:
    """One report command per stored network run, one for every stored real run."""
    network = [[sys.executable, "benchmarks/bench_network.py", "--report", "--date", p.stem.removeprefix("bench_network_")]
               for p in sorted(MEASUREMENTS.glob("bench_network_*.json"))]
    real = sorted(str(p.relative_to(REPO)) for p in MEASUREMENTS.glob("bench_real_*.json"))
    return network + ([[sys.executable, "benchmarks/bench_real.py", "--report", *real]] if real else [])


def main() -> int:
    for argv in commands():
        print("$", " ".join(argv[1:]), flush=True)
        done = subprocess.run(argv, cwd=REPO)
        if done.returncode:
            return done.returncode
    return 0


if __name__ == "__main__":
    sys.exit(main())
