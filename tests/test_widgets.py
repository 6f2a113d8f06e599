"""Headless tests of distsim.views.widgets: set widget values from Python, check
what the dashboard shows against distsim.predict / distsim.sweep."""

from __future__ import annotations

import datetime
import html
import json
import re

import numpy as np
import pytest
from input_errors import raises_input

from distsim.mechanics.collectives import build_schedule
from distsim.views.plots.style import new_figure
from distsim.views.plots.timeline import _RGBA, TIMELINE_STYLES, TimelineDrawing, event_styles
from distsim.engines import predict, sweep
from distsim.scenario import Scenario, make_scenario
from distsim.results.trace import Event, Trace
from distsim.validation import InputError
from distsim.views.widgets import (
    METRICS,
    SchedulePlayer,
    WhatIfLab,
    default_scenario,
    format_metric,
    metrics_html,
)
from distsim.views.widgets.what_if_lab import LOADED

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
CELL = re.compile(r'class="(distsim-metric|distsim-pinned)" data-metric="(\w+)" data-value="([^"]*)">([^<]*)<')


def shown(lab: WhatIfLab, column: str = "distsim-metric") -> dict[str, tuple[str, str]]:
    """metric -> (data-value, text) of one column of the lab's table."""
    return {key: (value, html.unescape(text)) for cls, key, value, text in CELL.findall(lab.metrics.value)
            if cls == column}


def expected(scenario: Scenario) -> dict[str, tuple[str, str]]:
    summary = predict(scenario).summary
    out = {}
    for m in METRICS:
        v = getattr(summary, m.key)
        out[m.key] = ("" if v is None else repr(float(v)), format_metric(m.key, v))
    return out


@pytest.fixture(scope="module")
def shared_lab():
    return WhatIfLab()


@pytest.fixture
def lab(shared_lab):
    """The module's lab, unpinned and reset to the default scenario (building
    a fresh one per test would cost a second of figure layout each)."""
    shared_lab.pin_button.value = False
    shared_lab.load(default_scenario())
    shared_lab.update_times_s.clear()
    shared_lab.share_message.value = ""
    return shared_lab


def test_lab_starts_with_the_default_scenario_and_its_prediction(lab):
    assert lab.scenario == default_scenario()
    assert lab.error.value == ""
    assert shown(lab) == expected(default_scenario())
    assert bytes(lab.timeline.image.value).startswith(PNG_MAGIC)
    assert bytes(lab.scaling.image.value).startswith(PNG_MAGIC)
    assert lab.update_times_s == []  # the fixture's reset load is not counted
    lab.update()
    assert len(lab.update_times_s) == 1


def test_moving_controls_updates_metrics_to_the_new_prediction(lab):
    before = bytes(lab.timeline.image.value)
    lab.controls["devices_per_worker"].value = 8
    want = default_scenario().replace("cluster.devices_per_worker", 8)
    assert lab.scenario == want
    assert shown(lab) == expected(want)
    assert bytes(lab.timeline.image.value) != before  # 8 rows of replicas now, not 4
    lab.controls["strategy"].value = "multi_worker_mirrored"
    lab.controls["num_workers"].value = 2
    lab.controls["inter_link"].value = "ethernet_25g"
    want = (want.replace("strategy.name", "multi_worker_mirrored").replace("cluster.num_workers", 2)
            .replace("cluster.inter_link", "ethernet_25g"))
    assert lab.scenario == want
    assert shown(lab) == expected(want)
    assert len(lab.update_times_s) == 4


def test_rejected_combination_shows_the_simulator_message_not_a_traceback(lab):
    lab.controls["num_workers"].value = 2  # mirrored is one machine
    with pytest.raises(ValueError) as rejected:
        default_scenario().replace("cluster.num_workers", 2)
    assert html.escape(str(rejected.value)) in lab.error.value
    assert "Traceback" not in lab.error.value
    assert lab.scenario is None and lab.result is None
    assert {text for _, text in shown(lab).values()} == {"—"}
    lab.controls["strategy"].value = "multi_worker_mirrored"
    assert lab.error.value == ""
    assert lab.scenario.cluster.num_workers == 2


def test_scaling_curve_is_the_sweep_and_the_star_is_the_prediction(lab):
    lab.controls["compute_distribution"].value = "lognormal"
    lab.controls["compute_sigma"].value = 0.3
    scenario = lab.scenario
    table = sweep(scenario, {"cluster.devices_per_worker": [1, 2, 4, 8, 16, 32, 64]})
    x, y = lab.scaling.curve.get_data()
    np.testing.assert_array_equal(x, table["num_replicas"])
    np.testing.assert_array_equal(y, table["speedup"])
    star_x, star_y = lab.scaling.here.get_data()
    assert list(star_x) == [4] and list(star_y) == [predict(scenario).summary.speedup]


