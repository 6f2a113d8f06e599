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

import numpy as np
import pytest
from benchmark_scripts import load

from distsim.real.calibrate import OPTIMIZER_BYTES_PER_PARAM, fit, restrict_rounds, rounds_from_calibration
from distsim.real.protocol import TINY_BATCH
from distsim.scenario import load_preset
from distsim.validation import InputError

MEASUREMENTS = Path(__file__).resolve().parents[1] / "data" / "measurements"
NETWORK = sorted(MEASUREMENTS.glob("bench_network_*.json"))
REAL = sorted(MEASUREMENTS.glob("bench_real_*.json"))
SHARE = sorted(MEASUREMENTS.glob("collective_share_*.json"))
OVERLAP = sorted(MEASUREMENTS.glob("dispatch_overlap_*.json"))
PS_OVERLAP = sorted(MEASUREMENTS.glob("ps_overlap_*.json"))
#: Records fitted from this date on take the tiny batch's compute out of the dispatch (fit() since 2026-11-27).
DISPATCH_TURNS_FROM = "2026-11-27T09"
REREPORT = "stale: run `python scripts/rereport_measurements.py` and commit the rewritten JSONs"

bench_network = load("bench_network")
bench_real = load("bench_real")
bench_collective_share = load("bench_collective_share")
bench_dispatch_overlap = load("bench_dispatch_overlap")
bench_ps_overlap = load("bench_ps_overlap")


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
    assert set(MEASUREMENTS.glob("*.json")) == set(NETWORK) | set(REAL) | set(SHARE) | set(OVERLAP) | set(PS_OVERLAP)
    assert len(NETWORK) >= 4 and len(REAL) >= 6 and len(SHARE) >= 1 and len(OVERLAP) >= 1 and len(PS_OVERLAP) >= 1


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


@pytest.mark.parametrize(("script", "path"), [(bench_collective_share, p) for p in SHARE]
                         + [(bench_dispatch_overlap, p) for p in OVERLAP] + [(bench_ps_overlap, p) for p in PS_OVERLAP],
                         ids=lambda x: getattr(x, "stem", None) or x.__name__)
def test_a_micro_benchmark_summary_matches_its_rounds(script, path):
    # Each script's summarize() rewrites from the stored rounds what it stored (its logic is checked by hand below).
    stored = json.loads(path.read_text())
    now = script.summarize(stored["rounds"])
    _same({k: stored[k] for k in now}, now)


def test_collective_share_bound_by_hand():
    # Pinned twice as slow at one size: max(1, 2u) = 2, u <= 1. Pinned faster everywhere: u <= 1/2.
    def rounds(pinned_factor):
        return [{"placement": "unpinned", "allreduce_s": {"4": 1.0, "8": 2.0}},
                {"placement": "pinned", "allreduce_s": {"4": 1.0 * pinned_factor[0], "8": 2.0 * pinned_factor[1]}}]
    assert bench_collective_share.summarize(rounds((1.0, 2.0)))["u_at_most"] == 1.0
    assert bench_collective_share.summarize(rounds((0.7, 0.9)))["u_at_most"] == 0.5


def test_dispatch_overlap_summary_by_hand():
    # Two rounds of 2 batches x counts (1, 2, 4); medians of two values are their means.
    rounds = [{"batches": [16, 1024], "counts": [1, 2, 4], "step_s": [[1.0, 2.0, 4.0], [5.0, 6.0, 8.0]]},
              {"batches": [16, 1024], "counts": [1, 2, 4], "step_s": [[3.0, 4.0, 6.0], [7.0, 8.0, 10.0]]}]
    s = bench_dispatch_overlap.summarize(rounds)
    assert s["extra_s"] == {"2": [1.0, 1.0], "4": [3.0, 3.0]}
    assert s["dispatch_s_at_smallest_batch"] == {"2": 1.0, "4": 1.0}
    # one device: 6 - 2 = 4 s more compute at the largest batch, shared by 2 or 4 replicas
    assert s["replica_compute_s_at_largest_batch"] == {"2": 2.0, "4": 1.0}


def test_ps_overlap_summary_by_hand():
    # Medians of three rounds; serial = the W-worker median over W times the 1-worker one.
    steps = [({"1": 1.0, "2": 2.0, "3": 3.0}, {"1": 2.0, "2": 2.0, "3": 9.0}),
             ({"1": 2.0, "2": 3.0, "3": 6.0}, {"1": 2.0, "2": 3.0, "3": 3.0}),
             ({"1": 3.0, "2": 9.0, "3": 9.0}, {"1": 4.0, "2": 4.0, "3": 6.0})]
    rounds = [{"step_s": {"16": a, "512": b}} for a, b in steps]
    s = bench_ps_overlap.summarize(rounds)
    assert s["median_step_s"] == {"16": {"1": 2.0, "2": 3.0, "3": 6.0}, "512": {"1": 2.0, "2": 3.0, "3": 6.0}}
    assert s["serial"] == {"16": {"2": 0.75, "3": 1.0}, "512": {"2": 0.75, "3": 1.0}}


@pytest.mark.parametrize("path", [p for p in REAL if "replica_variable_s" in json.loads(p.read_text())["calibration"]],
                         ids=lambda p: p.stem)
