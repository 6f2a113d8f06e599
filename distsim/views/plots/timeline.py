"""Per-device timelines (Gantt charts) of a :class:`~distsim.results.trace.Trace`.

Each device is one row. The upper lane of a row shows what the device itself
does (input, forward and backward compute, update, idle/wait); the lower lane
shows its communication, so pieces of the gradient sent while the backward
pass is still running stay visible. A step's communication can be several
transfers (TensorFlow splits the gradient all-reduce into packs,
``CommunicationOptions(bytes_per_pack=...)``; a pipeline sends one transfer per
micro-batch); neighbouring transfers alternate between two colours.
"""

from __future__ import annotations

import re
from typing import Sequence

import numpy as np
from matplotlib.axes import Axes
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from distsim.views.plots.style import (IDLE_COLOR, OKABE_ITO, at_least_one, new_figure, one_label_each,
                                       result_label, time_scale)
from distsim.results.result import Result
from distsim.results.trace import EVENT_KINDS, Trace
from distsim.validation import InputError, InstanceOf, Integer, Optional

#: Legend names of a step's 1st, 3rd, ... and 2nd, 4th, ... transfer (labels
#: ending in 0, 2, ... and 1, 3, ...), drawn in two colours so that
#: neighbouring transfers stay apart.
COMM_1ST = "communication (transfers 1, 3, 5, …)"
COMM_2ND = "communication (transfers 2, 4, 6, …)"
#: Drawing classes of events: (name in the legend, colour).
TIMELINE_STYLES: tuple[tuple[str, str], ...] = (
    ("input", OKABE_ITO["yellow"]),
    ("forward", OKABE_ITO["sky_blue"]),
    ("backward / compute", OKABE_ITO["blue"]),
    (COMM_1ST, OKABE_ITO["vermillion"]),
    (COMM_2ND, OKABE_ITO["orange"]),
    ("update", OKABE_ITO["bluish_green"]),
    ("idle / wait", IDLE_COLOR),
)
_STYLE = {name: i for i, (name, _) in enumerate(TIMELINE_STYLES)}
_COLORS = np.array([c for _, c in TIMELINE_STYLES])
#: RGBA bytes of each style, plus a transparent last entry for "no event".
_RGBA = np.array([[int(c[i:i + 2], 16) for i in (1, 3, 5)] + [255] for c in _COLORS] + [[0, 0, 0, 0]],
                 dtype=np.uint8)
_BUCKET = re.compile(r"(\d+)\s*$")
#: Suffix of a device's communication stream in timing-engine traces.
COMM_SUFFIX = "/comm"
#: Row lanes as (bottom, top) offsets from the row centre, in row units.
_WORK_LANE = (-0.42, 0.12)
_COMM_LANE = (0.12, 0.42)


def _label_style(kind: str, label: str) -> int:
    if kind == "compute":
        return _STYLE["forward"] if label.lower().startswith("forward") else _STYLE["backward / compute"]
    if kind == "comm":
        match = _BUCKET.search(label)
        second = bool(match) and int(match.group(1)) % 2 == 1  # labels count from 0
        return _STYLE[COMM_2ND if second else COMM_1ST]
    return _STYLE[{"input": "input", "update": "update", "idle": "idle / wait"}[kind]]


