"""Training progress: loss and accuracy curves, and staleness histograms."""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
from matplotlib.figure import Figure

from distsim.engines import asyncps
from distsim.mechanics import checkpointing
from distsim.views.plots.style import (OKABE_ITO, SERIES_COLORS, at_least_one, new_figure, one_label_each,
                                       result_label, series_style, time_scale)
from distsim.results.result import Result, Staleness
from distsim.validation import InputError, InstanceOf, Integer


def plot_training_curves(results: Sequence[Result], labels: Sequence[str] | None = None, *,
                         data: str = "training", clock: str = "wall-clock time since start",
                         examples_per_step: Sequence[int] | None = None) -> Figure:
    """Loss (top) and accuracy (bottom) against steps, or examples (left), and
    against wall-clock seconds (right), one line per run.

    Comparing the two columns is the point: asynchronous training may need
    more updates than synchronous training to reach a loss yet get there
    sooner in seconds. Simulated and measured runs can be mixed; the legend
    says which is which. Accuracy panels skip runs whose accuracy is all NaN.

    Args:
        results: runs with a :class:`~distsim.results.result.Curve`.
        labels: legend labels, one per run (default :func:`result_label`).
        data: what the curves were measured on, for the axis labels
            (``"training"``, or ``"test"`` for held-out curves).
        clock: what the time axis measures (e.g. ``"simulated wall-clock time"``).
        examples_per_step: examples in one step (or update) of each run; given,
            the left column shows examples processed, so that runs whose steps
            differ in size (a synchronous step of all workers' batches, an
            asynchronous update of one) share a readable axis.
    """
    results = at_least_one("results", results, Result, "Result")
    labels = one_label_each("labels", labels, len(results), "result") or [result_label(r) for r in results]
    for i, r in enumerate(results):
        if r.curve is None:
            raise InputError(f"results[{i}].curve", None, "a training curve: only runs that trained can be drawn")
    per_step = [1] * len(results)
    if examples_per_step is not None:
        if isinstance(examples_per_step, str) or len(examples_per_step := list(examples_per_step)) != len(results):
            raise InputError("examples_per_step", examples_per_step, f"one count per result ({len(results)})")
        per_step = [Integer(1)(f"examples_per_step[{i}]", n) for i, n in enumerate(examples_per_step)]
    span = max(float(np.max(r.curve.time_s)) if len(r.curve.time_s) else 0.0 for r in results)
    factor, unit = time_scale(span)
    fig, axes = new_figure(10.0, 6.0, nrows=2, ncols=2, sharex="col")
    for i, (res, label) in enumerate(zip(results, labels)):
        style = series_style(i)
        style.pop("marker")
        c = res.curve
        acc_known = bool(np.any(np.isfinite(c.accuracy)))
        for col, x in enumerate((np.asarray(c.step) * per_step[i], np.asarray(c.time_s) / factor)):
            axes[0, col].plot(x, c.loss, label=label, **style)
            if acc_known:
                axes[1, col].plot(x, c.accuracy, label=label, **style)
    for col in range(2):
        axes[0, col].set_ylabel(f"{data} loss")
        axes[1, col].set_ylabel(f"{data} accuracy (fraction correct)")
        axes[1, col].set_ylim(0, 1)
        for ax in axes[:, col]:
            ax.grid(alpha=0.3)
    axes[1, 0].set_xlabel("examples processed" if examples_per_step is not None
                          else "step (synchronous) or applied update (asynchronous)")
    axes[1, 1].set_xlabel(f"{clock} ({unit})")
    axes[0, 0].set_title("per example" if examples_per_step is not None else "per step")
    axes[0, 1].set_title("per second")
    fig.legend(*axes[0, 0].get_legend_handles_labels(), loc="outside lower center",
               ncols=min(len(results), 3), fontsize="small", frameon=False)
    return fig


def _expected(num_workers: int, compute_mean_s: Sequence[float] | None) -> tuple[float, np.ndarray]:
    """Overall and per-worker analytic mean staleness (see :mod:`distsim.engines.asyncps`)."""
    overall = asyncps.expected_staleness_immediate_pulls(num_workers)
    if compute_mean_s is None:
        return overall, np.full(num_workers, overall)
    return overall, asyncps.expected_staleness_exponential(asyncps.worker_means_s(num_workers, compute_mean_s))


def _as_staleness(item: Result | Staleness) -> Staleness:
    if isinstance(InstanceOf((Result, Staleness), "a Result of an asynchronous run, or its Staleness")("item", item),
                  Staleness):
        return item
    if item.staleness is None:
        raise InputError("item.staleness", None, "a staleness record: only asynchronous runs have one")
    return item.staleness


