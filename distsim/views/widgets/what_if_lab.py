"""The what-if dashboard: controls for the cluster, model and strategy; the
predicted timeline, key metrics and scaling curve, updated live; scenario
JSON export/import; a compare mode. Works in JupyterLab, Colab and Voilà."""

from __future__ import annotations

import base64
import dataclasses
import html
import json
import time
from collections import OrderedDict
from contextlib import contextmanager
from functools import cache

import ipywidgets as widgets
import numpy as np

from distsim import published
from distsim import scenario as sc
from distsim.engines import predict, sweep
from distsim.published.reference import calibrate
from distsim.results.result import Result, Summary
from distsim.validation import InputError, InstanceOf
from distsim.views.widgets.panels import ScalingPanel, ScalingPoint, TimelinePanel, metrics_html


# ------------------------------------------------------------------ dashboard

#: Control ranges (inclusive). 8 x 8 keeps every setup at <= 64 replicas.
MAX_WORKERS = 8
MAX_DEVICES_PER_WORKER = 8
MAX_PS_SHARDS = 8
MAX_STEPS = 200
MAX_GLOBAL_BATCH = 65536
#: Horovod fusion buffer range, MiB.
MAX_FUSION_MIB = 512
PARAM_RANGE = (1_000, 100_000_000_000)
#: Replica counts of the scaling curve.
SCALING_REPLICAS = (1, 2, 4, 8, 16, 32, 64)
#: Strategies whose scaling curve adds workers (the others add devices to one machine).
MULTI_WORKER = ("multi_worker_mirrored", "parameter_server")
DEFAULT = "default"
LOADED = "(as loaded)"
NONE = "none"


#: The published cell the dashboard starts from: table 0 (MirroredStrategy,
#: 4x GTX 1080 Ti, MobileNetV2), its cats_vs_dogs row, column 2 (global batch 256).
DEFAULT_CELL = (0, "cats_vs_dogs", 2)


@cache
def _published_default() -> sc.Scenario:
    table_index, dataset, column = DEFAULT_CELL
    table = published.load_tables()[table_index]
    seconds_per_example = calibrate(table)  # from the no-strategy column only, as notebook 04 does
    return published.cell_scenario(table, column, dataset, seconds_per_example)


def default_scenario() -> sc.Scenario:
    """What the dashboard starts with: the published cell :data:`DEFAULT_CELL`
    (4 GTX 1080 Ti in one machine under MirroredStrategy, MobileNetV2 on
    cats_vs_dogs, global batch 256), with the GPU's seconds per example
    calibrated from the table's no-strategy column as notebook 04 does; one
    whole epoch of steps, as the published cell is simulated, so the epoch
    time on display is the one notebook 04 predicts."""
    return _published_default().replace("name", "4x GTX 1080 Ti, MirroredStrategy")


_COMPONENT_CLASSES = {"device": sc.Device, "link": sc.Link, "workload": sc.Workload, "topology": sc.Topology}
#: Preset kind of each component control.
_COMPONENT_KINDS = {"device": "device", "intra_link": "link", "inter_link": "link", "workload": "workload"}


def resized_workload(spec: dict, factor: float) -> dict:
    """A workload ``factor`` times the size (as a scenario dict): parameters
    (every gradient tensor alike), FLOPs per example and any measured
    per-example compute time scale together."""
    spec = dict(spec)
    spec["num_params"] = int(round(spec["num_params"] * factor))
    if spec.get("tensor_params"):
        spec["tensor_params"] = _scaled_counts(spec["tensor_params"], spec["num_params"])
    spec["flops_per_sample"] = spec["flops_per_sample"] * factor
    if spec.get("compute_s_per_sample") is not None:
        spec["compute_s_per_sample"] = spec["compute_s_per_sample"] * factor
    note = f"what-if lab: {spec['name']} resized x{factor:.4g}"
    spec["sources"] = {**spec.get("sources", {}), "num_params": note, "flops_per_sample": note}
    return spec