def test_multi_worker_scaling_adds_workers_of_the_same_size(lab):
    lab.controls["strategy"].value = "multi_worker_mirrored"
    lab.controls["devices_per_worker"].value = 2
    table = sweep(lab.scenario, {"cluster.num_workers": [1, 2, 4, 8, 16, 32]})
    x, y = lab.scaling.curve.get_data()
    np.testing.assert_array_equal(x, [2, 4, 8, 16, 32, 64])
    np.testing.assert_array_equal(y, table["speedup"])


def test_parameter_server_shows_staleness_and_enables_its_controls(lab):
    c = lab.controls
    assert c["num_ps"].disabled and c["compute_sigma"].disabled and c["inter_link"].disabled
    c["strategy"].value = "parameter_server"
    c["num_workers"].value = 4
    c["devices_per_worker"].value = 1
    c["num_ps"].value = 2
    assert not c["num_ps"].disabled and not c["inter_link"].disabled
    assert lab.scenario.strategy.num_ps == 2
    staleness = shown(lab)["mean_staleness"]
    assert staleness == expected(lab.scenario)["mean_staleness"] and staleness[1] != "—"


def test_parameter_count_scales_the_model_and_model_change_resets_it(lab):
    base = lab.scenario.workload
    lab.controls["num_params"].value = base.num_params * 2
    w = lab.scenario.workload
    assert w.num_params == base.num_params * 2
    assert w.flops_per_sample == pytest.approx(base.flops_per_sample * 2, rel=1e-12)
    lab.controls["workload"].value = "resnet50_224"
    assert lab.controls["num_params"].value == make_scenario(workload="resnet50_224").workload.num_params
    assert lab.scenario.workload == make_scenario(workload="resnet50_224").workload


def test_export_and_load_restore_the_identical_state(lab):
    lab.load(make_scenario("v100", "resnet50_224", "multi_worker_mirrored", num_workers=3, devices_per_worker=2,
                           intra_link="nvlink2", inter_link="infiniband_hdr", algorithm="hierarchical",
                           global_batch=384, prefetch=False, compute_distribution="lognormal",
                           compute_sigma=0.25, steps=7))
    lab.controls["num_params"].value = 30_000_000
    assert lab.error.value == ""
    text = lab.export_json()
    assert json.loads(text) == lab.scenario.to_dict()
    assert "data:application/json;base64," in lab.download.value
    twin = WhatIfLab()
    twin.load_json(text)
    assert twin.scenario == lab.scenario
    assert twin.scenario.to_dict() == lab.scenario.to_dict()
    assert {n: w.value for n, w in twin.controls.items()} == {n: w.value for n, w in lab.controls.items()}
    assert twin.controls["workload"].value == "resnet50_224"  # a resized preset, not "(as loaded)"
    assert twin.metrics.value == lab.metrics.value


def test_fields_without_controls_and_custom_hardware_survive_a_round_trip(lab):
    d = default_scenario().to_dict()
    d["cluster"]["device"]["efficiency"] = 0.55
    d["cluster"]["device"]["name"] = "my_gpu"
    d["training"]["shuffle_buffer"] = 1000
    d["training"]["seed"] = 7
    d["notes"] = "tuned by hand"
    custom = Scenario.from_dict(d)
    lab.load(custom)
    assert lab.controls["device"].value == LOADED
    assert lab.scenario == custom and lab.scenario.notes == "tuned by hand"
    lab.controls["devices_per_worker"].value = 2  # a control change keeps the custom device
    assert lab.scenario.cluster.device == custom.cluster.device
    assert lab.scenario.training.shuffle_buffer == 1000
    lab.controls["device"].value = "v100"
    assert lab.scenario.cluster.device == make_scenario(device="v100").cluster.device


@pytest.mark.parametrize("text,message", [
    ("{not json", "text: not valid JSON (Expecting property name enclosed in double quotes at line 1 column 2); "
                  "allowed: a scenario in valid JSON"),
    (json.dumps({**default_scenario().to_dict(), "schema_version": 99}),
     "schema_version=99; allowed: 1 (this distsim's scenario format)"),
    (json.dumps(make_scenario(devices_per_worker=16).to_dict()),
     "cluster.devices_per_worker=16; allowed: 1..8 (the dashboard's range; predict() takes any valid scenario)"),
    (json.dumps(make_scenario(steps=500).to_dict()), "training.steps=500; allowed: 1..200 (the dashboard's range"),
])
def test_bad_scenario_text_is_refused_with_a_message_and_changes_nothing(lab, text, message):
    before = lab.scenario
    lab.json_text.value = text
    lab.load_button.click()
    assert "Not loaded" in lab.share_message.value and message in html.unescape(lab.share_message.value)
    assert lab.scenario == before
    with pytest.raises(InputError, match="^" + re.escape(message)):
        lab.load_json(text)


