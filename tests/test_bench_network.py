"""The network benchmark's bookkeeping of TCP congestion control, on the stored runs (running it needs root)."""

import json
import re
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


def test_the_notes_state_where_the_stored_ps_runs_sat_between_their_two_rhythms():
    # The figures 05b links to are written by hand in data/measurements/README.md (its 05b section); every stored
    # benchmark reports where its PS runs of 2+ workers sat between turns (0) and lockstep (1)
    # (bench_network.py --report). No run may be slower than lockstep, the slowest rhythm the caveat names,
    # and the notes must state the measured extremes.
    ranges = [json.loads(path.read_text())["summary"]["ps_runs_rhythm_position"]
              for path in sorted(MEASUREMENTS.glob("bench_network_*.json"))]
    low, high = min(r[0] for r in ranges), max(r[1] for r in ranges)
    assert high < 1.0
    notes = (MEASUREMENTS / "README.md").read_text().split("## 05b, the network lab")[1].split("\n## ")[0]
    text = " ".join(notes.split())
    assert f"(by {round(-100 * low)} % of the gap between the two" in text
    assert f"to {round(100 * high)} % of the way to lockstep" in text


def test_05b_names_a_section_of_the_notes_that_exists():
    # 05b points to its evidence by file and section name (the book cannot resolve links out of the notebooks).
    cells = json.loads((REPO / "notebooks" / "05b_network_lab.ipynb").read_text())["cells"]
    text = " ".join(" ".join("".join(c["source"]).split()) for c in cells if c["cell_type"] == "markdown")
    section = re.search(r'`data/measurements/README\.md`, section "([^"]+)"', text).group(1)
    headings = re.findall(r"^## (.+)$", (MEASUREMENTS / "README.md").read_text(), re.M)
    assert section == "05b, the network lab" and any(h.startswith(section) for h in headings)


# ---- apply times: recorded by new runs, absent from old ones ---------------------------------------------
def test_a_run_stored_before_apply_times_were_recorded_reports_no_phases():
    bench = _bench()
    old = _runs("2026-11-26")
    assert not any("apply_time_s" in r.get("shaped", {}) for r in old)  # the stored files predate the field
    assert [bench.run_phases(r["shaped"]) for r in old if "shaped" in r] == [None] * sum("shaped" in r for r in old)
    assert bench.phase_lines(old) == []


def test_a_stored_ps_run_with_apply_times_reports_where_worker_1_sat():
    # Laid out by hand: worker 0 applies every second, worker 1 a quarter of a second later, then (second half)
    # half a second later. The report's median over the second half is 0.5; a ring's record has no workers.
    bench = _bench()
    times = [0.0, 0.25, 1.0, 1.25, 2.0, 2.5, 3.0, 3.5, 4.0]
    workers = [0, 1, 0, 1, 0, 1, 0, 1, 0]
    run = {"repeat": 0, "cell": "parameter_server/2/mnist_mlp/50",
           "shaped": {"apply_time_s": times, "apply_worker": workers}}
    assert bench.run_phases(run["shaped"])[1] == pytest.approx([0.25, 0.25, 0.5, 0.5])
    assert bench.phase_lines([run]) == ["parameter_server/2/mnist_mlp/50 repeat 1: worker distance from worker 0 "
                                        "(cycles, second half, median): 1: 0.50"]
    assert bench.run_phases({"apply_time_s": times, "apply_worker": None}) is None
