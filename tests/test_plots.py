"""Smoke and content tests of distsim.views.plots on small, real inputs.

Each test checks what a reader relies on: the axes, their labels and units,
how many series or cells are drawn, and the legend, not pixels.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from input_errors import raises_input
from matplotlib.collections import PatchCollection, PolyCollection
from matplotlib.figure import Figure

from distsim.engines import asyncps
from distsim.mechanics import sharding
from distsim.mechanics.collectives import ALGORITHMS, build_schedule, execute
from distsim.datasets.mnist import mnist_subset
from distsim.numerics.models import make_model
from distsim.views.plots import save_figure
from distsim.views.plots.comparison import SCATTER_METRICS, plot_predicted_vs_measured
from distsim.views.plots.scaling import cost_per_step, plot_cost_breakdown, plot_scaling, scaling_table
from distsim.views.plots.schedule import (
    ScheduleDrawing,
    animate_schedule,
    animation_writer_available,
    holdings,
    plot_schedule_step,
    save_animation,
)
from distsim.views.plots.sharding import plot_sharding
from distsim.views.plots.style import NotebookFigure, figure_png, time_scale
from distsim.views.plots.timeline import TIMELINE_STYLES, event_styles, plot_timeline, plot_timelines
from distsim.views.plots.training import plot_staleness, plot_training_curves
from distsim.results.result import Result, Staleness, Summary
from distsim.numerics.train import train_sync
from distsim.results.trace import Event, Trace

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def sync_trace(num_replicas: int = 3, steps: int = 2, straggler_factor: float = 2.0) -> Trace:
    """A small synchronous timeline: input, forward, backward with two
    gradient buckets sent during it, wait for the slowest, update. The last
    replica computes ``straggler_factor`` times slower."""
    events, t = [], 0.0
    for step in range(steps):
        compute = [0.010 * (straggler_factor if r == num_replicas - 1 else 1.0) for r in range(num_replicas)]
        done = t + 0.001 + max(compute)
        for r in range(num_replicas):
            dev = f"replica{r}"
            fwd = t + 0.001
            bwd = fwd + compute[r] / 3
            events += [Event(dev, "input", t, fwd, step, "input"),
                       Event(dev, "compute", fwd, bwd, step, "forward"),
                       Event(dev, "compute", bwd, fwd + compute[r], step, "backward"),
                       Event(dev, "comm", bwd + 0.001, bwd + 0.002, step, "bucket 0"),
                       Event(dev, "comm", fwd + compute[r], fwd + compute[r] + 0.001, step, "bucket 1"),
                       Event(dev, "idle", fwd + compute[r] + 0.001, done + 0.001, step, "wait"),
                       Event(dev, "update", done + 0.001, done + 0.0015, step, "update")]
        t = done + 0.0015
    return Trace.from_events(events)


def summary_of(trace: Trace, num_replicas: int) -> Summary:
    step_s = trace.span_s / len(np.unique(trace.step))
    return Summary(step_time_s=step_s, throughput_samples_per_s=64 / step_s)


# ---------------------------------------------------------------- style


def test_time_scale_picks_a_readable_unit():
    assert time_scale(2.5) == (1.0, "s")
    assert time_scale(0.02) == (1e-3, "ms")
    assert time_scale(3e-5) == (1e-6, "µs")


def test_figures_render_to_png_and_show_in_notebooks():
    fig = plot_timeline(sync_trace())
    assert isinstance(fig, NotebookFigure)
    assert fig._repr_png_().startswith(PNG_MAGIC)
    assert figure_png(fig, dpi=50).startswith(PNG_MAGIC)


def test_save_figure_writes_each_format(tmp_path):
    fig = plot_timeline(sync_trace())
    written = save_figure(fig, tmp_path / "sub" / "timeline", formats=("png", "svg"))
    assert [p.name for p in written] == ["timeline.png", "timeline.svg"]
    assert written[0].read_bytes().startswith(PNG_MAGIC)
    assert b"<svg" in written[1].read_bytes()[:500]
    single = save_figure(fig, tmp_path / "one.svg")
    assert single == [tmp_path / "one.svg"] and single[0].exists()


@pytest.mark.parametrize("path, formats, where, value, allowed", [
    ("fig.jpg", None, "path", "fig.jpg", "a file name ending in one of ('png', 'svg', 'pdf'), or give formats="),
    ("fig", ("png", "bmp"), "formats[1]", "'bmp'", "one of ('png', 'svg', 'pdf')"),
    ("fig", (), "formats", "[]", "at least one of ('png', 'svg', 'pdf')"),
])
def test_save_figure_rejects_unknown_formats(tmp_path, path, formats, where, value, allowed):
    value = repr(str(tmp_path / path)) if where == "path" else value
    with raises_input(where, value, allowed):
        save_figure(plot_timeline(sync_trace()), tmp_path / path, formats=formats)


# ---------------------------------------------------------------- timeline


def test_timeline_draws_one_bar_per_event_with_its_colour():
    trace = sync_trace(num_replicas=3, steps=2)
    fig = plot_timeline(trace, title="sync")
    ax = fig.axes[0]
    (bars,) = [c for c in ax.collections if isinstance(c, PolyCollection)]
    assert len(bars.get_paths()) == len(trace)
    assert ax.get_xlabel() == "time since start (ms)"
    assert ax.get_ylabel() == "device"
    assert [t.get_text() for t in ax.get_yticklabels()] == trace.devices
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == [name for name, _ in TIMELINE_STYLES]
    styles = event_styles(trace)
    names = [TIMELINE_STYLES[s][0] for s in styles]
    kinds_labels = [(e.kind, e.label) for e in trace.events()]
    assert names[kinds_labels.index(("compute", "forward"))] == "forward"
    assert names[kinds_labels.index(("comm", "bucket 0"))] == "communication (transfers 1, 3, 5, …)"
    assert names[kinds_labels.index(("comm", "bucket 1"))] == "communication (transfers 2, 4, 6, …)"
    assert names[kinds_labels.index(("idle", "wait"))] == "idle / wait"


def test_timeline_straggler_is_visible_as_longer_compute_and_others_wait():
    trace = sync_trace(num_replicas=3, steps=1, straggler_factor=3.0)
    ax = plot_timeline(trace).axes[0]
    (bars,) = [c for c in ax.collections if isinstance(c, PolyCollection)]
    widths = np.array([np.ptp(p.vertices[:, 0]) for p in bars.get_paths()])
    rows = np.array([p.vertices[:, 1].mean() for p in bars.get_paths()])
    backward = trace.kind == 1
    backward &= np.array([trace.labels[i] == "backward" for i in trace.label])
    slow_row = len(trace.devices) - 1
    slow = widths[backward & (np.round(rows).astype(int) == slow_row)]
    fast = widths[backward & (np.round(rows).astype(int) == 0)]
    np.testing.assert_allclose(slow / fast, 3.0, rtol=1e-9)  # same events, only rescaled to ms


def test_timeline_max_steps_and_side_by_side():
    trace = sync_trace(steps=3)
    ax = plot_timeline(trace, max_steps=1).axes[0]
    (bars,) = [c for c in ax.collections if isinstance(c, PolyCollection)]
    assert len(bars.get_paths()) == int(np.sum(trace.step == 0))
    fig = plot_timelines([trace, sync_trace(num_replicas=2)], titles=["sync", "async"])
    assert [a.get_title() for a in fig.axes] == ["sync", "async"]
    assert fig.axes[0].get_legend() is None and fig.axes[1].get_legend() is not None


def test_timeline_rejects_results_without_trace_and_bad_arguments():
    res = Result("measured", "mirrored", 2, 64, Summary(0.1, 640.0))
    with raises_input("item.trace", "None", "a recorded trace to draw: run it with a trace recorded"):
        plot_timeline(res)
    with raises_input("item", "'trace.json'", "a Trace, or a Result with a trace"):
        plot_timeline("trace.json")
    with raises_input("max_steps", "0", "an integer >= 1, or null (every step)"):
        plot_timeline(sync_trace(), max_steps=0)
    with raises_input("titles", "['a', 'b']", "one label per timeline (1)"):
        plot_timelines([sync_trace()], titles=["a", "b"])
    with raises_input("items", "[]", "at least one Trace, or Result with a trace"):
        plot_timelines([])
    with raises_input("items[1].trace", "None", "a recorded trace to draw"):
        plot_timelines([sync_trace(), res])


# ---------------------------------------------------------------- training curves


@pytest.fixture(scope="module")
def sync_runs():
    data = mnist_subset(256, 10, flatten=True)
    runs = []
    for replicas in (1, 4):
        run = train_sync(make_model("softmax_regression"), data.x_train, data.y_train, num_replicas=replicas,
                         global_batch=64, epochs=1, step_time_s=0.01 * replicas, seed=0)
        runs.append(run.result)
    return runs


def test_training_curves_have_one_line_per_run_in_each_panel(sync_runs):
    fig = plot_training_curves(sync_runs, labels=["1 replica", "4 replicas"])
    axes = fig.axes
    assert len(axes) == 4
    for ax in axes:
        assert len(ax.get_lines()) == 2
    assert axes[0].get_ylabel() == "training loss"
    assert axes[2].get_ylabel() == "training accuracy (fraction correct)"
    assert axes[3].get_xlabel() == "wall-clock time since start (ms)"
    # the time axis really is the run's clock: the 4-replica line ends later here
    ends = [line.get_xdata()[-1] for line in axes[1].get_lines()]
    np.testing.assert_allclose(ends, [r.curve.time_s[-1] * 1e3 for r in sync_runs])
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend == ["1 replica", "4 replicas"]


def test_training_curves_reject_runs_without_curve():
    with raises_input("results[0].curve", "None", "a training curve: only runs that trained can be drawn"):
        plot_training_curves([Result("measured", "mirrored", 2, 64, Summary(0.1, 640.0))])
    with raises_input("results", "[]", "at least one Result"):
        plot_training_curves([])
    with raises_input("labels", "['a', 'b']", "one label per result (1)"):
        plot_training_curves([Result("measured", "mirrored", 2, 64, Summary(0.1, 640.0))], labels=["a", "b"])


# ---------------------------------------------------------------- staleness


def test_staleness_histogram_counts_every_update_and_overlays_the_expectation():
    means = np.array([1.0, 1.0, 0.5, 0.25])
    log = asyncps.simulate_async(4, 400, compute_mean_s=means, seed=3)
    fig = plot_staleness(log.to_staleness(), num_workers=4, compute_mean_s=means)
    ax, ax_w = fig.axes[:2]
    heights = [p.get_height() for p in ax.patches]
    assert sum(heights) == 400
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "expected mean N−1 = 3" in legend
    expected_line = [line for line in ax.get_lines() if line.get_label().startswith("expected")][0]
    assert expected_line.get_xdata()[0] == 3
    expected_marks = [line for line in ax_w.get_lines() if line.get_label().startswith("expected")][0]
    np.testing.assert_allclose(expected_marks.get_xdata(), asyncps.expected_staleness_exponential(means))
    image = ax_w.get_images()[0].get_array()
    assert image.shape[0] == 4
    np.testing.assert_allclose(image.sum(axis=1), 1.0)  # each row is one worker's distribution
    assert fig.axes[-1].get_ylabel() == "share of the worker's updates"


def test_staleness_rejects_bad_input():
    log = asyncps.simulate_async(3, 30, seed=0)
    with raises_input("compute_mean_s", "[1.0, 2.0]", "or a list of 3 (one per worker), each > 0 seconds"):
        plot_staleness(log.to_staleness(), num_workers=3, compute_mean_s=[1.0, 2.0])
    with raises_input("compute_mean_s[2]", "0.0", "a finite number > 0 (seconds)"):
        plot_staleness(log.to_staleness(), num_workers=3, compute_mean_s=[1.0, 2.0, 0.0])
    with raises_input("num_workers", "2", "an integer >= 3 (more than the highest worker id in the record)"):
        plot_staleness(log.to_staleness(), num_workers=2)
    with raises_input("item.num_replicas", "2", "an integer >= 3"):
        plot_staleness(Result("simulated", "parameter_server", 2, 64, Summary(0.1, 640.0),
                              staleness=log.to_staleness()))
    with raises_input("item.staleness", "None", "a staleness record: only asynchronous runs have one"):
        plot_staleness(Result("simulated", "mirrored", 2, 64, Summary(0.1, 640.0)))
    with raises_input("item.staleness", None, "a record of at least one applied update", problem="empty"):
        plot_staleness(Staleness(np.zeros(0, np.int64), np.zeros(0, np.int64)))
    with raises_input("item", "3", "a Result of an asynchronous run, or its Staleness"):
        plot_staleness(3)


# ---------------------------------------------------------------- predicted vs measured


def test_scatter_has_identity_line_band_and_a_point_per_pair():
    predicted = [Result("predicted", s, n, 64, Summary(0.01 * n, 6400 / n))
                 for s in ("mirrored", "parameter_server") for n in (1, 2, 4)]
    measured = [Result("measured", r.strategy, r.num_replicas, 64,
                       Summary(r.summary.step_time_s * f, 1.0)) for r, f in zip(predicted, [1.1, 0.9, 1.5, 1, 1, 1])]
    fig = plot_predicted_vs_measured(predicted, measured, band=0.2)
    ax = fig.axes[0]
    assert ax.get_xlabel() == "predicted step time (s)" and ax.get_ylabel() == "measured step time (s)"
    points = [line for line in ax.get_lines() if line.get_linestyle() == "None"]
    assert [line.get_label() for line in points] == ["mirrored", "parameter_server"]
    assert sum(len(line.get_xdata()) for line in points) == 6
    assert ax.get_title() == "5 of 6 within ±20%"  # only the 1.5x point is outside
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend[:2] == ["within ±20% of the prediction", "y = x (perfect prediction)"]


def test_scatter_metrics_are_summary_fields_and_bad_input_is_named():
    assert set(SCATTER_METRICS) <= set(Summary.__dataclass_fields__)
    r = Result("predicted", "mirrored", 1, 64, Summary(0.1, 640.0))
    with raises_input("metric", "'loss'", f"one of {tuple(SCATTER_METRICS)}"):
        plot_predicted_vs_measured([r], [r], metric="loss")
    with raises_input("measured", None, "one result per prediction (2)", problem="1 results"):
        plot_predicted_vs_measured([r, r], [r])
    with raises_input("predicted[0].summary.speedup", "None", "a finite number: pick a metric every result reports"):
        plot_predicted_vs_measured([r], [r], metric="speedup")
    with raises_input("band", "0", "a finite number > 0 and <= 1 (a fraction: 0.2 means ±20 %)"):
        plot_predicted_vs_measured([r], [r], band=0)
    with raises_input("predicted", "[]", "at least one Result"):
        plot_predicted_vs_measured([], [])
    with raises_input("measured[0]", "'r'", "a Result"):
        plot_predicted_vs_measured([r], ["r"])
    with raises_input("labels", "['a', 'b']", "one label per pair (1)"):
        plot_predicted_vs_measured([r], [r], labels=["a", "b"])


# ---------------------------------------------------------------- sharding


def test_sharding_diagram_draws_every_assigned_example_and_the_empty_batch():
    fig = plot_sharding(22, 8, num_workers=2, replicas_per_worker=2)
    steps = sharding.step_assignments(22, 8, 2, 2)
    axes = [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]
    assert len(axes) == len(steps) == 3
    for ax, step in zip(axes, steps):
        coll = [c for c in ax.collections if isinstance(c, PatchCollection)][0]
        shown = coll.get_array()
        # global row + worker rows + replica rows: each example drawn three times
        expected = np.concatenate([np.concatenate(step)] * 2 + step)
        assert sorted(shown.tolist()) == sorted(expected.tolist())
    last = axes[-1]
    assert "per replica [2, 2, 2, 0]" in last.get_title()
    assert any(t.get_text() == "empty" for t in last.texts)
    assert [t.get_text() for t in axes[0].get_yticklabels()][:3] == [
        "global batch (all workers)", "worker 0", "↳ replica 0 (w0/r0)"]
    assert fig.axes[-1].get_ylabel() == "example index in the dataset"


def test_sharding_diagram_picks_first_and_last_steps_of_long_epochs():
    fig = plot_sharding(1000, 64, num_workers=1, replicas_per_worker=2)
    titles = [ax.get_title().split(":")[0] for ax in fig.axes[:-1]]
    assert titles == ["step 0", "step 1", "step 2", "step 13", "step 14", "step 15"]
    with raises_input("steps[0]", "7", "an integer >= 0 and <= 2 (this epoch has 3 steps)"):
        plot_sharding(22, 8, steps=[7])
    with raises_input("steps", "[]", "a non-empty list of step numbers from 0 to 2"):
        plot_sharding(22, 8, steps=[])
    with raises_input("global_batch", "30", "at most num_examples=22 with drop_remainder=True"):
        plot_sharding(22, 30, drop_remainder=True)


# ---------------------------------------------------------------- schedules


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_schedule_holdings_end_with_the_full_sum_where_execute_does(algorithm):
    options = {"num_shards": 2} if algorithm == "parameter_server" else {}
    schedule = build_schedule(algorithm, 4, 64, **options)
    held = holdings(schedule)
    assert held.shape == (schedule.num_steps + 1, schedule.num_ranks, schedule.num_chunks, 4)
    # compare with executing the schedule on one-hot gradients: rank i's
    # gradient is 10**i, so each digit of a final value says whether i is in it
    grads = [np.full(schedule.num_chunks, 10.0 ** i) for i in range(4)]
    final = execute(schedule, grads)
    for r in range(schedule.num_ranks):
        for c in range(schedule.num_chunks):
            digits = [int(final[r][c] // 10 ** i) % 10 for i in range(4)]
            assert held[-1, r, c].astype(int).tolist() == digits
    for r in schedule.result_ranks:
        assert held[-1, r].all()


@pytest.mark.parametrize("algorithm,p", [("ring", 4), ("parameter_server", 3)])
def test_schedule_animation_has_one_frame_per_step(tmp_path, algorithm, p):
    from PIL import Image

    schedule = build_schedule(algorithm, p, 1000)
    anim = animate_schedule(schedule)
    assert list(anim.new_frame_seq()) == list(range(schedule.num_steps))
    gif = save_animation(anim, tmp_path / f"{algorithm}.gif", dpi=25)  # Pillow ships with matplotlib
    with Image.open(gif) as image:
        assert image.n_frames == schedule.num_steps


def test_schedule_step_draws_one_arrow_per_sender_receiver_pair():
    schedule = build_schedule("ring", 4, 1000)
    fig = plot_schedule_step(schedule, step=0)
    ax = fig.axes[0]
    arrows = [p for p in ax.patches if type(p).__name__ == "FancyArrowPatch"]
    assert len(arrows) == 4  # ring: every rank sends one chunk to its right neighbour
    assert "step 1 of 6" in ax.get_title()
    cells = [c for c in ax.collections if isinstance(c, PatchCollection)][0]
    assert cells.get_array().tolist() == holdings(schedule)[1].sum(axis=2).ravel().tolist()
    with raises_input("step", "6", "an integer >= 0 and <= 5 (a step of the schedule, from 0)"):
        ScheduleDrawing(schedule, fig.axes[0]).show_step(6)
    with raises_input("schedule.num_ranks", "33", "at most 32 in a drawing (the schedule itself has no limit)"):
        plot_schedule_step(build_schedule("ring", 33, 1000))
    with raises_input("schedule.num_steps", "0", "at least 1 transfer step to draw"):
        plot_schedule_step(build_schedule("ring", 1, 1000))
    with raises_input("schedule", "'ring'", "a Schedule"):
        plot_schedule_step("ring")


def test_save_animation_skips_formats_without_a_writer(tmp_path):
    anim = animate_schedule(build_schedule("ring", 3, 300))
    mp4 = save_animation(anim, tmp_path / "ring.mp4", dpi=25)
    assert (mp4 is not None) == animation_writer_available("x.mp4")
    assert (tmp_path / "ring.mp4").exists() == (mp4 is not None)
    with raises_input("path", repr(str(tmp_path / "ring.avi")), "a file name ending in one of ('.gif', '.mp4')"):
        save_animation(anim, tmp_path / "ring.avi")
    save_animation(anim, tmp_path / "ring.gif", dpi=25)  # renders it, so matplotlib does not warn


# ---------------------------------------------------------------- scaling and cost


def scaling_series(overhead: float, source: str = "predicted") -> list[Result]:
    out = []
    for n in (1, 2, 4, 8):
        speedup = n / (1 + overhead * (n - 1))
        out.append(Result(source, "mirrored", n, 64 * n, Summary(1.0, 64.0 * speedup, speedup=speedup)))
    return out


def test_scaling_curves_plot_each_series_with_ideal_line():
    fig = plot_scaling({"fast link": scaling_series(0.05), "slow link": scaling_series(0.3)},
                       measured={"published: doc 001": scaling_series(0.1, "measured")[:2]})
    ax_s, ax_e = fig.axes
    labels = [line.get_label() for line in ax_s.get_lines()]
    assert labels == ["fast link", "slow link", "published: doc 001", "ideal (linear)"]
    slow = ax_e.get_lines()[1]
    np.testing.assert_allclose(slow.get_ydata(), [1 / (1 + 0.3 * (n - 1)) for n in (1, 2, 4, 8)])
    assert ax_s.get_xlabel() == "devices (replicas)"
    assert ax_e.get_ylabel() == "scaling efficiency (speedup / devices)"
    with raises_input("predicted['x'][0].summary.speedup", "None", "a finite number > 0 (relative to one device"):
        plot_scaling({"x": [Result("predicted", "mirrored", 2, 64, Summary(1.0, 1.0))]})
    with raises_input("predicted", "{}", "at least one series (legend label -> results), here or in measured"):
        plot_scaling({})
    with raises_input("measured", "[1, 2]", "a mapping of legend label -> results"):
        plot_scaling({"x": []}, [1, 2])


def test_cost_breakdown_stacks_per_kind_seconds_per_step():
    trace = sync_trace(num_replicas=3, steps=2)
    res = Result("simulated", "mirrored", 3, 64, summary_of(trace, 3), trace=trace)
    cost = cost_per_step(res)
    for kind in ("compute", "comm", "input", "update", "idle"):
        assert cost[kind] == pytest.approx(trace.busy_s(kind) / 3 / 2, rel=1e-12)
    fig = plot_cost_breakdown([res, res], labels=["a", "b"])
    ax = fig.axes[0]
    assert len(ax.patches) == 2 * 5
    assert ax.get_ylabel() == "time per step per worker device (ms)"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["a", "b"]


def test_plots_return_figures_and_never_print(capsys, sync_runs):
    figs = [plot_timeline(sync_trace()), plot_training_curves(sync_runs), plot_sharding(10, 4, 1, 2),
            plot_schedule_step(build_schedule("tree", 4, 100), 1), plot_scaling({"s": scaling_series(0.1)})]
    assert all(isinstance(f, Figure) for f in figs)
    assert capsys.readouterr() == ("", "")


def test_cost_breakdown_of_a_prediction_adds_up_to_its_mean_step():
    from distsim.engines.prediction import predict
    from distsim.scenario import make_scenario

    sync = predict(make_scenario("v100", "resnet50_224", "mirrored", devices_per_worker=4, global_batch=256,
                                 steps=6))
    cost = cost_per_step(sync)
    # every replica row is covered end to end by input-wait, compute, all-reduce wait and update;
    # communication runs in its own lower lane, beside them
    device_time = cost["compute"] + cost["idle"] + cost["update"] + cost["input"]
    assert device_time == pytest.approx(float(np.mean(sync.step_times_s)), rel=1e-9)
    assert cost["comm"] > 0
    async_run = predict(make_scenario("v100", "resnet50_224", "parameter_server", num_workers=3, global_batch=192,
                                      steps=5))
    per_update = cost_per_step(async_run)  # per worker update, not per global update
    computes = async_run.trace.kind == 1
    assert per_update["compute"] == pytest.approx(
        float(np.mean(async_run.trace.end_s[computes] - async_run.trace.start_s[computes])), rel=1e-9)
    fig = plot_cost_breakdown([sync, async_run], labels=["mirrored x4", "PS async x3"])
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["mirrored x4", "PS async x3"]


def test_cost_breakdown_names_the_run_it_cannot_read():
    untraced = Result("measured", "mirrored", 2, 64, Summary(0.1, 640.0))
    with raises_input("result.trace", "None", "a recorded trace (the cost breakdown is read from it)"):
        cost_per_step(untraced)
    idle = Result("measured", "mirrored", 1, 64, Summary(0.1, 640.0),
                  trace=Trace.from_events([Event("gpu0", "idle", 0.0, 1.0, 0)]))
    with raises_input("result.trace", None, "a trace in which some device computes",
                      problem="no compute event among its 1 events"):
        cost_per_step(idle)
    with raises_input("results[1].trace", "None", "a recorded trace"):
        plot_cost_breakdown([dataclasses.replace(idle, trace=sync_trace()), untraced])
    with raises_input("results", "[]", "at least one Result"):
        plot_cost_breakdown([])


def test_timeline_of_a_prediction_draws_comm_streams_in_their_device_rows():
    from distsim.engines.prediction import predict
    from distsim.scenario import make_scenario

    result = predict(make_scenario("v100", "resnet50_224", "multi_worker_mirrored", num_workers=2,
                                   devices_per_worker=2, global_batch=128, steps=3))
    ax = plot_timeline(result).axes[0]
    rows = [t.get_text() for t in ax.get_yticklabels()]
    assert rows == [d for d in result.trace.devices if not d.endswith("/comm")]
    assert len(rows) < len(result.trace.devices)
    (bars,) = [c for c in ax.collections if isinstance(c, PolyCollection)]
    assert len(bars.get_paths()) == len(result.trace)
    comm = result.trace.kind == 2
    centres = np.array([(p.vertices[:, 1].min() + p.vertices[:, 1].max()) / 2 for p in bars.get_paths()])
    row_of = {name: i for i, name in enumerate(rows)}
    expected_rows = np.array([row_of[result.trace.devices[d].removesuffix("/comm")] for d in result.trace.device])
    np.testing.assert_allclose(centres[comm] - expected_rows[comm], 0.27)  # lower lane: (0.12 + 0.42) / 2
    assert ax.get_title() == "multi_worker_mirrored, 4 replicas (predicted)"


def test_scaling_table_rows_in_milliseconds():
    # hand-written: 2 devices at 10 ms (strong) and 12 ms (weak) against 1 device at 8 ms
    text = scaling_table({"devices": [1, 2], "strong_s": [0.008, 0.010], "strong_speedup": [1.0, 0.8],
                          "weak_s": [0.008, 0.012], "weak_speedup": [1.0, 4 / 3]})
    header, one, two = text.splitlines()
    assert header.split() == ["devices", "strong:", "step", "(ms)", "speedup", "weak:", "step", "(ms)", "speedup"]
    assert one.split() == ["1", "8.00", "1.00", "8.00", "1.00"]
    assert two.split() == ["2", "10.00", "0.80", "12.00", "1.33"]