def test_load_refuses_what_is_not_a_scenario(lab):
    with raises_input("scenario", "{'cluster': 1}", "a Scenario"):
        lab.load({"cluster": 1})


def test_upload_loads_a_scenario_file(lab):
    text = json.dumps(make_scenario("a100", "resnet50_224", devices_per_worker=2, global_batch=128).to_dict())
    lab.upload.value = ({"name": "s.json", "type": "application/json", "size": len(text),
                         "content": memoryview(text.encode()),
                         "last_modified": datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc)},)
    assert lab.share_message.value == "Loaded."
    assert lab.scenario.to_dict() == json.loads(text)


def test_compare_mode_pins_one_setup_and_overlays_the_next(lab):
    pinned = lab.scenario
    lab.pin_button.value = True
    lab.controls["intra_link"].value = "nvlink2"
    assert lab.pinned[0] == pinned
    assert shown(lab, "distsim-pinned") == expected(pinned)
    assert shown(lab) == expected(lab.scenario)
    assert len(lab.timeline.fig.axes) == 2
    assert [ax.get_title(loc="left") for ax in lab.timeline.fig.axes] == ["pinned", "current"]
    assert lab.timeline.fig.axes[0].get_xlim() == lab.timeline.fig.axes[1].get_xlim()  # one time scale
    assert len(lab.scaling.pinned.get_xdata()) == len(lab.scaling.curve.get_xdata()) > 0
    lab.pin_button.value = False
    assert lab.pinned is None and shown(lab, "distsim-pinned") == {}
    assert len(lab.timeline.fig.axes) == 1 and len(lab.scaling.pinned.get_xdata()) == 0


def test_format_metric_and_table():
    assert format_metric("step_time_s", 0.0123) == "12.3 ms"
    assert format_metric("step_time_s", 2.5) == "2.5 s"
    assert format_metric("throughput_samples_per_s", 12345.6) == "12,346 samples/s"
    assert format_metric("speedup", 3.456) == "3.46×"
    assert format_metric("efficiency", 0.5) == "50.0%"
    assert format_metric("mean_staleness", None) == "—"
    with raises_input("key", "'loss'", "one of ('step_time_s', 'throughput_samples_per_s', 'speedup', "
                      "'efficiency', 'comm_fraction', 'mean_staleness')"):
        format_metric("loss", 1.0)
    summary = predict(default_scenario()).summary
    table = metrics_html(summary)
    assert len(CELL.findall(table)) == len(METRICS)


def test_schedule_player_slider_shows_that_step():
    schedule = build_schedule("ring", 4, 1000)
    player = SchedulePlayer(schedule, dpi=40)
    assert player.slider.max == player.play.max == schedule.num_steps
    first = bytes(player.image.value)
    player.slider.value = 4
    assert "step 4 of 6" in player.drawing.ax.get_title()
    assert bytes(player.image.value).startswith(PNG_MAGIC) and bytes(player.image.value) != first
    with raises_input("step", "7", "an integer >= 1 and <= 6 (1-based, as on the slider)"):
        player.show(7)


def test_raster_timeline_paints_each_event_in_its_colour():
    events = [Event("d0", "compute", 0.0, 0.4, 0, "forward"), Event("d0", "idle", 0.4, 0.5, 0, "wait"),
              Event("d0/comm", "comm", 0.2, 0.45, 0, "bucket 1"), Event("d1", "update", 0.45, 0.4501, 0, "update")]
    trace = Trace.from_events(events)
    fig, ax = new_figure(4, 2)
    fig.set_layout_engine("none")
    drawing = TimelineDrawing(ax, legend=False, raster=True)
    drawing.update(trace)
    image = drawing.bars.get_array()
    height, width = image.shape[:2]
    styles = event_styles(trace)

    def pixel(t_s, row, lane_offset):
        x = int(t_s / 0.5 * width)
        y = int((row + lane_offset + 0.5) / 2 * height)
        return image[y, x].tolist()

    assert pixel(0.1, 0, -0.2) == _RGBA[styles[0]].tolist()  # forward, upper lane of d0
    assert pixel(0.47, 0, -0.2) == _RGBA[styles[1]].tolist()  # idle
    assert pixel(0.3, 0, 0.3) == _RGBA[styles[2]].tolist()  # d0/comm is d0's lower lane
    assert pixel(0.1, 0, 0.3)[3] == 0  # no communication yet: transparent
    assert drawing.ax.get_yticklabels()[0].get_text() == "d0" and len(drawing.ax.get_yticks()) == 2
    # the 0.1 ms update is far narrower than a pixel but still gets one column
    update_rows = image[int(1.3 / 2 * height), :, :3]
    assert (update_rows == _RGBA[styles[3], :3]).all(axis=1).sum() >= 1


