"""Where a parameter server's workers sit in each other's cycle, from one real lab run.

Workers of an asynchronous PS can take turns at its NIC or meet there
(:func:`distsim.rhythm_range_s`), and the benchmark sees only the step time that
results. This runs one network-lab point (:func:`distsim.real.run_point`) and reads
the phase straight from the run's apply times: every update worker ``k`` (``k >= 1``)
applies falls somewhere between two consecutive applies of worker 0, and its phase is
how far along: 0 (or 1) together, 0.5 half a cycle apart, which for two workers is
turns. Printed in order, so a drift over the run shows::

    flock /work/cpu.lock .venv/bin/python benchmarks/phase_ps.py --rate-mbit 200 --steps 14

Needs root for the shaped network, as the lab does; presets as the lab finds them
(``DISTSIM_PRESET_DIR`` to use a benchmark's).
"""

from __future__ import annotations

import sys

import numpy as np

from distsim.cli.commands import OneLineParser
from distsim.engines.asyncrun import rhythm_range_s
from distsim.real import lab_hardware, lab_scenario, run_point
from distsim.validation import InputError


def phases(time_s, worker) -> dict[int, np.ndarray]:
    """For every worker but 0, the phase of each of its applies within worker 0's cycle.

    Args:
        time_s: when each update was applied, seconds, in apply order.
        worker: which worker applied it (0, 1, ...), one per update.

    Returns:
        ``{k: phases}``, each in [0, 1), for the applies of worker ``k`` that fall
        between worker 0's first and last.
    """
    time_s, worker = np.asarray(time_s, dtype=float), np.asarray(worker)
    if time_s.shape != worker.shape:
        raise InputError("worker", f"{worker.size} entries", f"one per apply time ({time_s.size})")
    if not (np.all(np.isfinite(time_s)) and np.all(np.diff(time_s) >= 0)):
        raise InputError("time_s", "not finite and in order", "apply times in apply order (non-decreasing)")
    own = time_s[worker == 0]
    if own.size < 2:
        raise InputError("worker", f"{own.size} update(s) by worker 0", "at least 2 (a cycle to place others in)")
    out = {}
    for k in sorted(set(worker.tolist()) - {0}):
        t = time_s[worker == k]
        t = t[(t >= own[0]) & (t < own[-1])]
        i = np.searchsorted(own, t, side="right") - 1
        out[int(k)] = (t - own[i]) / (own[i + 1] - own[i])
    return out


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate-mbit", type=float, required=True, help="every NIC's rate, Mbit/s")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--workload", default="mnist_mlp_wide")
    parser.add_argument("--steps", type=int, default=14, help="updates per worker")
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
    for k, ph in phases(measured.curve.time_s, measured.staleness.worker).items():
        print(f"worker {k}'s applies in worker 0's cycle: {' '.join(f'{x:.2f}' for x in ph)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