def test_the_stored_medians_refit_to_the_stored_calibration(path):
    # The stored calibration was fitted live from every round's raw numbers;
    # --report refits it from the stored per-point medians. The two must agree,
    # or the held-out figures judge a calibration the run never had. (A
    # deliberate change to fit() breaks this too: the stored fit is history.)
    record = json.loads(path.read_text())
    cal = record["calibration"]
    local, collective, ps = rounds_from_calibration(cal)
    refit = fit(local, collective, ps, workload=cal["workload"], physical_cores=cal["physical_cores"]).to_dict()
    expected = {key: cal[key] for key in ("step_overhead_s", "replica_dispatch_s", "replica_variable_s")}
    if record["date"] < DISPATCH_TURNS_FROM:
        # Since replicas on shared cores take turns with the host's dispatch
        # (bench_dispatch_overlap), a replica of the tiny-batch curve adds its
        # dispatch and its 4 examples' compute q, so fit() takes q out of both
        # slopes; the intercept less the update is overhead + dispatch, so the
        # overhead gains what the dispatch loses. By hand from the stored fit:
        q = TINY_BATCH * cal["compute_s_per_example"]
        dispatch = max(cal["replica_dispatch_s"] - q, 0.0)
        central_slope = max(cal["replica_dispatch_s"] - cal["replica_variable_s"] - q, 0.0)
        expected = {"replica_dispatch_s": dispatch, "replica_variable_s": max(dispatch - central_slope, 0.0),
                    "step_overhead_s": cal["step_overhead_s"] + cal["replica_dispatch_s"] - dispatch}
    for key in ("step_overhead_s", "replica_dispatch_s", "replica_variable_s", "compute_s_per_example",
                "efficiency"):
        # rel 1e-9: the same arithmetic; the one difference is lstsq on
        # medians of one round, not of five (equal values).
        assert refit[key] == pytest.approx(expected.get(key, cal[key]), rel=1e-9), key
    # Since the engine prices the PS's apply of the gradient (commit 89a7f3a,
    # 2026-11-26), fit() takes it out of the request (half per transfer): by
    # hand from the stored value of a record fitted before; later records
    # were fitted that way live.
    values, _ = load_preset("workload", cal["workload"])
    apply_s = values["num_params"] * OPTIMIZER_BYTES_PER_PARAM / cal["memory_Bps"]
    before = json.loads(path.read_text())["date"] < "2026-11-26"
    expected = max(cal["ps_request_s"] - apply_s / 2, 0.0) if before else cal["ps_request_s"]
    assert refit["ps_request_s"] == pytest.approx(expected, rel=1e-9, abs=1e-12)
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


# ---- bench_real --explain (the analysis in data/measurements/README.md) -----------------------------
def test_ratio_interval_stays_within_the_rounds_and_collapses_when_they_agree():
    # A median of resampled rounds is always one of the rounds' values (odd count), so the interval lies
    # within [min, max] and holds the median of all; rounds that agree leave nothing to resample.
    assert bench_real.ratio_interval([2.0] * 5) == (2.0, 2.0)
    lo, hi = bench_real.ratio_interval([1.0, 2.0, 3.0, 4.0, 5.0])
    assert 1.0 <= lo < 3.0 < hi <= 5.0


def test_explain_states_the_one_device_bias_and_the_three_process_points_by_hand():
    record = json.loads((MEASUREMENTS / "bench_real_mnist_mlp_2026-11-21_run4.json").read_text())
    text = bench_real.explain(record)
    # The bias: the stored one-device prediction over the median of every one-device run in the record.
    runs = [r["step_time_s"] for rs in record["baseline_beside"].values() for r in rs]
    runs += [r["step_time_s"] for r in record["measured"]["one_device"]]
    runs.sort()
    median = (runs[len(runs) // 2] + runs[(len(runs) - 1) // 2]) / 2
    assert f"bias {record['predicted']['one_device']['step_time_s'] / median - 1:+.1%}" in text
    # The 3-process points against the ring fitted on the 2-process points, by hand: a ring of p ranks
    # takes 2(p-1) latencies and moves 2(p-1)/p of the message per rank, so T2 = 2a + n/B and
    # T3 = 4a + (4/3) n/B; (a, 1/B) by least squares on the 2-process points.
    inter = record["calibration"]["inter"]
    two = [(n, t) for p, n, t in zip(inter["ranks"], inter["message_bytes"], inter["time_s"]) if p == 2]
    three = [(n, t) for p, n, t in zip(inter["ranks"], inter["message_bytes"], inter["time_s"]) if p == 3]
    (a, inv_b), *_ = np.linalg.lstsq(np.array([[2.0, n] for n, _ in two]), np.array([t for _, t in two]),
                                     rcond=None)
    ratios = [t / (4 * a + 4 / 3 * n * inv_b) for n, t in three]
    assert "fit's ring: " + " ".join(f"{x:.2f}" for x in ratios) in text


def test_an_exact_model_misses_only_when_the_rounds_disagree():
    # Rounds that agree: the exact model's error is 0 in every resampling. Held-out rounds of ratio 1 and 2:
    # the exact model predicts their median 1.5, which is 50 % off a resampled median of 1 and 25 % off one
    # of 2, so every draw that is not balanced misses both the 8 % median and the 20 % max.
    runs = {"step_time_s": 1.0}
    flat = {"measured": {label: [runs] * 4 for label in bench_real.HELD_OUT},
            "baseline_beside": {label: [runs] * 4 for label in bench_real.HELD_OUT}}
    assert bench_real.exact_model_misses(flat) == (0.0, 0.0)
    split = {"measured": {label: [{"step_time_s": 1.0}, {"step_time_s": 2.0}] for label in bench_real.HELD_OUT},
             "baseline_beside": {label: [runs] * 2 for label in bench_real.HELD_OUT}}
    median_miss, max_miss = bench_real.exact_model_misses(split)
    # Of two rounds drawn with replacement, half the draws hold both (median 1.5, no error): 50 % miss, within
    # +-0.05 (10 standard errors of a share over 10,000 draws).
    assert 0.45 < median_miss < 0.55 and 0.45 < max_miss < 0.55
