"""The what-if lab's panels: the metrics table, the timeline and the scaling curve.

Figures are drawn with matplotlib's Agg renderer and shown as PNG images in
``ipywidgets.Image``; a redraw re-renders only the artists that changed
(:class:`distsim.views.plots.style.BlitRenderer`).
"""

from __future__ import annotations

import html
from dataclasses import dataclass

import ipywidgets as widgets
import numpy as np
from matplotlib.collections import LineCollection
from matplotlib.ticker import FuncFormatter, MaxNLocator
from matplotlib.transforms import ScaledTranslation

from distsim.results.result import Summary
from distsim.validation import OneOf
from distsim.views.plots.style import OKABE_ITO, BlitRenderer, freeze_layout, new_figure
from distsim.views.plots.timeline import TimelineDrawing, timeline_legend_handles

#: Narrowest bar of the dashboard's timeline, in pixels (idle/wait excepted):
#: a few milliseconds of compute in a second-long input wait stay visible.
MIN_BAR_PX = 3
LEGEND_TITLE = (f"each device row: upper lane = the device, lower lane = its communication; "
                f"every bar is at least {MIN_BAR_PX} pixels wide")


# ------------------------------------------------------------------ metrics


@dataclass(frozen=True)
class Metric:
    """One headline number of the dashboard: a :class:`Summary` field."""

    key: str
    label: str


#: The metrics the dashboard shows, in order.
METRICS: tuple[Metric, ...] = (
    Metric("step_time_s", "step time"),
    Metric("throughput_samples_per_s", "throughput"),
    Metric("speedup", "speedup vs one device (weak scaling: same per-replica batch)"),
    Metric("efficiency", "scaling efficiency"),
    Metric("comm_fraction", "communication share"),
    Metric("mean_staleness", "mean staleness"),
)


def format_metric(key: str, value: float | None) -> str:
    """How the dashboard writes a metric value (``"—"`` when unknown)."""
    OneOf(tuple(m.key for m in METRICS))("key", key)
    if value is None or not np.isfinite(value):
        return "—"
    if key == "step_time_s":
        return f"{value * 1e3:.4g} ms" if value < 1 else f"{value:.4g} s"
    if key == "throughput_samples_per_s":
        return f"{value:,.0f} samples/s" if value >= 100 else f"{value:.3g} samples/s"
    if key == "speedup":
        return f"{value:.3g}×"
    if key in ("efficiency", "comm_fraction"):
        return f"{value:.1%}"
    return f"{value:.3g} updates"  # mean_staleness


def _value_attr(value: float | None) -> str:
    return "" if value is None else repr(float(value))


def bottleneck_text(summary: Summary) -> str:
    """How the dashboard names a prediction's bottleneck (``"—"`` when unknown)."""
    if summary.bottleneck is None:
        return "—"
    return f"{summary.bottleneck} ({summary.bottleneck_share:.0%} of the step)"


def _bottleneck_row(summary: Summary, pinned: Summary | None) -> str:
    """The table's last row: what limits the step (a word, not a number, so not a ``distsim-metric`` cell)."""
    cells = f'<td class="distsim-bottleneck" data-bottleneck="{summary.bottleneck or ""}">{bottleneck_text(summary)}</td>'
    if pinned is not None:
        change = "same" if pinned.bottleneck == summary.bottleneck else "changed"
        cells += f'<td class="distsim-bottleneck-pinned">{bottleneck_text(pinned)}</td><td>{change}</td>'
    return f"<tr><th style='text-align:left'>bottleneck</th>{cells}</tr>"


