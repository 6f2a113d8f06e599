"""The published tables of the tf.wiki handbook (A Concise Handbook of TensorFlow 2, "Distributed training with TensorFlow"), predicted from the
single-device column plus presets and stated assumptions (one calibrated
number per hardware setup, nothing fitted per cell)."""

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from input_errors import edited_json_file, raises_input

from distsim.published.reference import calibrate, cell_scenario, compare, load_tables, reference_dir
from distsim.scenario import Scenario

REPO = Path(__file__).resolve().parents[1]

TABLES = load_tables()


BY_ID = {t.id: t for t in TABLES}


@pytest.fixture(scope="module")
def comparisons():
    return {t.id: compare(t) for t in TABLES}


def test_tables_hold_the_published_numbers():
    by_id = {t.id: t for t in TABLES}
    assert by_id["mirrored_4x_gtx1080ti"].published == {"cats_vs_dogs": [146, 39, 29], "tf_flowers": [22, 7, 5]}
    assert by_id["multi_worker_2x_k80"].published == {"cats_vs_dogs": [1622, 858, 755], "tf_flowers": [301, 152, 144]}
    for t in TABLES:
        assert t.datasets == {"cats_vs_dogs": 23262, "tf_flowers": 3670}
        assert t.source and t.assumptions


@pytest.mark.parametrize("table_id", list(BY_ID))
def test_predicted_cells_within_tolerance(comparisons, table_id):
    _, cells = comparisons[table_id]
    errors = np.array([c.error for c in cells if not c.calibration])
    assert len(errors) == 4  # two datasets x two distributed columns
    # The acceptance criteria: mean |error| <= 15% per table, no cell beyond 30%.
    assert np.mean(np.abs(errors)) <= 0.15, [f"{c.dataset}/{c.column}: {c.error:+.1%}" for c in cells]
    assert np.max(np.abs(errors)) <= 0.30


def test_the_hard_cell_is_faster_per_device_than_the_baseline(comparisons):
    # 4 GPUs at global batch 256 (64 per replica, like the baseline): published 29 s/epoch,
    # under a quarter of 146 s. The prediction reproduces it from prefetching, not a fudge.
    _, cells = comparisons["mirrored_4x_gtx1080ti"]
    cell = {(c.dataset, c.column): c for c in cells}
    base = cell[("cats_vs_dogs", "no strategy, batch 64")]
    hard = cell[("cats_vs_dogs", "4 GPUs, global batch 256")]
    assert hard.predicted < base.predicted / 4


def test_calibration_reads_only_the_single_device_column():
    table = TABLES[0]
    scrambled = dataclasses.replace(
        table, published={k: [v[0], v[1] * 3, v[2] / 3] for k, v in table.published.items()}
    )
    assert calibrate(scrambled) == calibrate(table)


@pytest.mark.parametrize("name, table_id", [
    ("seed_mirrored_4x1080ti_cats_b256.json", "mirrored_4x_gtx1080ti"),
    ("seed_multiworker_2xk80_cats_b128.json", "multi_worker_2x_k80"),
])
def test_seed_example_scenarios_carry_the_calibrated_value(name, table_id, comparisons):
    s, _ = comparisons[table_id]

    scn = Scenario.load(REPO / "examples" / "scenarios" / name)
    # The example files store the value rounded to 7 decimals (0.1 us).
    assert scn.workload.compute_s_per_sample == pytest.approx(s, abs=1e-7)


@pytest.mark.parametrize(
    "edit, path, value, allowed",
    [
        (lambda d: d.update(schema_version=2), "schema_version", "2", "1 (the reference-table format"),
        (lambda d: d.pop("source"), "source", "None", "a value (this field is required)"),
        (lambda d: d.update(tables={}), "tables", "{}", "a list of tables"),
        (lambda d: d["tables"][0].pop("datasets"), "tables[0].datasets", "None", "a value (this field is required)"),
        (lambda d: d["tables"][1]["columns"][2].update(strategy="horovod"), "tables[1].columns[2].strategy",
         "'horovod'", "one of ('default', 'one_device', 'mirrored'"),
        (lambda d: d["tables"][0]["columns"][1].update(global_batch=0), "tables[0].columns[1].global_batch", "0",
         "an integer >= 1"),
        (lambda d: d["tables"][0]["published"]["tf_flowers"].append(9), "tables[0].published.tf_flowers",
         "[22, 7, 5, 9]", "one number per column (3)"),
        (lambda d: d["tables"][0]["published"]["tf_flowers"].__setitem__(1, -7), "tables[0].published.tf_flowers[1]",
         "-7", "a finite number > 0 (seconds)"),
        (lambda d: d["tables"][0]["datasets"].pop("tf_flowers"), "tables[0].datasets", "{'cats_vs_dogs': 23262}",
         "the size of every published dataset (missing ['tf_flowers'])"),
        (lambda d: d["tables"][0]["setup"].update(cluster_size=4), "tables[0].setup.cluster_size", "4",
         "no such field here"),
    ],
)
def test_a_broken_reference_file_names_the_file_and_field(tmp_path, edit, path, value, allowed):
    data = json.loads((reference_dir() / "source001_tables.json").read_text())
    file = edited_json_file(tmp_path, data, edit, "tables.json")
    with raises_input(f"{file}.{path}", value, allowed):
        load_tables(file)


