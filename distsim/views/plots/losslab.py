"""Figures of the loss-scaling lab (:mod:`distsim.numerics.losslab`)."""

from __future__ import annotations

from typing import Mapping

import numpy as np
from matplotlib.figure import Figure

from distsim.numerics.losslab import LossLabReport, MistakeReport
from distsim.validation import InputError, InstanceOf
from distsim.views.plots.style import new_figure, series_style

_REPORT = InstanceOf(LossLabReport, "a LossLabReport from loss_scaling_lab")


def plot_loss_lab(lab: LossLabReport) -> Figure:
    """Three panels: each mistake's first-update length against the right one (left), how far its
    weights drift from the right run's step by step (middle), and the training loss (right)."""
    lab = _REPORT("lab", lab)
    fig, (ax_ratio, ax_div, ax_loss) = new_figure(13, 3.6, ncols=3)
    names = [m.name for m in lab.mistakes]
    ax_ratio.barh(names, [m.update_norm_ratio for m in lab.mistakes],
                  color=[series_style(i + 1)["color"] for i in range(len(names))])
    ax_ratio.axvline(1, color="k", linewidth=0.8)
    ax_ratio.set_xlabel("|wrong update| / |right update|, step 1")
    ax_ratio.invert_yaxis()
    steps = np.arange(1, len(lab.mistakes[0].divergence) + 1)
    ax_loss.plot(steps, lab.mistakes[0].loss_correct, color="k", linewidth=2.5, label="correct")
    for i, m in enumerate(lab.mistakes):
        style = series_style(i + 1)
        ax_div.plot(steps, m.divergence, label=m.name, markersize=3, **style)
        if m.name != "metric_mean_of_replicas":  # its update is the correct one
            ax_loss.plot(steps, m.loss_wrong, label=m.name, markersize=3, **style)
    ax_div.set(xlabel="step", ylabel="|w_wrong - w_right| / |w_right - w_0|")
    ax_div.set_yscale("symlog", linthresh=1e-3)  # linear near 0, where the harmless mistakes stay
    ax_div.legend(fontsize="small")
    ax_loss.set(xlabel="step", ylabel="training loss (global batch)")
    ax_loss.legend(handles=ax_loss.get_lines()[:1], fontsize="small")
    for ax in (ax_div, ax_loss):
        ax.xaxis.get_major_locator().set_params(integer=True)
    for ax in (ax_ratio, ax_div, ax_loss):
        ax.grid(alpha=0.3)
    fig.suptitle(f"{lab.num_replicas} replicas, global batch {lab.global_batch}, SGD lr {lab.learning_rate}, "
                 f"L2 {lab.l2}")
    return fig


def plot_mistake_by_replicas(runs: Mapping[int, MistakeReport], global_batch: int) -> Figure:
    """Training loss of one mistake at several replica counts (``runs``: replica count -> report),
    against the correct run, which is the same at every count."""
    if not runs:
        raise InputError("runs", runs, "at least one replica count -> MistakeReport")
    for n, m in runs.items():
        InstanceOf(MistakeReport, "a MistakeReport")(f"runs[{n}]", m)
    first = next(iter(runs.values()))
    steps = np.arange(1, len(first.loss_correct) + 1)
    fig, ax = new_figure(6.5, 3.6)
    ax.plot(steps, first.loss_correct, color="k", linewidth=2.5, label="correct (any number of replicas)")
    for i, (n, m) in enumerate(runs.items()):
        ax.plot(steps, m.loss_wrong, label=f"{m.name}, {n} replicas", markersize=3, **series_style(i + 1))
    ax.set(xlabel="step", ylabel="training loss (global batch)", yscale="log",
           title=f"The same global batch of {global_batch}, a growing mistake")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    return fig