def metrics_html(summary: Summary, pinned: Summary | None = None, warning: str = "") -> str:
    """The metrics table. Each value cell carries ``data-metric`` (the
    Summary field) and ``data-value`` (the exact float, ``repr``), which is
    what the browser test reads. A last row names the bottleneck
    (``Summary.bottleneck``); ``warning`` (``Result.meta["warning"]``), if
    any, follows the table."""
    head = "<tr><th></th><th>current</th>" + ("<th>pinned</th><th>change</th>" if pinned else "") + "</tr>"
    rows = []
    for m in METRICS:
        value = getattr(summary, m.key)
        cells = (f'<td class="distsim-metric" data-metric="{m.key}" data-value="{_value_attr(value)}">'
                 f"{format_metric(m.key, value)}</td>")
        if pinned is not None:
            old = getattr(pinned, m.key)
            change = f"{value / old - 1:+.1%}" if value is not None and old not in (None, 0) else "—"
            cells += (f'<td class="distsim-pinned" data-metric="{m.key}" data-value="{_value_attr(old)}">'
                      f"{format_metric(m.key, old)}</td><td>{change}</td>")
        rows.append(f"<tr><th style='text-align:left'>{m.label}</th>{cells}</tr>")
    rows.append(_bottleneck_row(summary, pinned))
    table = f'<table class="distsim-metrics" style="border-spacing:10px 2px">{head}{"".join(rows)}</table>'
    if warning:
        table += f'<div class="distsim-warning" style="max-width:32em;color:#8a3b00">{html.escape(warning)}</div>'
    return table


# ------------------------------------------------------------------ figures


class FastXTicks:
    """Tick marks and labels of an x axis as a few plain artists.

    Matplotlib's axis machinery re-measures every tick label and places the
    axis label on each draw; in a dashboard that redraws the time axis on
    every change, that was the largest single cost. These ticks are a fixed
    pool of texts and one line collection, moved and relabelled in place.
    """

    def __init__(self, ax, labels: bool = True, max_ticks: int = 9):
        self.ax = ax
        self.locator = MaxNLocator(nbins=max_ticks - 1, steps=[1, 2, 2.5, 5, 10])
        ax.tick_params(axis="x", bottom=False, labelbottom=False)
        trans = ax.get_xaxis_transform()  # x in data, y in axes fraction
        below = trans + ScaledTranslation(0, -4 / 72, ax.figure.dpi_scale_trans)
        size = ax.xaxis.get_ticklabels()[0].get_fontsize() if ax.xaxis.get_ticklabels() else "medium"
        self.texts = [ax.text(0, 0, "", transform=below, ha="center", va="top", fontsize=size, clip_on=False)
                      for _ in range(max_ticks)] if labels else []
        self.marks = LineCollection([], colors="black", linewidths=0.8, transform=trans, clip_on=False)
        ax.add_collection(self.marks)

    @property
    def artists(self) -> list:
        return [self.marks, *self.texts]

    def update(self, x_max: float) -> None:
        """Ticks for an axis from 0 to ``x_max``."""
        ticks = [t for t in self.locator.tick_values(0, x_max) if 0 <= t <= x_max * (1 + 1e-9)]
        self.marks.set_segments([[(t, 0), (t, -0.025)] for t in ticks])
        for i, text in enumerate(self.texts):
            if i < len(ticks):
                text.set_x(ticks[i])
                text.set_text(f"{ticks[i]:g}")
            else:
                text.set_text("")


