"""Every JSON file distsim reads fails the same clear way when missing or malformed."""

import pytest

from distsim import InputError, Result, Scenario
from distsim.real.plan import RunPlan
from distsim.published.reference import load_tables

LOADERS = [
    (Scenario.load, "scenario file"),
    (Result.load, "result file"),
    (RunPlan.load, "run plan"),
    (load_tables, "reference tables"),
]


@pytest.mark.parametrize("load, what", LOADERS)
def test_missing_file_names_what_and_where(tmp_path, load, what):
    path = tmp_path / "absent.json"
    with pytest.raises(FileNotFoundError, match=f"absent.json: no {what} at this path; allowed: the path of an existing {what}"):
        load(path)


@pytest.mark.parametrize("load, what", LOADERS)
def test_malformed_json_names_the_file_and_position(tmp_path, load, what):
    path = tmp_path / "broken.json"
    path.write_text('{"schema_version": 1,')
    with pytest.raises(InputError, match=r"broken.json: not valid JSON \(.* at line 1 column \d+\); allowed: a .* in valid JSON"):
        load(path)


def test_stored_results_skip_reports_and_reject_broken_results(tmp_path):
    from distsim.results.result import Summary, load_stored_results

    Result("measured", "mirrored", 2, 64, Summary(0.01, 6400.0)).save(tmp_path / "a_result.json")
    (tmp_path / "b_bench_report.json").write_text('{"what": "a benchmark report", "measured": {}}')
    found = load_stored_results(tmp_path)
    assert [(r.strategy, r.num_replicas) for r in found] == [("mirrored", 2)]
    (tmp_path / "c_broken.json").write_text('{"schema_version": 1, "source": "measured"}')
    with pytest.raises(InputError, match=r"c_broken\.json\.strategy=None; allowed: a value \(this field is required\)$"):
        load_stored_results(tmp_path)