def _scaled_counts(counts: list[int], total: int) -> list[int]:
    """``counts`` scaled to sum to ``total`` (largest-remainder rounding, each >= 1)."""
    raw = np.asarray(counts, dtype=float) * total / sum(counts)
    out = np.maximum(np.floor(raw).astype(np.int64), 1)
    short = total - int(out.sum())
    order = np.argsort(-(raw - np.floor(raw)) if short > 0 else -out)
    out[order[:abs(short)]] += 1 if short > 0 else -1
    return out.tolist()


class WhatIfLab:
    """The what-if dashboard. Display ``lab.widget`` (or ``lab`` itself).

    Every control maps to one :class:`~distsim.scenario.Scenario` field;
    fields without a control keep the values of the loaded scenario, so an
    exported scenario loads back into the identical state. Each change runs
    ``distsim.predict`` and redraws; a setup the simulator rejects shows the
    simulator's message in ``lab.error`` instead of a traceback.

    Attributes:
        controls: name -> control widget.
        scenario: the scenario on display (None while the controls are invalid).
        result: its prediction.
        error: HTML widget with the rejection message ("" when valid).
        metrics: HTML widget with the metrics table (see :func:`metrics_html`).
        update_times_s: seconds each update took, from control change to
            redrawn figures (what ``benchmarks/bench_dashboard.py`` reports).
    """

    def __init__(self, scenario: sc.Scenario | None = None, dpi: float = 72):
        self._base = scenario if scenario is not None else default_scenario()
        self._presets: dict = {}
        self._holding = False
        self._scaling_cache: OrderedDict[str, list[ScalingPoint]] = OrderedDict()
        self.scenario: sc.Scenario | None = None
        self.result: Result | None = None
        self.pinned: tuple[sc.Scenario, Result, list[ScalingPoint]] | None = None
        self.update_times_s: list[float] = []
        self._make_controls()
        self.error = widgets.HTML("", layout=widgets.Layout(width="100%"))
        self.error.add_class("distsim-error")
        self.metrics = widgets.HTML("")
        self.metrics.add_class("distsim-metrics-box")
        self.timeline = TimelinePanel(dpi)
        self.scaling = ScalingPanel(dpi, max(SCALING_REPLICAS))
        self._make_share_and_compare()
        self.widget = self._layout()
        self.load(self._base)

    # ---------------------------------------------------------------- controls

    def _make_controls(self) -> None:
        style = {"description_width": "130px"}
        wide = widgets.Layout(width="330px")

        def dropdown(description, options):
            return widgets.Dropdown(options=options, description=description, style=style, layout=wide)

        def slider(description, low, high):
            return widgets.IntSlider(min=low, max=high, description=description, style=style, layout=wide,
                                     continuous_update=False)

        defaults = [("strategy default", DEFAULT)]
        self.controls = {
            "strategy": dropdown("strategy", sc.STRATEGIES),
            "num_workers": slider("workers", 1, MAX_WORKERS),
            "devices_per_worker": slider("devices per worker", 1, MAX_DEVICES_PER_WORKER),
            "device": dropdown("device", sc.preset_names("device")),
            "intra_link": dropdown("intra-worker link", sc.preset_names("link")),
            "inter_link": dropdown("inter-worker link", sc.preset_names("link")),
            "workload": dropdown("model", sc.preset_names("workload")),
            "num_params": widgets.BoundedIntText(min=PARAM_RANGE[0], max=PARAM_RANGE[1], description="parameters",
                                                 style=style, layout=wide),
            "global_batch": widgets.BoundedIntText(min=1, max=MAX_GLOBAL_BATCH, description="global batch",
                                                   style=style, layout=wide),
            "algorithm": dropdown("all-reduce", defaults + [(a, a) for a in sc.ALGORITHMS]),
            "prefetch": dropdown("prefetch", defaults + [("on", "on"), ("off", "off")]),
            "compute_distribution": dropdown("compute times", sc.COMPUTE_DISTRIBUTIONS),
            "compute_sigma": widgets.FloatSlider(min=0.0, max=1.0, step=0.05, description="straggler spread σ",
                                                 style=style, layout=wide, continuous_update=False),
            "num_ps": slider("PS shards", 1, MAX_PS_SHARDS),
            "ps_mode": dropdown("PS training", [("asynchronous", "async"), ("synchronous", "sync")]),
            "ps_placement": dropdown("PS placement", [("own hosts", "own_hosts"), ("on the workers' hosts",
                                                      "worker_hosts"), ("host CPU (one worker)", "host_cpu")]),
            "ps_local_sum": widgets.Checkbox(description="sum a worker's devices first", style=style, layout=wide),
            "topology": dropdown("server topology", [("none (one port each)", NONE)]
                                 + [(n, n) for n in sc.preset_names("topology")]),
            "protocol": dropdown("collectives", defaults + [("alpha-beta", "alpha_beta"), ("NCCL", "nccl")]),
            "inter_algorithm": dropdown("between nodes", sc.INTER_ALGORITHMS),
            "grouping": dropdown("gradient grouping", sc.GROUPINGS),
            "fusion_mib": widgets.BoundedFloatText(min=0.0, max=MAX_FUSION_MIB, step=8.0,
                                                   description="fusion buffer MiB", style=style, layout=wide),
            "steps": slider("steps simulated", 1, MAX_STEPS),
        }
        for name, control in self.controls.items():
            control.add_class(f"distsim-{name.replace('_', '-')}")
            control.observe(self._on_change, names="value")
        self.controls["num_params"].tooltip = (
            "gradient size; compute per example scales with it (a model k times larger costs k times the FLOPs)")

    def _on_change(self, change) -> None:
        if self._holding:
            return
        if change["owner"] is self.controls["workload"]:
            with self._hold():
                self.controls["num_params"].value = self._chosen("workload").num_params
        self.update()

    @contextmanager
    def _hold(self):
        """Set several controls without an update after each."""
        before, self._holding = self._holding, True
        try:
            yield
        finally:
            self._holding = before

    def _preset(self, kind: str, name: str):
        """A preset component, read from the preset files once per lab."""
        if (kind, name) not in self._presets:
            values, sources = sc.load_preset(kind, name)
            self._presets[kind, name] = _COMPONENT_CLASSES[kind](name=name, **values, sources=sources)
        return self._presets[kind, name]

    def _chosen(self, key: str):
        """The device, link or workload the control ``key`` selects."""
        choice = self.controls[key].value
        if choice == LOADED:
            b = self._base
            return {"device": b.cluster.device, "intra_link": b.cluster.intra_link,
                    "inter_link": b.cluster.inter_link, "workload": b.workload}[key]
        return self._preset(_COMPONENT_KINDS[key], choice)

    def _component_options(self, kind: str, component) -> tuple[list, str]:
        """Dropdown options for a device, link or workload, and the one to
        select: its preset when it is one (for a workload also a preset
        resized with the parameters control), else the loaded component."""
        names = sc.preset_names(kind)
        options = [(n, n) for n in names]
        if component.name in names:
            preset = self._preset(kind, component.name)
            if preset == component:
                return options, component.name
            if kind == "workload":
                spec = resized_workload(dataclasses.asdict(preset), component.num_params / preset.num_params)
                if sc.Workload(**spec) == component:
                    return options, component.name
        return options + [(f"{component.name} {LOADED}", LOADED)], LOADED

    # ------------------------------------------------------------ scenario

    def build_scenario(self) -> sc.Scenario:
        """The scenario the controls describe (raises ``ValueError`` with the
        simulator's message when the combination is invalid)."""
        c = {name: control.value for name, control in self.controls.items()}
        d = self._base.to_dict()
        cluster, strategy, training = d["cluster"], d["strategy"], d["training"]
        cluster["num_workers"] = c["num_workers"]
        cluster["devices_per_worker"] = c["devices_per_worker"]
        for key in ("device", "intra_link", "inter_link"):  # inline: no preset file is read per change
            cluster[key] = dataclasses.asdict(self._chosen(key))
        if self._chosen("device").kind != "cpu":
            cluster["physical_cores"] = None  # only CPU devices share cores
        workload = self._chosen("workload")
        d["workload"] = dataclasses.asdict(workload)
        if c["num_params"] != workload.num_params:
            d["workload"] = resized_workload(d["workload"], c["num_params"] / workload.num_params)
        strategy["name"] = c["strategy"]
        strategy["algorithm"] = None if c["algorithm"] == DEFAULT else c["algorithm"]
        strategy["num_ps"] = c["num_ps"]
        gpu = self._chosen("device").kind == "gpu"
        cluster["topology"] = (dataclasses.asdict(self._preset("topology", c["topology"]))
                               if gpu and c["topology"] != NONE else None)
        strategy["protocol"] = None if c["protocol"] == DEFAULT or not gpu else c["protocol"]
        strategy["inter_algorithm"] = c["inter_algorithm"] if strategy["algorithm"] == "hierarchical" else "ring"
        ps = c["strategy"] == "parameter_server"
        if ps:  # asynchronous is the strategy's default: stored as null, like a loaded scenario
            strategy["mode"] = None if c["ps_mode"] == "async" else "sync"
        synchronous_ps = ps and c["ps_mode"] == "sync"
        strategy["ps_placement"] = c["ps_placement"] if synchronous_ps else "own_hosts"
        strategy["ps_local_sum"] = bool(c["ps_local_sum"]) if synchronous_ps else False
        training["grouping"] = c["grouping"]
        if c["grouping"] != "buckets":
            training["num_buckets"] = 1
        if c["grouping"] != "pack":
            training["bytes_per_pack"] = 0
        # A scenario refuses a knob the model would ignore: other groupings and distributions get the default.
        training["fusion_threshold_bytes"] = (int(round(c["fusion_mib"] * 2**20)) if c["grouping"] == "fusion"
                                              else sc.Training().fusion_threshold_bytes)
        training["global_batch"] = c["global_batch"]
        training["prefetch"] = {DEFAULT: None, "on": True, "off": False}[c["prefetch"]]
        training["compute_distribution"] = c["compute_distribution"]
        training["compute_sigma"] = (c["compute_sigma"] if c["compute_distribution"] == "lognormal"
                                     else sc.Training().compute_sigma)
        training["steps"] = c["steps"]
        return sc.Scenario.from_dict(d)

    def load(self, scenario: sc.Scenario) -> None:
        """Show ``scenario``: every control takes its value, every field
        without a control is kept, then one update runs."""
        InstanceOf(sc.Scenario, "a Scenario")("scenario", scenario)
        self._check_ranges(scenario)
        self._base = scenario
        s, ctl = scenario, self.controls
        with self._hold():
            ctl["strategy"].value = s.strategy.name
            ctl["num_workers"].value = s.cluster.num_workers
            ctl["devices_per_worker"].value = s.cluster.devices_per_worker
            for kind, key, component in (("device", "device", s.cluster.device),
                                         ("link", "intra_link", s.cluster.intra_link),
                                         ("link", "inter_link", s.cluster.inter_link),
                                         ("workload", "workload", s.workload)):
                options, value = self._component_options(kind, component)
                ctl[key].options = options
                ctl[key].value = value
            ctl["num_params"].value = s.workload.num_params
            ctl["global_batch"].value = s.training.global_batch
            ctl["algorithm"].value = s.strategy.algorithm or DEFAULT
            ctl["prefetch"].value = {None: DEFAULT, True: "on", False: "off"}[s.training.prefetch]
            ctl["compute_distribution"].value = s.training.compute_distribution
            ctl["compute_sigma"].value = s.training.compute_sigma
            ctl["num_ps"].value = s.strategy.num_ps
            ctl["ps_mode"].value = s.strategy.resolved_mode if s.strategy.name == "parameter_server" else "async"
            ctl["ps_placement"].value = s.strategy.ps_placement
            ctl["ps_local_sum"].value = s.strategy.ps_local_sum
            ctl["topology"].value = NONE if s.cluster.topology is None else self._topology_option(s.cluster.topology)
            ctl["protocol"].value = s.strategy.protocol or DEFAULT
            ctl["inter_algorithm"].value = s.strategy.inter_algorithm
            ctl["grouping"].value = s.training.grouping
            ctl["fusion_mib"].value = s.training.fusion_threshold_bytes / 2**20
            ctl["steps"].value = s.training.steps
        self.update()

    def _topology_option(self, topology: sc.Topology) -> str:
        """The topology control's value for a loaded topology: only presets can be shown."""
        if topology.name in sc.preset_names("topology") and self._preset("topology", topology.name) == topology:
            return topology.name
        raise InputError("cluster.topology", topology.name, f"one of the topology presets {sc.preset_names('topology')} "
                         "(the dashboard shows presets only)")

    def _check_ranges(self, s: sc.Scenario) -> None:
        """A scenario the controls cannot show is refused, never clipped."""
        for path in ("cluster.num_workers", "cluster.devices_per_worker", "strategy.num_ps", "training.steps",
                     "training.global_batch", "workload.num_params", "training.compute_sigma"):
            control, value = self.controls[path.rpartition(".")[2]], s.value_at(path)
            if not control.min <= value <= control.max:
                raise InputError(path, value, f"{control.min}..{control.max} (the dashboard's range; "
                                 "predict() takes any valid scenario)")
        fusion = s.training.fusion_threshold_bytes
        if fusion > MAX_FUSION_MIB * 2**20:
            raise InputError("training.fusion_threshold_bytes", fusion, f"0..{MAX_FUSION_MIB * 2**20:,} (the "
                             "dashboard's range; predict() takes any valid scenario)")

    # ------------------------------------------------------------ updates

    def update(self) -> None:
        """Rebuild the scenario from the controls, predict, redraw."""
        start = time.perf_counter()
        self._enable_controls()
        try:
            scenario = self.build_scenario()
            result = predict(scenario)
            points = self._scaling_points(scenario)
        except ValueError as exc:
            self._show_error(str(exc))
        else:
            self.scenario, self.result = scenario, result
            self.error.value = ""
            pinned = self.pinned
            self.metrics.value = metrics_html(result.summary, pinned[1].summary if pinned else None,
                                              result.meta.get("warning", ""))
            self.timeline.show(result.trace, pinned[1].trace if pinned else None)
            here = ScalingPoint(scenario.num_replicas, result.summary.speedup) \
                if result.summary.speedup is not None else None
            self.scaling.show(points, here, pinned[2] if pinned else None)
        self.update_times_s.append(time.perf_counter() - start)

    def _show_error(self, message: str) -> None:
        self.scenario = self.result = None
        self.error.value = (
            '<div style="border:1px solid #D55E00;background:#fdf0e8;padding:6px;border-radius:4px">'
            f"<b>The simulator rejects this setup:</b> {html.escape(message)}</div>")
        self.metrics.value = metrics_html(Summary(step_time_s=None, throughput_samples_per_s=None))

    def _enable_controls(self) -> None:
        c = self.controls
        ps = c["strategy"].value == "parameter_server"
        c["num_ps"].disabled = not ps
        c["ps_mode"].disabled = not ps
        c["ps_placement"].disabled = c["ps_local_sum"].disabled = not (ps and c["ps_mode"].value == "sync")
        gpu = self._chosen("device").kind == "gpu"
        c["topology"].disabled = c["protocol"].disabled = not gpu
        c["inter_algorithm"].disabled = c["algorithm"].value != "hierarchical"
        c["fusion_mib"].disabled = c["grouping"].value != "fusion"
        c["compute_sigma"].disabled = c["compute_distribution"].value != "lognormal"
        c["inter_link"].disabled = c["num_workers"].value == 1

    def _scaling_points(self, scenario: sc.Scenario) -> list[ScalingPoint]:
        """Speedup of this setup at each of :data:`SCALING_REPLICAS`, adding
        workers (multi-worker strategies) or devices to the one machine, from
        ``distsim.sweep`` (closed form, mean compute times). Cached on
        everything but the varied count."""
        if scenario.strategy.name in ("default", "one_device"):
            return []
        multi = scenario.strategy.name in MULTI_WORKER
        field = "cluster.num_workers" if multi else "cluster.devices_per_worker"
        per = scenario.cluster.devices_per_worker if multi else 1
        counts = [n // per for n in SCALING_REPLICAS if n % per == 0]
        d = scenario.to_dict()
        d["cluster"][field.split(".")[1]] = 0
        key = json.dumps(d, sort_keys=True)
        if key not in self._scaling_cache:
            try:
                table = sweep(scenario, {field: counts})
            except ValueError:  # e.g. drop_remainder with fewer examples than replicas at some size
                points = []
            else:
                points = [ScalingPoint(int(n), float(x)) for n, x in zip(table["num_replicas"], table["speedup"])]
            self._scaling_cache[key] = points
            if len(self._scaling_cache) > 64:
                self._scaling_cache.popitem(last=False)
        self._scaling_cache.move_to_end(key)
        return self._scaling_cache[key]

    # ------------------------------------------------------------ share, compare

    def _make_share_and_compare(self) -> None:
        self.json_text = widgets.Textarea(placeholder="scenario JSON: Export fills it; paste one and press Load",
                                          layout=widgets.Layout(width="330px", height="120px"))
        self.json_text.add_class("distsim-json")
        self.export_button = widgets.Button(description="Export", tooltip="write the current scenario as JSON")
        self.load_button = widgets.Button(description="Load", tooltip="load the scenario JSON in the box")
        self.upload = widgets.FileUpload(accept=".json", multiple=False, description="Load file")
        self.download = widgets.HTML("")
        self.share_message = widgets.HTML("")
        self.export_button.on_click(lambda _: self.export_json())
        self.load_button.on_click(lambda _: self._load_text(self.json_text.value))
        self.upload.observe(self._on_upload, names="value")
        self.pin_button = widgets.ToggleButton(description="Pin for comparison", icon="thumb-tack",
                                               tooltip="keep this setup and compare the next ones with it")
        self.pin_button.add_class("distsim-pin")
        self.pin_button.observe(self._on_pin, names="value")

    def export_json(self) -> str:
        """The current scenario as JSON text (also put in the text box and
        offered as a download)."""
        if self.scenario is None:
            self.share_message.value = "Nothing to export: fix the setup first."
            return ""
        text = json.dumps(self.scenario.to_dict(), indent=1)
        self.json_text.value = text
        payload = base64.b64encode(text.encode()).decode()
        self.download.value = (f'<a download="scenario.json" href="data:application/json;base64,{payload}">'
                               "download scenario.json</a>")
        self.share_message.value = ""
        return text

    def load_json(self, text: str) -> None:
        """Load a scenario from JSON text (raises :class:`InputError` if invalid)."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError("text", None, "a scenario in valid JSON",
                             problem=f"not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
        self.load(sc.Scenario.from_dict(data))

    def _load_text(self, text: str) -> None:
        try:
            self.load_json(text)
        except ValueError as exc:
            self.share_message.value = f'<span style="color:#D55E00">Not loaded: {html.escape(str(exc))}</span>'
        else:
            self.share_message.value = "Loaded."

    def _on_upload(self, change) -> None:
        files = change["new"]
        if files:
            self._load_text(bytes(files[0]["content"]).decode("utf-8", errors="replace"))

    def _on_pin(self, change) -> None:
        if change["new"] and self.scenario is not None:
            self.pinned = (self.scenario, self.result, self._scaling_points(self.scenario))
            self.pin_button.description = "Unpin"
        else:
            self.pinned = None
            self.pin_button.value = False
            self.pin_button.description = "Pin for comparison"
        self.update()

    # ------------------------------------------------------------ layout

    def _layout(self) -> widgets.Widget:
        c = self.controls

        def section(title, names):
            return [widgets.HTML(f"<b>{title}</b>")] + [c[n] for n in names]

        controls = widgets.VBox(
            section("Cluster", ["strategy", "num_workers", "devices_per_worker", "device", "intra_link",
                                "inter_link", "topology"])
            + section("Model and data", ["workload", "num_params", "global_batch", "steps"])
            + section("Communication", ["algorithm", "inter_algorithm", "protocol", "grouping", "fusion_mib"])
            + section("Parameter servers", ["num_ps", "ps_mode", "ps_placement", "ps_local_sum"])
            + section("Knobs", ["prefetch", "compute_distribution", "compute_sigma"])
            + [widgets.HTML("<b>Share</b>"), self.json_text,
               widgets.HBox([self.export_button, self.load_button]), self.upload, self.download,
               self.share_message, widgets.HTML("<b>Compare</b>"), self.pin_button],
            layout=widgets.Layout(width="350px"))
        results = widgets.VBox([self.error, widgets.HBox([self.metrics, self.scaling.image]),
                                self.timeline.image])  # the timeline's figure carries its legend
        root = widgets.HBox([controls, results])
        root.add_class("distsim-what-if-lab")
        return root

    def _ipython_display_(self):
        from IPython.display import display

        display(self.widget)