class TimelinePanel:
    """The dashboard's timeline figure: one raster timeline, or two (pinned
    above current) on one time scale in compare mode.

    Static parts (device labels, axis label with its unit) live in cached
    backgrounds; each redraw pastes the painted bars and draws the time
    ticks and the frame."""

    def __init__(self, dpi: float, width_in: float = 8.6, height_in: float = 4.0):
        self.dpi, self.size = dpi, (width_in, height_in)
        self.image = widgets.Image(format="png")
        self._build(compare=False)

    def _build(self, compare: bool) -> None:
        rows = 2 if compare else 1
        self.fig, axes = new_figure(self.size[0], self.size[1] * (1.6 if compare else 1), nrows=rows,
                                    squeeze=False, sharex=True)
        self.fig.set_dpi(self.dpi)
        self.drawings = [TimelineDrawing(ax, legend=False, raster=True, min_px=MIN_BAR_PX, defer_ticks=True)
                         for ax in axes[:, 0]]
        self.fig.legend(handles=timeline_legend_handles(), loc="outside upper center", ncols=4, fontsize="x-small",
                        frameon=False, title=LEGEND_TITLE, title_fontsize="x-small")
        for drawing in self.drawings:
            drawing.bars.set_animated(True)  # pasted on each redraw, never part of a background
        self.ticks = [FastXTicks(ax, labels=i == rows - 1) for i, ax in enumerate(axes[:, 0])]
        for ax in axes[:, 0]:
            ax.grid(False)
            ax.xaxis.labelpad = 16  # room for the FastXTicks labels, which layout does not see
        if compare:
            axes[0, 0].set_title("pinned", loc="left", fontsize="medium")
            axes[1, 0].set_title("current", loc="left", fontsize="medium")
            axes[0, 0].set_xlabel("")
        self.renderer = None
        self._drawn: list = [None] * rows  # (trace, span) each drawing last showed

    def show(self, trace, pinned_trace=None) -> None:
        """Redraw with ``trace`` (and ``pinned_trace`` above it, if given)."""
        compare = pinned_trace is not None
        if compare != (len(self.drawings) == 2):
            self._build(compare)
        traces = [pinned_trace, trace] if compare else [trace]
        span = max(t.span_s for t in traces)

        def draw():
            for i, (drawing, ticks, t) in enumerate(zip(self.drawings, self.ticks, traces)):
                if self._drawn[i] is not None and self._drawn[i][0] is t and self._drawn[i][1] == span:
                    continue  # the pinned timeline at the same scale: already drawn
                drawing.update(t, span_s=span)
                ticks.update(drawing.ax.get_xlim()[1])
                self._drawn[i] = (t, span)
            if compare:
                self.drawings[0].ax.set_xlabel("")

        def draw_labelled():  # the layout is solved with the row labels on the axes
            draw()
            for drawing in self.drawings:
                drawing.apply_row_ticks()

        if self.renderer is None:
            freeze_layout(self.fig, draw_labelled)
            self._drawn = [None] * len(self.drawings)  # drawn before the layout: the axes have moved since
            dynamic = [a for d, t in zip(self.drawings, self.ticks) for a in (*t.artists, *d.ax.spines.values())]
            layers = [[d.ax.yaxis] for d in self.drawings] + [[d.ax.xaxis for d in self.drawings]]
            self.renderer = LayeredRenderer(self.fig, dynamic, layers, dpi=self.dpi)
        draw()
        # the background holds each timeline's device labels and the unit of the time axis
        key = (*(tuple(d.rows) for d in self.drawings), self.drawings[-1].unit)
        if key not in self.renderer._backgrounds:  # its labels may be drawn: put them on the axes first
            for drawing in self.drawings:
                drawing.apply_row_ticks()
        pastes = [(d.pixels, d.bars.ox, d.bars.oy) for d in self.drawings]
        self.image.value = self.renderer.png(key=key, pastes=pastes)


class LayeredRenderer(BlitRenderer):
    """A :class:`BlitRenderer` whose background for a new key is composed:
    a base drawn once (everything but the ``dynamic`` artists and the
    ``layers``: the legend, titles, frame) and one patch per layer, the
    pixels its artists change when drawn on the base, kept per state. The
    key has one entry per layer naming that layer's state (the device labels
    of each timeline, the time unit). A new replica layout then costs one
    axis's labels, not the whole figure. The layers' pixels must not
    overlap (they are the separate axes' labels), so the composition equals
    drawing them one after another."""

    def __init__(self, fig, dynamic, layers, dpi: float = 72):
        super().__init__(fig, dynamic, dpi=dpi)
        self.layers = [list(artists) for artists in layers]
        for artist in (a for artists in self.layers for a in artists):
            artist.set_animated(True)  # left out of the base
        self._base = None
        self._patches: dict = {}

    def invalidate(self) -> None:
        super().invalidate()
        self._base = None
        self._patches.clear()

    def png(self, key=(), pastes=()) -> bytes:
        if key not in self._backgrounds:
            self._backgrounds[key] = self._compose(key)
        return super().png(key=key, pastes=pastes)

    def _compose(self, key):
        """The background of ``key``: the base with each layer's patch."""
        if self._base is None:
            self.canvas.draw()
            self._base = np.asarray(self.canvas.buffer_rgba()).copy()
        buffer = np.asarray(self.canvas.buffer_rgba())
        pixels = buffer.reshape(-1, 4)
        patches = []
        for i, (artists, state) in enumerate(zip(self.layers, key)):
            if (i, state) not in self._patches:
                buffer[...] = self._base
                for artist in artists:
                    self.fig.draw_artist(artist)
                changed = np.flatnonzero(buffer.view(np.uint32) != self._base.view(np.uint32))  # one word per pixel
                self._patches[i, state] = (changed, pixels[changed].copy())
            patches.append(self._patches[i, state])
        buffer[...] = self._base
        for changed, values in patches:
            pixels[changed] = values
        return self.canvas.copy_from_bbox(self.fig.bbox)