def event_styles(trace: Trace) -> np.ndarray:
    """Index into :data:`TIMELINE_STYLES` of every event of ``trace``."""
    if not len(trace):
        return np.zeros(0, dtype=np.int64)
    n_labels = max(len(trace.labels), 1)
    key = trace.kind.astype(np.int64) * n_labels + trace.label
    present = np.flatnonzero(np.bincount(key))  # the (kind, label) pairs that occur, without sorting every event
    table = np.zeros(present[-1] + 1, dtype=np.int64)
    table[present] = [_label_style(EVENT_KINDS[k // n_labels], trace.labels[k % n_labels]) for k in present]
    return table[key]


def device_rows(devices: Sequence[str]) -> tuple[np.ndarray, list[str]]:
    """Row of each device, and the row names. A device named ``"<d>/comm"``
    (the timing engine's communication stream of device ``d``) shares the
    row of ``d``, where its events fill the lower lane."""
    bases = [d[: -len(COMM_SUFFIX)] if d.endswith(COMM_SUFFIX) else d for d in devices]
    names = list(dict.fromkeys(b for b in bases))
    index = {name: i for i, name in enumerate(names)}
    return np.array([index[b] for b in bases], dtype=np.int64), names


_DRAWABLE = InstanceOf((Trace, Result), "a Trace, or a Result with a trace")
_MAX_STEPS = Optional(Integer(1), "every step")


def _as_trace(path: str, item: Trace | Result) -> Trace:
    if isinstance(_DRAWABLE(path, item), Trace):
        return item
    if item.trace is None:
        raise InputError(f"{path}.trace", None, "a recorded trace to draw: run it with a trace recorded")
    return item.trace


def _visible(trace: Trace, max_steps: int | None) -> np.ndarray:
    if max_steps is None:
        return np.ones(len(trace), dtype=bool)
    first = trace.step.min() if len(trace) else 0
    return trace.step < first + max_steps


class TimelineDrawing:
    """A timeline drawn on an axes that can be redrawn with another trace
    without rebuilding the figure (what the dashboard does on every change).

    Two ways to draw the bars:

    * ``raster=False``: one rectangle per event (a ``PolyCollection``), exact
      at any zoom and in SVG/PDF; drawing takes time proportional to the
      number of events.
    * ``raster=True``: the bars are painted with NumPy into one image with
      exactly the axes' pixel size at the figure's current dpi, pasted over
      the axes, so a redraw costs the same for 100 or 100,000 events. An
      event narrower than a pixel still gets one pixel column. Use it when
      the layout and dpi are fixed (see
      :func:`distsim.views.plots.style.freeze_layout`), as in the dashboard.
      ``min_px`` widens every bar that is not idle/wait to at least that
      many pixel columns, painted over the grey of waiting, so that short
      compute next to long waits stays visible (the dashboard uses 3).

    ``defer_ticks=True`` leaves the y axis's row labels to
    :meth:`apply_row_ticks`: a figure that keeps the labels of each row
    layout in a cached bitmap (the dashboard) sets them only when it draws
    that bitmap.

    Attributes:
        ax: the axes it draws on.
        unit: time unit of the x axis (``"s"``, ``"ms"`` or ``"µs"``).
        rows: the row names on display (devices; ``"<d>/comm"`` joins ``d``).
        bars: the artist with the bars (a ``FigureImage`` when raster).
        pixels: raster mode: the bars as RGBA bytes, lower-left corner at
            display pixel ``(bars.ox, bars.oy)``.
    """

    def __init__(self, ax: Axes, max_steps: int | None = None, legend: bool = True, raster: bool = False,
                 min_px: int = 1, defer_ticks: bool = False):
        self.ax = ax
        self.max_steps = _MAX_STEPS("max_steps", max_steps)
        self.raster = raster
        self.min_px = Integer(1)("min_px", min_px)
        if raster:  # a figure image is pasted pixel for pixel: no resampling on every draw
            self.bars = ax.figure.figimage(np.zeros((1, 1, 4), dtype=np.uint8), origin="upper")
        else:
            self.bars = PolyCollection([], linewidths=0, antialiased=False)
            ax.add_collection(self.bars)
        ax.grid(axis="x", alpha=0.3)
        ax.set_axisbelow(True)
        ax.set_ylabel("device")
        self.unit = ""
        self.rows: list[str] = []
        self.defer_ticks = defer_ticks
        self._row_ticks = None  # (positions, labels) not yet on the axis
        if legend:
            ax.legend(handles=timeline_legend_handles(), loc="upper left", bbox_to_anchor=(1.01, 1.0),
                      fontsize="small", title="upper lane: device\nlower lane: its communication",
                      title_fontsize="small", frameon=False)

    def update(self, trace: Trace, title: str | None = None, span_s: float | None = None) -> bool:
        """Draw ``trace`` (the first ``max_steps`` steps) in place of the old one.

        Args:
            trace: the events.
            title: new axes title (None keeps the old one).
            span_s: seconds of the time axis (default: the trace's span), so
                two timelines can share one scale.

        Returns:
            True when the device rows changed (and with them the tick labels).
        """
        shown = _visible(trace, self.max_steps)
        start, end = trace.start_s[shown], trace.end_s[shown]
        t0 = float(start.min()) if len(start) else 0.0
        span = float(end.max()) - t0 if len(end) else 0.0
        if span_s is not None:
            span = max(span_s, 0.0)
        factor, unit = time_scale(span)
        x_max = span / factor if span > 0 else 1.0
        x0, x1 = (start - t0) / factor, (end - t0) / factor
        styles = event_styles(trace)[shown]
        comm = trace.kind[shown] == EVENT_KINDS.index("comm")
        row_of_device, rows = device_rows(trace.devices)
        row = row_of_device[trace.device[shown]]
        n_dev = len(rows)
        if self.raster:
            self._paint(x0, x1, row, comm, styles, n_dev, x_max)
        else:
            lo = row + np.where(comm, _COMM_LANE[0], _WORK_LANE[0])
            hi = row + np.where(comm, _COMM_LANE[1], _WORK_LANE[1])
            verts = np.stack([np.stack([x0, lo], -1), np.stack([x0, hi], -1),
                              np.stack([x1, hi], -1), np.stack([x1, lo], -1)], axis=1)
            self.bars.set_verts(verts)
            self.bars.set_facecolor(_COLORS[styles] if len(styles) else "none")
        self.ax.set_xlim(0, x_max)
        self.ax.set_ylim(n_dev - 0.5, -0.5)
        rows_changed = rows != self.rows
        if rows_changed:  # tick labels are costly text objects: only when they change
            self.rows = rows
            every = max(1, int(np.ceil(n_dev / 24)))
            ticks = np.arange(0, n_dev, every)
            self._row_ticks = (ticks, [rows[i] for i in ticks])
            if not self.defer_ticks:
                self.apply_row_ticks()
        if unit != self.unit:
            self.unit = unit
            self.ax.set_xlabel(f"time since start ({unit})")
        if title is not None:
            self.ax.set_title(title)
        return rows_changed

    def apply_row_ticks(self) -> None:
        """Label the y axis with the rows of the last :meth:`update` (which
        does so itself unless ``defer_ticks``)."""
        if self._row_ticks is not None:
            self.ax.set_yticks(*self._row_ticks, fontsize="small")
            self._row_ticks = None

    def _paint(self, x0, x1, row, comm, styles, n_dev: int, x_max: float) -> None:
        bbox = self.ax.get_window_extent()
        width, height = max(int(round(bbox.width)), 1), max(int(round(bbox.height)), 1)
        px0, px1 = x0 * (width / x_max), x1 * (width / x_max)
        first = np.clip(np.ceil(px0 - 0.5), 0, width - 1).astype(np.int64)  # pixel centres inside the bar
        stop = np.clip(np.ceil(px1 - 0.5), 0, width).astype(np.int64)
        first = np.where(stop > first, first, np.clip(np.floor(px0), 0, width - 1).astype(np.int64))
        busy = styles != _STYLE["idle / wait"]
        length = np.maximum(stop - first, np.where(busy, self.min_px, 1))
        length = np.minimum(length, width - first)
        lane = row.astype(np.int64) * 2 + comm
        start = lane * width + first  # flat index of each event's first pixel
        # waits first, then the rest by start: later events in a lane paint over shared edge pixels,
        # and a bar widened to min_px paints over the wait that follows it
        order = np.argsort(busy * (int(np.max(start, initial=0)) + 1) + start, kind="stable")  # by (busy, start), ties kept
        start, length, styles = start[order], length[order], styles[order]
        offsets = np.arange(int(length.sum())) - np.repeat(np.cumsum(length) - length, length)
        lanes = np.full((2 * n_dev + 1) * width, len(_RGBA) - 1, dtype=np.int64)
        lanes[np.repeat(start, length) + offsets] = np.repeat(styles, length)
        lanes = lanes.reshape(2 * n_dev + 1, width)
        v = -0.5 + (np.arange(height) + 0.5) * (n_dev / height)  # row coordinate of each pixel row
        dev = np.clip(np.floor(v + 0.5), 0, n_dev - 1).astype(np.int64)
        off = v - dev
        in_work = (off >= _WORK_LANE[0]) & (off < _WORK_LANE[1])
        in_comm = (off >= _COMM_LANE[0]) & (off < _COMM_LANE[1])
        pixel_lane = np.where(in_work, 2 * dev, np.where(in_comm, 2 * dev + 1, 2 * n_dev))
        self.pixels = _RGBA[lanes[pixel_lane]]
        self.bars.set_data(self.pixels)
        self.bars.ox, self.bars.oy = int(round(bbox.x0)), int(round(bbox.y0))


def timeline_legend_handles() -> list[Patch]:
    """Legend patches explaining the timeline colours."""
    return [Patch(facecolor=c, edgecolor="0.3", linewidth=0.5, label=name) for name, c in TIMELINE_STYLES]


def plot_timeline(item: Trace | Result, max_steps: int | None = None, title: str | None = None) -> Figure:
    """Gantt chart of one run: one row per device, time in seconds (or ms/µs)
    on the x axis.

    Args:
        item: a :class:`~distsim.results.trace.Trace`, or a
            :class:`~distsim.results.result.Result` with a trace.
        max_steps: draw only the first ``max_steps`` steps (all if None).
        title: axes title; defaults to the result's label.
    """
    trace = _as_trace("item", item)
    if title is None and isinstance(item, Result):
        title = result_label(item)
    n_dev = len(device_rows(trace.devices)[1])
    fig, ax = new_figure(9.0, 1.4 + 0.28 * min(n_dev, 40))
    TimelineDrawing(ax, max_steps=max_steps).update(trace, title=title)
    return fig


def plot_timelines(
    items: Sequence[Trace | Result],
    titles: Sequence[str] | None = None,
    max_steps: int | None = None,
    span_s: float | None = None,
) -> Figure:
    """Several timelines side by side (e.g. synchronous vs asynchronous), one
    panel each, with one shared legend. Each panel keeps its own time axis
    unless ``span_s`` (seconds) gives all of them the same one."""
    items = at_least_one("items", items, (Trace, Result), "Trace, or Result with a trace")
    titles = one_label_each("titles", titles, len(items), "timeline")
    traces = [_as_trace(f"items[{i}]", it) for i, it in enumerate(items)]
    n_dev = max(len(device_rows(t.devices)[1]) for t in traces)
    fig, axes = new_figure(5.0 * len(items) + 2.2, 1.4 + 0.28 * min(n_dev, 40), ncols=len(items), squeeze=False)
    for i, (item, trace, ax) in enumerate(zip(items, traces, axes[0])):
        title = titles[i] if titles is not None else (result_label(item) if isinstance(item, Result) else None)
        TimelineDrawing(ax, max_steps=max_steps, legend=i == len(items) - 1).update(trace, title=title, span_s=span_s)
    return fig
