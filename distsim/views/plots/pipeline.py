"""Figures of pipeline (model) parallelism, from :mod:`distsim.engines.pipeline` runs."""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
from matplotlib.figure import Figure

from distsim.engines.pipeline import PipelineRun, bubble_fraction_closed_form
from distsim.results.trace import EVENT_KINDS, Trace
from distsim.validation import InputError, InstanceOf
from distsim.views.plots.style import new_figure, series_style, time_scale
from distsim.views.plots.timeline import TimelineDrawing

_RUN = InstanceOf(PipelineRun, "a PipelineRun from simulate_pipeline")


def outline_passes(drawing: TimelineDrawing, trace: Trace) -> None:
    """White outlines around the compute bars (one per micro-batch pass), none on the thin transfer bars."""
    compute = (trace.kind == EVENT_KINDS.index("compute"))[:, None]
    drawing.bars.set(edgecolor=np.where(compute, (1.0, 1.0, 1.0, 1.0), (0.0, 0.0, 0.0, 0.0)), linewidth=0.6)


def plot_pipeline_schedules(runs: Mapping[str, PipelineRun]) -> Figure:
    """One timeline per run (title -> run), stacked, on one time scale, each pass outlined."""
    if not runs:
        raise InputError("runs", runs, "at least one title -> PipelineRun")
    for title, run in runs.items():
        _RUN(f"runs[{title!r}]", run)
    longest_s = max(run.step_time_s for run in runs.values())
    fig, axes = new_figure(10, 2.3 * len(runs), nrows=len(runs), squeeze=False)
    for i, (ax, (title, run)) in enumerate(zip(axes[:, 0], runs.items())):
        drawing = TimelineDrawing(ax, legend=i == 0)
        drawing.update(run.trace, title=f"{title}: step {run.step_time_s * 1e3:.1f} ms")
        outline_passes(drawing, run.trace)
        ax.set_xlim(0, longest_s / time_scale(run.step_time_s)[0])
    return fig


def plot_microbatch_sweep(microbatches: Sequence[int], runs: Mapping[str, Sequence[PipelineRun]],
                          num_stages: int) -> Figure:
    """Against the number of micro-batches m, per schedule (name -> one run per m): the bubble with the
    closed form (p-1)/(m+p-1) (left), the speedup over one device (middle) and stage 0's stashed activations
    in MB (right)."""
    ms = np.asarray(microbatches)
    for name, rs in runs.items():
        if len(rs) != len(ms):
            raise InputError(f"runs[{name!r}]", f"{len(rs)} runs", f"one per micro-batch count ({len(ms)})")
    fig, (ax_b, ax_s, ax_m) = new_figure(12, 3.6, ncols=3)
    ax_b.plot(ms, bubble_fraction_closed_form(num_stages, ms), color="0.2", linewidth=3, alpha=0.3,
              label="(p-1)/(m+p-1)")
    for i, (name, rs) in enumerate(runs.items()):
        style = series_style(i)
        ax_b.plot(ms, [r.bubble_fraction for r in rs], label=name, **style)
        ax_s.plot(ms, [r.speedup for r in rs], label=name, **style)
        ax_m.plot(ms, [r.activation_bytes[0] / 1e6 for r in rs], label=name, **style)
    ax_b.set(xscale="log", xlabel="micro-batches m", ylabel="bubble fraction",
             title=f"idle share of the step (p = {num_stages})")
    ax_s.set(xscale="log", xlabel="micro-batches m", ylabel="speedup vs one device", title="speed")
    ax_m.set(xscale="log", xlabel="micro-batches m", ylabel="stage 0 stashed activations (MB)", title="memory")
    for ax in (ax_b, ax_s, ax_m):
        ax.legend(fontsize="small")
    return fig