@dataclass(frozen=True)
class ScalingPoint:
    """One point of the scaling curve: replicas and predicted speedup."""

    num_replicas: int
    speedup: float


class ScalingPanel:
    """Speedup against replicas for the current setup (line), the current
    point (star), the pinned setup (dashed) and the ideal line.

    The axes have two fixed ranges (speedups from 1/8, or from 1/256 when
    some point is lower), whose backgrounds are drawn once up front."""

    def __init__(self, dpi: float, max_replicas: int):
        self.fig, self.ax = new_figure(5.0, 3.8)
        ax = self.ax
        self.ideal = ax.plot([1, max_replicas], [1, max_replicas], color="black", linestyle=":", linewidth=1,
                             label="ideal (linear)")[0]
        self.pinned = ax.plot([], [], color=OKABE_ITO["vermillion"], linestyle="--", marker="s", markersize=4,
                              label="pinned")[0]
        self.curve = ax.plot([], [], color=OKABE_ITO["blue"], marker="o", markersize=4, label="current setup")[0]
        self.here = ax.plot([], [], linestyle="", marker="*", markersize=14, color=OKABE_ITO["orange"],
                            markeredgecolor="black", label="this configuration")[0]
        ax.set_xscale("log", base=2)
        ax.set_yscale("log", base=2)
        for axis in (ax.xaxis, ax.yaxis):
            axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}" if v >= 1 else f"1/{round(1 / v)}"))
        ax.set_xlim(0.8, max_replicas * 1.25)
        ax.set_xlabel("replicas (devices)")
        ax.set_ylabel("weak-scaling speedup (× one device)")
        ax.grid(alpha=0.3, which="major")
        ax.legend(fontsize="x-small", loc="upper left")
        self.image = widgets.Image(format="png")
        self._state = None
        self.ylims = ((1 / 8, max_replicas * 1.25), (1 / 256, max_replicas * 1.25))
        freeze_layout(self.fig, lambda: ax.set_ylim(*self.ylims[1]))  # the wider tick labels
        self.renderer = BlitRenderer(self.fig, [self.pinned, self.curve, self.here], dpi=dpi)
        for ylim in reversed(self.ylims):  # draw both backgrounds now, not on a first control change
            ax.set_ylim(*ylim)
            self.renderer.png(key=ylim)
        self._ylim = ylim

    def show(self, points: list[ScalingPoint], here: ScalingPoint | None, pinned: list[ScalingPoint] | None) -> None:
        def xy(pts):
            return [p.num_replicas for p in pts], [p.speedup for p in pts]

        self.curve.set_data(*xy(points))
        self.pinned.set_data(*xy(pinned or []))
        self.here.set_data(*xy([here] if here else []))
        values = [p.speedup for p in points + (pinned or []) + ([here] if here else []) if p.speedup > 0]
        ylim = self.ylims[0] if min(values + [1.0]) >= 1.2 * self.ylims[0][0] else self.ylims[1]
        if ylim != self._ylim:
            self._ylim = ylim
            self.ax.set_ylim(*ylim)
        state = (ylim, xy(points), xy(pinned or []), xy([here] if here else []))
        if state != self._state:  # often only the timeline changes
            self._state = state
            self.image.value = self.renderer.png(key=ylim)  # the y tick labels are in the background
