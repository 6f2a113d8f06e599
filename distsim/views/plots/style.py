"""Colours, figure creation, units and saving shared by every distsim figure.

Colours come from the Okabe-Ito palette (Okabe & Ito 2008, "Color Universal
Design"), which stays distinguishable for the common colour-vision
deficiencies. Series also differ in line style or marker, so no figure relies
on colour alone.
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path
from typing import Any, Iterable

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from distsim.validation import InputError, InstanceOf

#: The Okabe-Ito palette.
OKABE_ITO: dict[str, str] = {
    "black": "#000000",
    "orange": "#E69F00",
    "sky_blue": "#56B4E9",
    "bluish_green": "#009E73",
    "yellow": "#F0E442",
    "blue": "#0072B2",
    "vermillion": "#D55E00",
    "reddish_purple": "#CC79A7",
}

#: Colours for successive series (lines, bars, scatter groups), in order.
SERIES_COLORS: tuple[str, ...] = tuple(
    OKABE_ITO[name]
    for name in ("blue", "vermillion", "bluish_green", "orange", "reddish_purple", "sky_blue", "black", "yellow")
)
#: Line styles paired with :data:`SERIES_COLORS` (a second, colour-free cue).
SERIES_LINESTYLES: tuple[str, ...] = ("-", "--", "-.", ":", (0, (5, 1)), (0, (3, 1, 1, 1, 1, 1)))
#: Markers paired with :data:`SERIES_COLORS`.
SERIES_MARKERS: tuple[str, ...] = ("o", "s", "^", "D", "v", "P", "X", "*")

#: Light grey for "nothing happening" (idle, empty batches).
IDLE_COLOR = "#D9D9D9"

#: Formats :func:`save_figure` writes.
FIGURE_FORMATS: tuple[str, ...] = ("png", "svg", "pdf")

_TIME_UNITS: tuple[tuple[float, str], ...] = ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"))


class NotebookFigure(Figure):
    """A matplotlib Figure that shows itself as a PNG in Jupyter, Colab and
    Voilà without going through ``pyplot``.

    distsim's figures are not registered with ``pyplot``: a notebook that
    returns one from a cell shows it exactly once, and figures made in a loop
    (a dashboard, an animation) are freed like any other object.
    """

    def _repr_png_(self) -> bytes:
        return figure_png(self, dpi=100)


def new_figure(width_in: float, height_in: float, **subplots) -> tuple[Figure, object]:
    """A :class:`NotebookFigure` of ``width_in`` x ``height_in`` inches with
    ``fig.subplots(**subplots)`` axes (``subplots`` as for
    :meth:`matplotlib.figure.Figure.subplots`)."""
    fig = NotebookFigure(figsize=(width_in, height_in), layout="constrained")
    axes = fig.subplots(**subplots)
    return fig, axes


def freeze_layout(fig: Figure, draw_content) -> None:
    """Lay ``fig`` out once with ``draw_content()`` drawn, then keep that
    layout. Figures redrawn many times (animations, widgets) skip the
    constrained-layout solve, which would otherwise double each redraw."""
    draw_content()
    fig.draw_without_rendering()
    fig.set_layout_engine("none")


def series_style(i: int) -> dict:
    """Colour, line style and marker of the ``i``-th series."""
    return {
        "color": SERIES_COLORS[i % len(SERIES_COLORS)],
        "linestyle": SERIES_LINESTYLES[i % len(SERIES_LINESTYLES)],
        "marker": SERIES_MARKERS[i % len(SERIES_MARKERS)],
    }


def time_scale(span_s: float) -> tuple[float, str]:
    """``(seconds per unit, unit name)`` that keeps a span of ``span_s``
    seconds readable: seconds from 1 s up, then milliseconds, then
    microseconds."""
    for factor, unit in _TIME_UNITS:
        if span_s >= factor:
            return factor, unit
    return _TIME_UNITS[-1]


def figure_png(fig: Figure, dpi: float = 100) -> bytes:
    """The figure rendered to PNG bytes, for widgets and notebooks.

    Draws with Agg straight into the canvas and encodes with light
    compression: about twice as fast as ``savefig``, which matters for a
    dashboard that redraws on every change. Sets ``fig``'s dpi to ``dpi``.
    """
    canvas = fig.canvas if isinstance(fig.canvas, FigureCanvasAgg) else FigureCanvasAgg(fig)
    if fig.dpi != dpi:
        fig.set_dpi(dpi)
    canvas.draw()
    return _encode_png(canvas)


class BlitRenderer:
    """Renders a figure to PNG again and again, redrawing only what changes.

    The first :meth:`png` call for a ``key`` draws the whole figure without
    the ``dynamic`` artists and keeps that bitmap as the background of that
    key; later calls with the same key paste it back and draw just the
    dynamic artists on top. Text is the slowest thing Agg draws, so keeping
    static labels, legends and tick labels in the background makes a
    dashboard redraw several times faster. The key names the state of the
    static artists (e.g. the tick labels on display): a dashboard that goes
    back to an earlier layout reuses its background. Call :meth:`invalidate`
    when static artists change in a way the key does not capture.
    """

    #: Backgrounds kept (each is width x height x 4 bytes).
    MAX_BACKGROUNDS = 32

    def __init__(self, fig: Figure, dynamic: Iterable, dpi: float = 72):
        self.fig = fig
        self.canvas = FigureCanvasAgg(fig)
        self.dynamic = list(dynamic)
        for artist in self.dynamic:
            artist.set_animated(True)  # left out of full draws
        fig.set_dpi(dpi)
        self._backgrounds: dict = {}

    def invalidate(self) -> None:
        """Forget every background; the next :meth:`png` draws in full."""
        self._backgrounds.clear()

    def png(self, key=None, pastes: Iterable[tuple[np.ndarray, int, int]] = ()) -> bytes:
        """The figure as PNG bytes, with the static artists in state ``key``.

        ``pastes`` are ``(rgba, left, bottom)`` images (``uint8``, height x
        width x 4, alpha 0 or 255) copied pixel for pixel onto the
        background at display pixel ``(left, bottom)`` before the dynamic
        artists are drawn: the cheapest way to show a raster timeline.
        """
        background = self._backgrounds.pop(key, None)
        if background is None:
            self.canvas.draw()
            background = self.canvas.copy_from_bbox(self.fig.bbox)
        else:
            self.canvas.restore_region(background)
        self._backgrounds[key] = background  # most recently used last
        while len(self._backgrounds) > self.MAX_BACKGROUNDS:
            del self._backgrounds[next(iter(self._backgrounds))]
        if pastes:
            buffer = np.asarray(self.canvas.buffer_rgba())
            for rgba, left, bottom in pastes:
                _paste(buffer, rgba, left, bottom)
        for artist in self.dynamic:
            self.fig.draw_artist(artist)
        return _encode_png(self.canvas)


def _paste(buffer: np.ndarray, rgba: np.ndarray, left: int, bottom: int) -> None:
    """Copy the opaque pixels of ``rgba`` into ``buffer`` (row 0 at the top)
    with its lower-left corner at display pixel ``(left, bottom)``."""
    top = buffer.shape[0] - bottom - rgba.shape[0]
    rows = slice(max(top, 0), min(top + rgba.shape[0], buffer.shape[0]))
    cols = slice(max(left, 0), min(left + rgba.shape[1], buffer.shape[1]))
    part = rgba[rows.start - top:rows.stop - top, cols.start - left:cols.stop - left]
    np.copyto(buffer[rows, cols], part, where=part[..., 3:] > 0)


def _encode_png(canvas: FigureCanvasAgg) -> bytes:
    """The canvas as an 8-bit RGB PNG (figures are opaque; dropping alpha
    saves a quarter of the bytes to compress): rows unfiltered, deflated at
    zlib level 1. On these flat-coloured figures that is about twice as fast
    as Pillow's encoder at the same level, which filters every row, for
    about a fifth more bytes (the dashboard's 210 states: 8.9 -> 10.8 MB)."""
    rgba = np.asarray(canvas.buffer_rgba())
    height, width = rgba.shape[:2]
    rows = np.zeros((height, 1 + 3 * width), dtype=np.uint8)  # each row: filter type 0 (none), then R, G, B
    rows[:, 1:] = rgba[..., :3].reshape(height, 3 * width)
    deflate = zlib.compressobj(1, zlib.DEFLATED, 15, 9)
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8 bits, truecolour, no interlace
    return (b"\x89PNG\r\n\x1a\n" + _png_chunk(b"IHDR", header)
            + _png_chunk(b"IDAT", deflate.compress(rows) + deflate.flush()) + _png_chunk(b"IEND", b""))


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    """One PNG chunk: length, type, data, CRC-32 of type and data."""
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def save_figure(fig: Figure, path: str | Path, formats: Iterable[str] | None = None, dpi: float = 150) -> list[Path]:
    """Save ``fig`` as PNG, SVG or PDF and return the paths written.

    Args:
        fig: the figure.
        path: output file. Its suffix picks the format unless ``formats`` is
            given, in which case one file per format is written next to it
            with that suffix (``"timeline"`` with ``("png", "svg")`` gives
            ``timeline.png`` and ``timeline.svg``). Missing folders are made.
        formats: formats to write, from :data:`FIGURE_FORMATS`.
        dpi: dots per inch of raster output.

    Raises:
        InputError: a format not in :data:`FIGURE_FORMATS` (at ``path`` when
            the suffix picks it, else at ``formats[i]``).
    """
    path = Path(path)
    if formats is None:
        if path.suffix.lower().lstrip(".") not in FIGURE_FORMATS:
            raise InputError("path", str(path), f"a file name ending in one of {FIGURE_FORMATS}, or give formats=")
        targets = [path]
    else:
        formats = [f for f in formats] if not isinstance(formats, str) else [formats]
        if not formats:
            raise InputError("formats", formats, f"at least one of {FIGURE_FORMATS}")
        for i, f in enumerate(formats):
            if not isinstance(f, str) or f.lower() not in FIGURE_FORMATS:
                raise InputError(f"formats[{i}]", f, f"one of {FIGURE_FORMATS}")
        targets = [path.with_suffix("." + f.lower()) for f in formats]
    for target in targets:
        target.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(target, dpi=dpi, bbox_inches="tight")
    return targets


def at_least_one(path: str, items: Iterable, cls: type, what: str) -> list:
    """``items`` as a list of at least one ``cls``; an :class:`InputError`
    at ``path`` (empty) or ``path[i]`` (not a ``cls``)."""
    if isinstance(items, (str, bytes, dict, cls)) or not isinstance(items, Iterable):
        raise InputError(path, items, f"a list of at least one {what}")
    items = list(items)
    if not items:
        raise InputError(path, items, f"at least one {what}")
    return [InstanceOf(cls, f"a {what}")(f"{path}[{i}]", item) for i, item in enumerate(items)]


def one_label_each(path: str, labels: Any, count: int, per: str) -> list[str] | None:
    """``labels`` as a list of ``count`` strings (None stays None)."""
    if labels is None:
        return None
    if isinstance(labels, str) or not isinstance(labels, Iterable) or len(labels := list(labels)) != count:
        raise InputError(path, labels, f"one label per {per} ({count})")
    return [str(label) for label in labels]


def result_label(result) -> str:
    """A legend label for a :class:`~distsim.results.result.Result`: its
    ``meta["label"]`` if set, else ``"<strategy>, <N> replicas (<source>)"``."""
    if result.meta.get("label"):
        return result.meta["label"]
    return f"{result.strategy}, {result.num_replicas} replicas ({result.source})"
