"""distsim.results.compare: pairing predictions with measurements (no TensorFlow)."""

import subprocess
import sys

import numpy as np
import pytest
from input_errors import raises_input

import distsim
from distsim.results.compare import Comparison, compare
from distsim.views.plots import plot_comparison
from distsim.results.result import Result, Summary


def _result(source: str, strategy: str, replicas: int, step_s: float, batch: int = 64) -> Result:
    return Result(
        source=source,
        strategy=strategy,
        num_replicas=replicas,
        global_batch=batch,
        summary=Summary(step_time_s=step_s, throughput_samples_per_s=batch / step_s),
    )


def test_signed_errors_of_step_time_and_throughput():
    pred = [_result("predicted", "one_device", 1, 0.012)]
    meas = [_result("measured", "one_device", 1, 0.010)]
    (row,) = compare(pred, meas).rows
    assert row.step_time_error == pytest.approx(0.2)  # predicted 20 % too slow
    assert row.throughput_error == pytest.approx(1 / 1.2 - 1)
    assert row.label == "one_device x1" and row.repeats == 1 and row.ratio_error is None


def test_repeats_give_medians_and_ratios_are_taken_round_by_round():
    # Round 2 was slow for everything (machine load): 2x in both configurations.
    base = [_result("measured", "one_device", 1, s) for s in (0.010, 0.020, 0.011)]
    four = [_result("measured", "mirrored", 4, s) for s in (0.015, 0.030, 0.0165)]
    pred = [_result("predicted", "one_device", 1, 0.010), _result("predicted", "mirrored", 4, 0.016)]
    table = compare(pred, [base, four], labels=["one", "four"], baseline=0)
    one, mirrored = table.rows
    assert one.measured_step_time_s == pytest.approx(0.011)  # median, not mean
    assert one.ratio_error == pytest.approx(0.0)
    # Measured ratio is exactly 1.5 in every round; predicted 1.6.
    assert mirrored.measured_ratio == pytest.approx(1.5)
    assert mirrored.ratio_error == pytest.approx(1.6 / 1.5 - 1)
    assert mirrored.measured_spread == pytest.approx((0.030 - 0.015) / 0.0165)
    # Judged on the ratio, without the baseline's trivial 0.
    assert table.median_abs_error == pytest.approx(abs(1.6 / 1.5 - 1))
    assert "judged on ratio to one" in table.to_text()


def test_paired_baselines_give_each_repeat_its_own_neighbour():
    pred = [_result("predicted", "one_device", 1, 0.010), _result("predicted", "mirrored", 2, 0.020)]
    base = [_result("measured", "one_device", 1, s) for s in (0.010, 0.010)]
    two = [_result("measured", "mirrored", 2, s) for s in (0.020, 0.060)]
    # The second repeat ran while the machine was 3x slower: its neighbour saw it too.
    beside_two = [_result("measured", "one_device", 1, s) for s in (0.010, 0.030)]
    table = compare(pred, [base, two], baseline=0, paired_baselines=[base, beside_two])
    assert table.rows[1].measured_ratio == pytest.approx(2.0)
    assert table.rows[1].ratio_error == pytest.approx(0.0)
    with raises_input("paired_baselines[1]", None, "2 runs, one per measured repeat of configuration 1",
                      problem="1 runs"):
        compare(pred, [base, two], baseline=0, paired_baselines=[base, beside_two[:1]])
    with raises_input("baseline", "None", "an index into predicted when paired_baselines is given"):
        compare(pred, [base, two], paired_baselines=[base, beside_two])
    with raises_input("paired_baselines", None, "one entry per configuration (2)", problem="1 entries"):
        compare(pred, [base, two], baseline=0, paired_baselines=[base])
    with raises_input("paired_baselines[1][0].summary.step_time_s", "nan", "a finite number > 0 (seconds)"):
        compare(pred, [base, two], baseline=0, paired_baselines=[base, [_result("measured", "a", 1, np.nan)] * 2])


def test_without_baseline_it_is_judged_on_step_time():
    pred = [_result("predicted", "a", 1, 0.011), _result("predicted", "b", 2, 0.030)]
    meas = [_result("measured", "a", 1, 0.010), _result("measured", "b", 2, 0.020)]
    table = compare(pred, meas)
    assert table.median_abs_error == pytest.approx(np.median([0.1, 0.5]))
    assert table.max_abs_error == pytest.approx(0.5)
    d = table.to_dict()
    assert d["baseline"] is None and len(d["rows"]) == 2


@pytest.mark.parametrize(
    "kwargs, path, value, allowed, problem",
    [
        ({"measured": []}, "measured", None, "one entry per prediction (1)", "0 entries"),
        ({"predicted": []}, "predicted", "[]", "at least one Result", None),
        ({"predicted": ["a"]}, "predicted[0]", "'a'", "a Result", None),
        ({"baseline": 3}, "baseline", "3", "an integer >= 0 and <= 0 (an index into predicted), or null (no ratios)",
         None),
        ({"baseline": True}, "baseline", "True", "an integer >= 0", None),
        ({"labels": ["x", "y"]}, "labels", "['x', 'y']", "one label per configuration (1)", None),
        ({"measured": [[]]}, "measured[0]", "[]", "a Result or a non-empty list of Results (its repeats)", None),
        ({"measured": [[_result("measured", "a", 1, 0.01), "b"]]}, "measured[0][1]", "'b'", "a Result", None),
        ({"predicted": [_result("predicted", "a", 1, float("nan"))]}, "predicted[0].summary.step_time_s", "nan",
         "a finite number > 0 (seconds)", None),
    ],
)
def test_bad_input_is_rejected(kwargs, path, value, allowed, problem):
    args = {"predicted": [_result("predicted", "a", 1, 0.01)], "measured": [_result("measured", "a", 1, 0.01)]}
    args.update(kwargs)
    with raises_input(path, value, allowed, problem=problem):
        compare(**args)


def test_a_negative_step_time_is_refused_when_the_result_is_built():
    # Summary refuses it itself, before compare sees it; NaN (not measured) is left for compare to refuse.
    with raises_input("Summary.step_time_s", "-0.01", "a finite number > 0"):
        _result("measured", "a", 1, -0.01)


def test_plot_has_a_panel_per_metric_and_labels_every_error():
    pred = [_result("predicted", "one_device", 1, 0.010), _result("predicted", "mirrored", 2, 0.012)]
    meas = [_result("measured", "one_device", 1, 0.011), _result("measured", "mirrored", 2, 0.010)]
    fig = plot_comparison(compare(pred, meas, baseline=0))
    axes = fig.get_axes()
    assert len(axes) == 3
    texts = [t.get_text() for t in axes[0].texts]
    assert texts == ["-9%", "+20%"]


def test_distsim_exports_compare_without_importing_tensorflow_or_matplotlib():
    code = (
        "import sys, distsim; assert callable(distsim.results.compare);"
        "bad = [m for m in ('tensorflow', 'matplotlib') if m in sys.modules]; print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
    assert callable(distsim.results.compare) and isinstance(compare([_result("predicted", "a", 1, 1.0)],
                                                            [_result("measured", "a", 1, 1.0)]), Comparison)