def plot_staleness(
    item: Result | Staleness,
    num_workers: int | None = None,
    compute_mean_s: Sequence[float] | None = None,
) -> Figure:
    """Staleness of asynchronous updates: a histogram of all updates (left)
    and one histogram per worker as a heat-map row (right), with the analytic
    expectation overlaid: ``N - 1`` overall (immediate pulls, free
    communication, any compute times) and, given the workers' mean compute
    times, ``(sum(mu) - mu_i) / mu_i`` per worker (exponential compute times
    at rates ``mu_i``).

    Args:
        item: an asynchronous :class:`~distsim.results.result.Result` or its
            :class:`~distsim.results.result.Staleness`.
        num_workers: workers in the run (default: ``result.num_replicas``, or
            the highest worker id + 1).
        compute_mean_s: each worker's mean compute time in seconds, for the
            per-worker expectation; None for equally fast workers.
    """
    st = _as_staleness(item)
    if not len(st.staleness):
        raise InputError("item.staleness", None, "a record of at least one applied update", problem="empty")
    if st.worker.min() < 0:
        raise InputError("item.staleness.worker", int(st.worker.min()), "worker ids >= 0")
    path = "num_workers" if num_workers is not None else "item.num_replicas"
    if num_workers is None:
        num_workers = item.num_replicas if isinstance(item, Result) else int(st.worker.max()) + 1
    num_workers = Integer(int(st.worker.max()) + 1, note="more than the highest worker id in the record")(
        path, num_workers)
    expected_mean, expected_per_worker = _expected(num_workers, compute_mean_s)
    s = np.asarray(st.staleness)
    top = int(max(s.max(), np.ceil(expected_per_worker.max())))
    edges = np.arange(top + 2) - 0.5
    fig, (ax, ax_w) = new_figure(11.0, 1.6 + max(2.6, 0.3 * min(num_workers, 32)), ncols=2,
                                 width_ratios=(1, 1.3))
    ax.hist(s, bins=edges, color=OKABE_ITO["blue"], edgecolor="white", label="applied updates")
    ax.axvline(st.mean, color=OKABE_ITO["black"], linestyle="-", linewidth=2, label=f"observed mean {st.mean:.2f}")
    ax.axvline(expected_mean, color=OKABE_ITO["vermillion"], linestyle="--", linewidth=2,
               label=f"expected mean N−1 = {expected_mean:g}")
    shown = int(np.ceil(max(np.quantile(s, 0.995), expected_per_worker.max()) * 1.2)) + 1
    hidden = int(np.sum(s > shown))
    if hidden:
        ax.text(0.98, 0.5, f"{hidden} update(s) with staleness > {shown}\nnot shown", transform=ax.transAxes,
                ha="right", fontsize="small")
    for a in (ax, ax_w):
        a.set_xlim(-0.5, shown + 0.5)
    ax.set_xlabel("staleness (updates applied since the worker read the parameters)")
    ax.set_ylabel("number of updates")
    ax.set_title(f"all {len(s)} updates, {num_workers} workers")
    ax.legend(fontsize="small")
    counts = np.zeros((num_workers, top + 1))
    np.add.at(counts, (st.worker, s), 1)
    share = counts / np.maximum(counts.sum(axis=1, keepdims=True), 1)
    im = ax_w.imshow(share, aspect="auto", cmap="viridis", origin="upper",
                     extent=(-0.5, top + 0.5, num_workers - 0.5, -0.5), vmin=0)
    workers = np.arange(num_workers)
    observed = np.array([s[st.worker == w].mean() if np.any(st.worker == w) else np.nan for w in workers])
    ax_w.plot(observed, workers, "o", color="white", markeredgecolor="black", label="observed mean")
    ax_w.plot(expected_per_worker, workers, "x", color=OKABE_ITO["vermillion"], markersize=9, mew=2.5,
              label="expected mean" + (" (Σμ−μᵢ)/μᵢ" if compute_mean_s is not None else " N−1"))
    ax_w.set_xlabel("staleness (updates)")
    ax_w.set_ylabel("worker")
    every = max(1, int(np.ceil(num_workers / 16)))
    ax_w.set_yticks(workers[::every])
    ax_w.set_title("per worker: share of its updates")
    ax_w.legend(fontsize="small", loc="lower right", framealpha=0.8)
    fig.colorbar(im, ax=ax_w, label="share of the worker's updates")
    return fig


