"""The network benchmark's bookkeeping of TCP congestion control, on the stored runs (running it needs root)."""

import json
from pathlib import Path

import pytest

from benchmark_scripts import load
from distsim.engines.asyncrun import PHASE_CAVEAT

REPO = Path(__file__).resolve().parents[1]
MEASUREMENTS = REPO / "data" / "measurements"


def _bench():
    return load("bench_network")


def _runs(date: str) -> list[dict]:
    return [json.loads(line) for line in (MEASUREMENTS / f"bench_network_{date}" / "runs.jsonl").open()]


@pytest.mark.parametrize("date, named", [
    ("2026-11-26", {"bbr"}),  # every run's network ends "TCP congestion control bbr (the machine's, inherited)"
    ("2026-11-23", set()),  # made before the lab named it (the machine's was BBR; the README says so)
])
def test_the_congestion_control_is_read_from_what_every_run_recorded(date, named):
    assert _bench().congestion_controls(_runs(date)) == named


def test_a_run_naming_another_congestion_control_is_found():
    bench = _bench()
    runs = _runs("2026-11-26")[:2]
    runs[1] = {**runs[1], "unshaped": {**runs[1]["unshaped"], "network": runs[1]["unshaped"]["network"].replace(
        "congestion control bbr (the machine's, inherited)", "congestion control cubic (set per namespace)")}}
    assert bench.congestion_controls(runs) == {"bbr", "cubic"}


def test_the_phase_caveat_states_the_range_the_stored_benchmarks_measured():
    # The caveat's numbers are written by hand; every stored benchmark reports its own parameter-server runs
    # against their paired predictions (bench_network.py --report), and the caveat must span all of them.
    ranges = [json.loads(path.read_text())["summary"]["ps_runs_vs_paired_pct"]
              for path in sorted(MEASUREMENTS.glob("bench_network_*.json"))]
    assert ranges, "no stored benchmark"
    low, high = min(r[0] for r in ranges), max(r[1] for r in ranges)
    assert f"took from {-round(low)} % less to {round(high)} % more time than predicted" in PHASE_CAVEAT


def test_the_workbook_states_where_the_stored_ps_runs_sat_between_their_two_rhythms():
    # 05b's figures are written by hand; every stored benchmark reports where its PS runs of 2+ workers sat
    # between turns (0) and lockstep (1) (bench_network.py --report). No run may be slower than lockstep,
    # the slowest rhythm the caveat names, and the workbook must state the measured extremes.
    ranges = [json.loads(path.read_text())["summary"]["ps_runs_rhythm_position"]
              for path in sorted(MEASUREMENTS.glob("bench_network_*.json"))]
    low, high = min(r[0] for r in ranges), max(r[1] for r in ranges)
    assert high < 1.0
    workbook = (REPO / "notebooks" / "05b_network_lab.ipynb").read_text()
    assert f"(by {round(-100 * low)} % of the gap between the two" in workbook
    assert f"to {round(100 * high)} % of the way to lockstep" in workbook