def test_cells_outside_the_table_are_rejected():
    table = TABLES[0]
    with raises_input("column", "3", "an integer >= 0 and <= 2 (a column of the table)"):
        cell_scenario(table, 3, "tf_flowers", 1e-3)
    with raises_input("dataset", "'mnist'", "one of ('cats_vs_dogs', 'tf_flowers')"):
        cell_scenario(table, 0, "mnist", 1e-3)
    with raises_input("workload.compute_s_per_sample", "-0.001", "a finite number >= 1e-15 and <= 3600 (seconds)"):
        cell_scenario(table, 0, "tf_flowers", -1e-3)

# ------------------------------------------------------------------ published cluster results (issue 15)

import csv  # noqa: E402

from distsim.published.reference import CLUSTER_FILES, compare_all, error_summary, load_cluster_tables  # noqa: E402


@pytest.fixture(scope="module")
def everything():
    return compare_all()


def test_cluster_tables_hold_the_published_numbers():
    tables = {t.id: t for t in load_cluster_tables()}
    # Spot checks against the sources as quoted in the table files.
    assert tables["tf_dgx1_p100"].published["ResNet-50"] == [219, 422, 852, 1734]
    assert tables["tf_aws_distributed_k80"].published["ResNet-152"] == [19.4, 146, 291, 565, 981]
    assert tables["cscs_p2_8xlarge"].published["InceptionV3"][-1] == 3333.20
    assert tables["dle_rn50_horovod"].published["DGX A100 (8x A100 40GB)"] == [909, 7000]
    assert {t.file for t in tables.values()} == set(CLUSTER_FILES)
    assert len({t.source for t in tables.values()}) == 3  # three independent sources


def test_every_cell_error_is_the_one_reported_in_data_reference(everything):
    rows = list(csv.DictReader((REPO / "data" / "reference" / "cells.csv").open()))
    assert len(rows) == len(everything)
    for row, c in zip(rows, everything):
        assert (row["table"], row["row"], row["column"]) == (c.cell.table, c.cell.dataset, c.cell.column)
        # The CSV keeps 4 decimals of the relative error.
        assert float(row["error"]) == pytest.approx(c.cell.error, abs=1e-4)
        assert float(row["error_before"]) == pytest.approx(c.before.error, abs=1e-4)


def test_cluster_cells_median_error_meets_the_target(everything):
    summary = error_summary(everything)["all cluster tables"]
    assert summary["cells"] >= 25
    assert summary["median"] <= 0.10  # the target
    # The mechanisms must help: the same cells without them were far off.
    assert summary["median"] < summary["median_before"] / 2


# The unmet targets ratchet: today's figures are the ceilings, so a change can
# only keep or improve them; each ceiling is today's value rounded up at the
# third decimal (0.1 percentage point), and the target itself is the comment.
# Lower a ceiling when a change improves the figure.


def test_cluster_cells_largest_error_does_not_grow(everything):
    # Target: max <= 25 %. Not met: AlexNet on 8 P100s and InceptionV3 on
    # 16-128 p2.xlarge (their 1.25 Gbit/s link) miss; see data/reference/README.md.
    summary = error_summary(everything)["all cluster tables"]
    assert summary["max"] <= 0.466, summary["max"]
    assert summary["mean"] <= 0.093, summary["mean"]


def test_seed_tables_mean_error_does_not_grow(comparisons):
    # Target: mean <= 10 % per table. Not met by the Mirrored table (no
    # sourced per-replica host cost for GPUs); see data/reference/README.md.
    # Ceilings raised once (issue 24) when the epoch time started following the
    # pipeline across the epoch boundary (steady.epoch_time_s, checked against
    # the SimPy oracle): 13.0 -> 13.6 % and 8.4 -> 8.7 % mean.
    ceilings = {"mirrored_4x_gtx1080ti": (0.136, 0.173), "multi_worker_2x_k80": (0.087, 0.133)}
    for table_id, (_, cells) in comparisons.items():
        errors = [abs(c.error) for c in cells if not c.calibration]
        mean_ceiling, max_ceiling = ceilings[table_id]
        assert np.mean(errors) <= mean_ceiling, (table_id, np.mean(errors))
        assert np.max(errors) <= max_ceiling, (table_id, np.max(errors))


@pytest.mark.parametrize("table_id, row, target, metric", [
    # 1 ns per epoch: no device that takes at least 0.1 us per example does an
    # epoch of 23,262 examples that fast; before, the bisection returned 1e-7.
    ("mirrored_4x_gtx1080ti", "cats_vs_dogs", 1e-9, "seconds per epoch"),
    # A year per epoch needs more than 1 s per example; before, it returned 1.0.
    ("mirrored_4x_gtx1080ti", "cats_vs_dogs", 3.2e7, "seconds per epoch"),
    # 1e12 images/s on one P100 (the throughput direction of the same search).
    ("tf_dgx1_p100", "ResNet-50", 1e12, "images per second"),
])
def test_calibration_refuses_a_single_device_value_it_cannot_reach(table_id, row, target, metric):
    table = {t.id: t for t in TABLES + load_cluster_tables()}[table_id]
    published = dict(table.published, **{row: [target, *table.published[row][1:]]})
    with raises_input(f"{table_id}.published.{row}[0]", repr(target), f"a {metric} the single-device cell can reach"):
        calibrate(dataclasses.replace(table, published=published))
