"""Every stored benchmark in data/measurements/ still says what today's code computes from its runs.

The JSONs hold raw measurements (the runs, the calibration inputs) and the
summary a report computed from them. These tests recompute every summary
offline, the way ``--report`` does (no TensorFlow run), and compare. A
change that moves predicted numbers makes them fail on purpose: run
``python scripts/rereport_measurements.py``, read the diff of the summaries,
update the figures README.md and data/measurements/README.md quote, and
commit the rewritten JSONs.
"""

import json
from pathlib import Path

import pytest
from benchmark_scripts import load

from distsim.real.calibrate import OPTIMIZER_BYTES_PER_PARAM, fit, restrict_rounds, rounds_from_calibration
from distsim.scenario import load_preset
from distsim.validation import InputError

MEASUREMENTS = Path(__file__).resolve().parents[1] / "data" / "measurements"
NETWORK = sorted(MEASUREMENTS.glob("bench_network_*.json"))
REAL = sorted(MEASUREMENTS.glob("bench_real_*.json"))
REREPORT = "stale: run `python scripts/rereport_measurements.py` and commit the rewritten JSONs"

bench_network = load("bench_network")
bench_real = load("bench_real")


def _same(stored, now, path="summary"):
    """Equal structure and equal numbers (relative 1e-6: room for the float noise of the same arithmetic
    on another machine's BLAS, and still a thousand times finer than the 0.1 % the reports print)."""
    if isinstance(stored, dict):
        assert set(stored) == set(now), f"{path}: keys {sorted(stored)} != {sorted(now)}; {REREPORT}"
        for k in stored:
            _same(stored[k], now[k], f"{path}.{k}")
    elif isinstance(stored, list):
        assert len(stored) == len(now), f"{path}: length; {REREPORT}"
        for i, (a, b) in enumerate(zip(stored, now)):
            _same(a, b, f"{path}[{i}]")
    elif isinstance(stored, float):
        assert now == pytest.approx(stored, rel=1e-6, abs=1e-12), f"{path}: stored {stored}, now {now}; {REREPORT}"
    else:
        assert stored == now, f"{path}: stored {stored!r}, now {now!r}; {REREPORT}"


def test_every_stored_json_is_a_known_benchmark():
    # A new kind of stored file needs its own re-evaluation below (and in scripts/rereport_measurements.py).
    assert set(MEASUREMENTS.glob("*.json")) == set(NETWORK) | set(REAL)
    assert len(NETWORK) >= 4 and len(REAL) >= 6


@pytest.mark.parametrize("path", NETWORK, ids=lambda p: p.stem)
def test_network_summary_matches_todays_code(path, monkeypatch):
    monkeypatch.delenv("DISTSIM_PRESET_DIR", raising=False)  # bench_network.hardware() sets it
    stored = json.loads(path.read_text())
    now = bench_network.evaluate(bench_network.State(MEASUREMENTS / path.stem))
    _same(stored["summary"], now["summary"])
    _same(stored["cells"], now["cells"], "cells")


@pytest.mark.parametrize("path", REAL, ids=lambda p: p.stem)
def test_real_summary_matches_todays_code(path):
    stored = json.loads(path.read_text())
    now = bench_real.evaluate(stored)
    for key in ("summary", "comparison", "predicted"):
        _same(stored[key], now[key], key)


@pytest.mark.parametrize("path", [p for p in REAL if "replica_variable_s" in json.loads(p.read_text())["calibration"]],
                         ids=lambda p: p.stem)
def test_the_stored_medians_refit_to_the_stored_calibration(path):
    # The stored calibration was fitted live from every round's raw numbers;
    # --report refits it from the stored per-point medians. The two must agree,
    # or the held-out figures judge a calibration the run never had. (A
    # deliberate change to fit() breaks this too: the stored fit is history.)
    cal = json.loads(path.read_text())["calibration"]
    local, collective, ps = rounds_from_calibration(cal)
    refit = fit(local, collective, ps, workload=cal["workload"], physical_cores=cal["physical_cores"]).to_dict()
    for key in ("step_overhead_s", "replica_dispatch_s", "replica_variable_s", "compute_s_per_example",
                "efficiency"):
        # rel 1e-9: the same arithmetic; the one difference is lstsq on
        # medians of one round, not of five (equal values).
        assert refit[key] == pytest.approx(cal[key], rel=1e-9), key
    # Since the engine prices the PS's apply of the gradient, fit() takes it
    # out of the request (half per transfer): by hand from the stored value.
    values, _ = load_preset("workload", cal["workload"])
    apply_s = values["num_params"] * OPTIMIZER_BYTES_PER_PARAM / cal["memory_Bps"]
    assert refit["ps_request_s"] == pytest.approx(max(cal["ps_request_s"] - apply_s / 2, 0.0), rel=1e-9, abs=1e-12)
    for link in ("intra", "inter"):
        for key in ("latency_s", "bandwidth_Bps"):
            assert refit[link][key] == pytest.approx(cal[link][key], rel=1e-9), (link, key)


def test_held_out_counts_are_not_in_the_calibration_fit():
    # By hand: bench_real's calibration sees 2 devices and 2 workers only, so
    # the tiny-batch curve keeps counts 1 and 2, the in-process all-reduce its
    # 2-rank points, the cross-process fit its 2-worker points.
    cal = json.loads(REAL[-1].read_text())["calibration"]
    local, collective, _ = rounds_from_calibration(cal)
    assert sorted(local[0]["allreduce_s"]) == [2, 4] and sorted(r["workers"] for r in collective) == [2, 3]
    kept_local, kept_collective = restrict_rounds(local, collective, devices=bench_real.CALIBRATION_DEVICES,
                                                  workers=bench_real.CALIBRATION_WORKERS)
    assert list(kept_local[0]["allreduce_s"]) == [2]
    assert kept_local[0]["replica_counts"] == [1, 2]
    assert kept_local[0]["replica_step_time_s"] == cal["replica_step_time_s"][:2]
    assert [r["workers"] for r in kept_collective] == [2]
    assert set(bench_real.HELD_OUT) == {"mirrored x4", "multi_worker_mirrored 3 workers", "parameter_server 2w+1ps"}
    with pytest.raises(InputError, match="workers"):
        restrict_rounds(local, collective, devices=(2,), workers=(5,))
