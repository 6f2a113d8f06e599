"""Collective schedules (ring, tree, parameter server, ...) drawn step by step.

One frame per schedule step: arrows show which chunk moves from which rank to
which, and every rank's bar shows, chunk by chunk, how many ranks'
contributions it holds *after* the step. When the schedule is done, every
result rank holds all ``p`` contributions in every chunk.

Contributing ranks sit on a circle; server ranks (parameter-server shards,
the CentralStorage host) sit in the middle.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib import animation, colormaps
from matplotlib.axes import Axes
from matplotlib.cm import ScalarMappable
from matplotlib.collections import PatchCollection
from matplotlib.colors import BoundaryNorm, ListedColormap
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import FancyArrowPatch, Rectangle

from distsim.mechanics.collectives import Schedule
from distsim.validation import InputError, InstanceOf, Integer
from distsim.views.plots.style import OKABE_ITO, freeze_layout, new_figure

#: Most ranks a schedule drawing can show legibly.
MAX_DRAWN_RANKS = 32
#: Arrow colours by transfer op.
OP_COLORS: dict[str, str] = {"reduce": OKABE_ITO["vermillion"], "copy": OKABE_ITO["blue"]}
#: Animation file types and the matplotlib writer each needs.
ANIMATION_WRITERS: dict[str, str] = {".gif": "pillow", ".mp4": "ffmpeg"}


def holdings(schedule: Schedule) -> np.ndarray:
    """Which contributions each rank holds after each step.

    Returns:
        bool array ``(num_steps + 1, num_ranks, num_chunks, num_inputs)``:
        ``[k, r, c, i]`` is True when, after ``k`` steps, rank ``r``'s chunk
        ``c`` includes contributing rank ``i``'s chunk ``c``. Index 0 is the
        start: each contributing rank holds only its own gradient.
    """
    state = np.zeros((schedule.num_ranks, schedule.num_chunks, schedule.num_inputs), dtype=bool)
    for r in range(schedule.num_inputs):
        state[r, :, r] = True
    frames = [state.copy()]
    transfers = schedule.transfers
    i = 0
    for step in range(schedule.num_steps):
        before = state.copy()
        while i < len(transfers) and transfers[i].step == step:
            t = transfers[i]
            if t.op == "reduce":
                state[t.dst, t.chunk] |= before[t.src, t.chunk]
            else:
                state[t.dst, t.chunk] = before[t.src, t.chunk]
            i += 1
        frames.append(state.copy())
    return np.stack(frames)


def _layout(schedule: Schedule) -> np.ndarray:
    p, servers = schedule.num_inputs, schedule.num_ranks - schedule.num_inputs
    angle = np.pi / 2 - 2 * np.pi * np.arange(p) / p
    ring = np.stack([np.cos(angle), np.sin(angle)], axis=1)
    spread = 0.25 * (servers - 1)
    middle = np.stack([np.linspace(-spread, spread, servers), np.zeros(servers)], axis=1)
    return np.concatenate([ring, middle])


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _chunk_list(chunks: list[int]) -> str:
    chunks = sorted(chunks)
    if len(chunks) > 3 and chunks == list(range(chunks[0], chunks[-1] + 1)):
        return f"c{chunks[0]}–{chunks[-1]}"
    return "c" + ",".join(map(str, chunks))


class ScheduleDrawing:
    """A schedule drawn on one axes, redrawn in place for each step.

    Call :meth:`show_step` with a step in ``0..schedule.num_steps - 1``.
    """

    def __init__(self, schedule: Schedule, ax: Axes):
        InstanceOf(Schedule, "a Schedule (from distsim.mechanics.collectives.build_schedule)")("schedule", schedule)
        if schedule.num_ranks > MAX_DRAWN_RANKS:
            raise InputError("schedule.num_ranks", schedule.num_ranks,
                             f"at most {MAX_DRAWN_RANKS} in a drawing (the schedule itself has no limit)")
        if schedule.num_steps < 1:
            raise InputError("schedule.num_steps", schedule.num_steps,
                             "at least 1 transfer step to draw (one rank needs no communication)")
        self.schedule = schedule
        self.ax = ax
        self.held = holdings(schedule).sum(axis=3)  # (steps + 1, ranks, chunks)
        self.pos = _layout(schedule)
        p, chunks = schedule.num_inputs, schedule.num_chunks
        servers = schedule.num_ranks - p
        self.bar_w = min(0.9, 5.0 / max(p, 4))
        server_w = min(self.bar_w, 0.44)
        cell_h = 0.11
        colors = ["white"] + [colormaps["viridis"](k / p) for k in range(1, p + 1)]
        self.norm = BoundaryNorm(np.arange(-0.5, p + 1.5), len(colors))
        self.cmap = ListedColormap(colors)
        cells, self.texts = [], []
        numbered = chunks <= 8 and p <= 16
        for r, (x, y) in enumerate(self.pos):
            width = self.bar_w if r < p else server_w
            if r < p:  # outside the circle, clear of the rank's marker
                centre = np.array([x, y]) * 1.2 + (np.sign(x) * abs(x) ** 2 * width / 2, 0.06 * np.sign(y))
            else:
                centre = np.array([x, y - 0.2])
            left = centre[0] - width / 2
            cell_w = width / chunks
            ax.text(x, y, str(r) if r < p else f"S{r - p}", ha="center", va="center", fontsize="small",
                    fontweight="bold", bbox=dict(boxstyle="circle", facecolor="white",
                                                 edgecolor="black" if r < p else OKABE_ITO["bluish_green"]),
                    zorder=4)
            for c in range(chunks):
                cells.append(Rectangle((left + c * cell_w, centre[1] - cell_h / 2), cell_w, cell_h))
                if numbered:
                    self.texts.append(ax.text(left + (c + 0.5) * cell_w, centre[1], "", ha="center", va="center",
                                              fontsize="xx-small", zorder=3))
        self.cells = PatchCollection(cells, cmap=self.cmap, norm=self.norm, edgecolor="0.4", linewidth=0.5,
                                     zorder=2)
        ax.add_collection(self.cells)
        self.arrows: list = []
        ax.set_xlim(-1.3 - self.bar_w, 1.3 + self.bar_w)
        ax.set_ylim(-1.45, 1.45)
        self.who = f"{p} ranks" + (f" + {servers} server rank{'s' if servers > 1 else ''}" if servers else "")
        ax.set_aspect("equal")
        ax.axis("off")
        ax.legend(handles=[Line2D([], [], color=OP_COLORS["reduce"], lw=2, label="reduce: receiver adds the chunk"),
                           Line2D([], [], color=OP_COLORS["copy"], lw=2, label="copy: receiver overwrites it")],
                  loc="lower center", bbox_to_anchor=(0.5, -0.08), ncols=2, fontsize="x-small", frameon=False)

    def show_step(self, step: int) -> list:
        """Show step ``step`` (0-based): its transfers, and holdings after it."""
        s = self.schedule
        step = Integer(0, s.num_steps - 1, "a step of the schedule, from 0")("step", step)
        after = self.held[step + 1].ravel()
        self.cells.set_array(after.astype(float))
        for text, value in zip(self.texts, after):
            text.set_text(str(value) if value else "")
            text.set_color("white" if 0 < value <= 0.6 * s.num_inputs else "black")
        for arrow in self.arrows:
            arrow.remove()
        self.arrows = []
        groups: dict[tuple[int, int, str], list[int]] = {}
        for t in s.transfers:
            if t.step == step:
                groups.setdefault((t.src, t.dst, t.op), []).append(t.chunk)
        label_each = len(groups) <= 24
        for (src, dst, op), chunks in groups.items():
            a, b = self.pos[src], self.pos[dst]
            arrow = FancyArrowPatch(a, b, arrowstyle="-|>", mutation_scale=10, color=OP_COLORS[op], lw=1.3,
                                    shrinkA=11, shrinkB=11, connectionstyle="arc3,rad=0.15", zorder=1)
            self.ax.add_patch(arrow)
            self.arrows.append(arrow)
            if label_each:
                mid = (a + b) / 2 + 0.08 * np.array([b[1] - a[1], a[0] - b[0]])
                self.arrows.append(self.ax.text(*mid, _chunk_list(chunks), fontsize="xx-small", ha="center",
                                                va="center", color=OP_COLORS[op], zorder=5,
                                                bbox=dict(boxstyle="round,pad=0.1", facecolor="white",
                                                          edgecolor="none", alpha=0.8)))
        ops = sorted({op for _, _, op in groups})
        self.ax.set_title(f"{s.algorithm}, {self.who}\nstep {step + 1} of {s.num_steps}: "
                          f"{' + '.join(ops)}, {_plural(sum(len(c) for c in groups.values()), 'chunk transfer')}",
                          fontsize="medium")
        return [self.cells, *self.texts, *self.arrows]


def plot_schedule_step(schedule: Schedule, step: int = 0) -> Figure:
    """One step of a collective schedule as a figure (see the module doc)."""
    fig, ax = new_figure(7.2, 5.2)
    drawing = ScheduleDrawing(schedule, ax)
    drawing.show_step(step)
    holdings_colorbar(fig, ax, drawing)
    return fig


def holdings_colorbar(fig: Figure, ax: Axes, drawing: ScheduleDrawing) -> None:
    """The colour key of a schedule drawing: contributions held per chunk."""
    p = drawing.schedule.num_inputs
    bar = fig.colorbar(ScalarMappable(norm=drawing.norm, cmap=drawing.cmap), ax=ax, shrink=0.6,
                       label=f"contributions summed in the chunk (of {p} ranks)")
    bar.set_ticks(range(0, p + 1, max(1, (p + 1) // 8)))


def animate_schedule(schedule: Schedule, interval_ms: int = 800) -> animation.FuncAnimation:
    """An animation with one frame per schedule step (``schedule.num_steps``
    frames). Show it in a notebook with ``HTML(anim.to_jshtml())`` or save it
    with :func:`save_animation`."""
    fig, ax = new_figure(7.2, 5.2)
    drawing = ScheduleDrawing(schedule, ax)
    holdings_colorbar(fig, ax, drawing)
    freeze_layout(fig, lambda: drawing.show_step(0))
    return animation.FuncAnimation(fig, drawing.show_step, frames=schedule.num_steps, interval=interval_ms,
                                   blit=False, repeat=True)


def animation_writer_available(path: str | Path) -> bool:
    """Whether this machine has the writer the suffix of ``path`` needs
    (``.gif``: Pillow; ``.mp4``: ffmpeg)."""
    suffix = Path(path).suffix.lower()
    if suffix not in ANIMATION_WRITERS:
        raise InputError("path", str(path), f"a file name ending in one of {tuple(ANIMATION_WRITERS)}")
    return animation.writers.is_available(ANIMATION_WRITERS[suffix])


def save_animation(anim: animation.FuncAnimation, path: str | Path, fps: float = 1.5, dpi: float = 80) -> Path | None:
    """Write ``anim`` to a GIF or MP4 file and return its path, or return
    None without writing anything when the writer for that format is not
    installed (:func:`animation_writer_available`)."""
    path = Path(path)
    if not animation_writer_available(path):
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    anim.save(path, writer=ANIMATION_WRITERS[path.suffix.lower()], fps=fps, dpi=dpi)
    return path