def test_redraws_after_any_path_match_a_fresh_dashboard(lab):
    """Cached backgrounds must never leak an earlier state into the picture."""
    for name, value in (("steps", 3), ("devices_per_worker", 6), ("steps", 12), ("devices_per_worker", 4),
                        ("intra_link", "nvlink2"), ("steps", 3)):
        lab.controls[name].value = value
    lab.pin_button.value = True
    lab.pin_button.value = False
    fresh = WhatIfLab(lab.scenario)
    assert bytes(lab.timeline.image.value) == bytes(fresh.timeline.image.value)
    assert bytes(lab.scaling.image.value) == bytes(fresh.scaling.image.value)


def test_cluster_mechanism_controls_set_their_scenario_fields(lab):
    c = lab.controls
    with lab._hold():
        c["strategy"].value = "parameter_server"
        c["num_workers"].value = 4
        c["devices_per_worker"].value = 2
        c["device"].value = "v100"
        c["ps_mode"].value = "sync"
        c["ps_placement"].value = "worker_hosts"
        c["ps_local_sum"].value = True
        c["topology"].value = "dgx1_v100"
        c["grouping"].value = "fusion"
        c["fusion_mib"].value = 32.0
    lab.update()
    assert lab.error.value == ""
    s = lab.scenario
    assert (s.strategy.mode, s.strategy.ps_placement, s.strategy.ps_local_sum) == ("sync", "worker_hosts", True)
    assert s.cluster.topology.name == "dgx1_v100"
    assert (s.training.grouping, s.training.fusion_threshold_bytes) == ("fusion", 32 * 2**20)
    assert lab.result.summary == predict(s).summary
    # The round trip keeps them, and the PS controls are live only for a synchronous PS.
    twin = WhatIfLab()
    twin.load_json(lab.export_json())
    assert twin.scenario == s and not twin.controls["ps_placement"].disabled
    with lab._hold():
        c["ps_mode"].value = "async"
    lab.update()
    assert lab.scenario.strategy.ps_placement == "own_hosts" and c["ps_placement"].disabled
    # A topology needs a GPU: on a CPU device the control is off and the scenario has none.
    with lab._hold():
        c["strategy"].value = "mirrored"
        c["num_workers"].value = 1
        c["device"].value = "this_machine_core"
    lab.update()
    assert lab.scenario.cluster.topology is None and c["topology"].disabled
    lab.load(default_scenario())


# -------------------------------------------------- issue 23: legend, visible slivers, the published start


def test_dashboard_timeline_carries_its_legend(lab):
    (legend,) = lab.timeline.fig.legends
    assert [t.get_text() for t in legend.get_texts()] == [name for name, _ in TIMELINE_STYLES]
    assert "upper lane = the device" in legend.get_title().get_text()


def test_min_px_keeps_a_sub_pixel_compute_visible_over_the_wait_after_it():
    # 0.1 % of a 1 s axis is far below one pixel of a 4-inch axes; the wait that follows fills the rest
    events = [Event("d0", "compute", 0.5, 0.501, 0, "backward"), Event("d0", "idle", 0.501, 1.0, 0, "wait"),
              Event("d0", "idle", 0.0, 0.5, 0, "wait")]
    trace = Trace.from_events(events)
    styles = event_styles(trace)
    columns = {}
    for min_px in (1, 3):
        fig, ax = new_figure(4, 1)
        fig.set_layout_engine("none")
        drawing = TimelineDrawing(ax, legend=False, raster=True, min_px=min_px)
        drawing.update(trace)
        image = drawing.bars.get_array()
        upper_lane = image[int(0.3 * image.shape[0]), :, :3]   # row 0's upper lane spans 8 %..54 % of the height
        columns[min_px] = int((upper_lane == _RGBA[styles[0], :3]).all(axis=1).sum())
    assert columns == {1: 1, 3: 3}


def test_dashboard_starts_from_the_published_cell_as_notebook_04_predicts_it():
    from distsim.published import compare as compare_published, load_tables

    table = load_tables()[0]
    _, cells = compare_published(table)
    (cell,) = [c for c in cells if c.dataset == "cats_vs_dogs" and c.column == "4 GPUs, global batch 256"]
    start = default_scenario()
    assert (start.cluster.devices_per_worker, start.training.global_batch) == (4, 256)
    # The same scenario: the published cell runs one whole epoch (its fill and final step once), and so does the
    # dashboard's start; equal to rounding, since both are the same predict call.
    assert start.training.steps == predict(start).summary.steps_per_epoch
    assert predict(start).summary.epoch_time_s * table.epochs_reported == pytest.approx(cell.predicted, rel=1e-9)