def plot_staleness_shares(runs: Mapping[str, Staleness], num_workers: int) -> Figure:
    """Side-by-side bars: the share of each run's updates at every staleness, with ``N - 1`` dashed.

    Args:
        runs: legend label -> staleness record (simulated or measured).
        num_workers: N, for the line at the immediate-pulls mean ``N - 1``.
    """
    if not runs:
        raise InputError("runs", runs, "at least one label -> Staleness")
    top = max(int(st.staleness.max()) for st in runs.values())
    values = np.arange(top + 1)
    fig, ax = new_figure(8.0, 3.6)
    width = 0.8 / len(runs)
    for i, (name, st) in enumerate(runs.items()):
        share = np.bincount(st.staleness, minlength=top + 1) / len(st.staleness)
        ax.bar(values + (i - (len(runs) - 1) / 2) * width, share, width, color=SERIES_COLORS[i % len(SERIES_COLORS)],
               label=f"{name}: mean {st.mean:.2f}")
    ax.axvline(num_workers - 1, color=OKABE_ITO["black"], linestyle="--", label=f"N−1 = {num_workers - 1}")
    ax.set(xticks=values, xlabel="staleness (updates applied between read and apply)", ylabel="share of updates")
    ax.legend(fontsize="small")
    return fig


def plot_checkpoint_waste(checkpoint_s: float, job_mtbf_s: float, restart_s: float = 0.0,
                          title: str | None = None) -> Figure:
    """Expected waste against the work between checkpoints, exact and first order, with Young's
    interval and the exact optimum marked (times in seconds, drawn in minutes)."""
    young = checkpointing.young_interval(checkpoint_s, job_mtbf_s)
    taus = np.geomspace(young / 12, 12 * young, 400)
    exact = checkpointing.waste_exact(taus, checkpoint_s, job_mtbf_s, restart_s)
    fig, ax = new_figure(8.0, 3.4)
    ax.plot(taus / 60, 100 * exact, color=OKABE_ITO["blue"], label="exact (exponential failures)")
    ax.plot(taus / 60, 100 * checkpointing.waste_first_order(taus, checkpoint_s, job_mtbf_s), "--",
            color=OKABE_ITO["orange"], label="first order")
    young_waste = float(checkpointing.waste_exact(young, checkpoint_s, job_mtbf_s, restart_s))
    ax.axvline(young / 60, color=OKABE_ITO["vermillion"], lw=1.2,
               label=f"Young: sqrt(2CM) = {young / 60:.1f} min ({100 * young_waste:.1f} % waste)")
    best = taus[np.argmin(exact)]
    ax.plot(best / 60, 100 * exact.min(), "o", color=OKABE_ITO["blue"], label=f"exact optimum {best / 60:.1f} min")
    ax.set(xscale="log", xlabel="work between checkpoints (minutes)", ylabel="wasted time (% of useful work)",
           ylim=(0, min(100, 4 * 100 * exact.min())), title=title)
    ax.legend(fontsize="small", loc="lower left")
    return fig


def plot_resumed_run(reference: Result, resumed: Result, resumed_from_step: int, failed_after_step: int) -> Figure:
    """An uninterrupted run's loss curve (line) with a relaunched run's measured steps on it (dots),
    and the steps trained before the failure and thrown away shaded.

    Args:
        reference: the uninterrupted run (steps counted from 1).
        resumed: the relaunched run; its steps count from 1 at ``resumed_from_step + 1``.
        resumed_from_step: steps the restored checkpoint already held.
        failed_after_step: the last step trained before the failure.
    """
    for path, run in (("reference", reference), ("resumed", resumed)):
        if InstanceOf(Result, "a Result")(path, run).curve is None:
            raise InputError(f"{path}.curve", None, "a training curve: only runs that trained can be drawn")
    resumed_from_step = Integer(0)("resumed_from_step", resumed_from_step)
    failed_after_step = Integer(resumed_from_step)("failed_after_step", failed_after_step)
    fig, ax = new_figure(8.0, 3.2)
    ax.plot(reference.curve.step, reference.curve.loss, color=OKABE_ITO["blue"], label="uninterrupted")
    ax.plot(resumed_from_step + resumed.curve.step, resumed.curve.loss, "o", ms=4, color=OKABE_ITO["orange"],
            label="relaunched (measured)")
    ax.axvspan(resumed_from_step + 0.5, failed_after_step + 0.5, color="0.85", label="trained, then lost")
    ax.set(xlabel="training step", ylabel="training loss", title="The relaunched job picks up the uninterrupted curve")
    ax.legend(fontsize="small")
    return fig
