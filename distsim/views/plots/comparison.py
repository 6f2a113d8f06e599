"""Predicted against measured: how far off is the simulator?"""

from __future__ import annotations

from typing import Sequence

import numpy as np
from matplotlib.figure import Figure

from distsim.results.compare import Comparison
from distsim.results.result import Result
from distsim.validation import InputError, InstanceOf, Number, OneOf
from distsim.views.plots.style import (OKABE_ITO, SERIES_COLORS, at_least_one, new_figure, one_label_each,
                                       series_style)

#: Summary metrics the scatter can compare, with their axis names.
SCATTER_METRICS: dict[str, str] = {
    "step_time_s": "step time (s)",
    "throughput_samples_per_s": "throughput (samples/s)",
    "epoch_time_s": "epoch time (s)",
    "speedup": "weak-scaling speedup (× one device)",
    "efficiency": "scaling efficiency (speedup / replicas)",
}


def plot_predicted_vs_measured(
    predicted: Sequence[Result],
    measured: Sequence[Result],
    metric: str = "step_time_s",
    band: float = 0.2,
    labels: Sequence[str] | None = None,
) -> Figure:
    """Scatter of predicted (x) against measured (y) values of one summary
    metric, one point per pair, with the line y = x and a relative error band.

    Points inside the shaded band are within ``band`` (e.g. 0.2 = ±20 %) of
    the prediction. Both axes are logarithmic when the values span more than
    a factor of 10. Points are grouped by strategy (colour and marker).

    Args:
        predicted: predicted (or simulated) results.
        measured: the measured results, pairwise with ``predicted``.
        metric: a key of :data:`SCATTER_METRICS` (a :class:`Summary` field).
        band: relative half-width of the error band, in (0, 1).
        labels: text next to each point (default: ``"<N> rep."``).
    """
    OneOf(tuple(SCATTER_METRICS))("metric", metric)
    band = Number(0, 1, low_open=True, unit="a fraction: 0.2 means ±20 %")("band", band)
    predicted = at_least_one("predicted", predicted, Result, "Result")
    measured = at_least_one("measured", measured, Result, "Result")
    if len(measured) != len(predicted):
        raise InputError("measured", None, f"one result per prediction ({len(predicted)})",
                         problem=f"{len(measured)} results")
    labels = one_label_each("labels", labels, len(predicted), "pair")
    x = np.array([_metric(f"predicted[{i}]", r, metric) for i, r in enumerate(predicted)], dtype=float)
    y = np.array([_metric(f"measured[{i}]", r, metric) for i, r in enumerate(measured)], dtype=float)
    fig, ax = new_figure(6.0, 5.4)
    lo, hi = float(min(x.min(), y.min())), float(max(x.max(), y.max()))
    log = lo > 0 and hi / lo > 10
    pad = (hi / lo) ** 0.08 if log else 0.08 * (hi - lo or abs(hi) or 1.0)
    lim = (lo / pad, hi * pad) if log else (lo - pad, hi + pad)
    line = np.geomspace(*lim, 100) if log else np.linspace(*lim, 100)
    ax.fill_between(line, line * (1 - band), line * (1 + band), color=OKABE_ITO["sky_blue"], alpha=0.25,
                    linewidth=0, label=f"within ±{band:.0%} of the prediction")
    ax.plot(line, line, color=OKABE_ITO["black"], linewidth=1, label="y = x (perfect prediction)")
    strategies = list(dict.fromkeys(m.strategy for m in measured))
    for i, strategy in enumerate(strategies):
        idx = [k for k, m in enumerate(measured) if m.strategy == strategy]
        style = series_style(i)
        ax.plot(x[idx], y[idx], linestyle="", marker=style["marker"], color=style["color"], markersize=7,
                markeredgecolor="black", markeredgewidth=0.5, label=strategy)
    for k in range(len(x)):
        text = labels[k] if labels is not None else f"{measured[k].num_replicas} rep."
        ax.annotate(text, (x[k], y[k]), textcoords="offset points", xytext=(5, 4), fontsize="x-small")
    if log:
        ax.set_xscale("log")
        ax.set_yscale("log")
    ax.set_xlim(lim)
    ax.set_ylim(lim)
    ax.set_aspect("equal")
    ax.set_xlabel(f"predicted {SCATTER_METRICS[metric]}")
    ax.set_ylabel(f"measured {SCATTER_METRICS[metric]}")
    inside = np.abs(y - x) <= band * np.abs(x)
    ax.set_title(f"{int(inside.sum())} of {len(x)} within ±{band:.0%}")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize="small", loc="upper left")
    return fig


def _metric(path: str, result: Result, metric: str) -> float:
    value = getattr(result.summary, metric)
    if not Number().accepts(value):
        raise InputError(f"{path}.summary.{metric}", value, "a finite number: pick a metric every result reports")
    return float(value)


def plot_comparison(comparison: Comparison):
    """Bars of predicted vs measured step time and throughput per configuration,
    each labelled with its signed error; a third panel shows the ratios to the
    baseline when there is one. Returns a matplotlib ``Figure``."""
    rows = InstanceOf(Comparison, "a Comparison (from distsim.compare)")("comparison", comparison).rows
    panels = 3 if comparison.baseline is not None else 2
    fig, axes = new_figure(4.2 * panels, 0.45 * len(rows) + 1.6, ncols=panels, sharey=True)
    y = np.arange(len(rows))
    h = 0.38
    specs = [
        ("step time (ms)", [r.predicted_step_time_s * 1e3 for r in rows],
         [r.measured_step_time_s * 1e3 for r in rows], [r.step_time_error for r in rows]),
        ("throughput (samples/s)", [r.predicted_throughput for r in rows],
         [r.measured_throughput for r in rows], [r.throughput_error for r in rows]),
    ]
    if comparison.baseline is not None:
        specs.append((f"step time / {comparison.baseline}", [r.predicted_ratio for r in rows],
                      [r.measured_ratio for r in rows], [r.ratio_error for r in rows]))
    for ax, (title, pred, meas, err) in zip(np.atleast_1d(axes), specs):
        ax.barh(y - h / 2, pred, height=h, label="predicted", color=SERIES_COLORS[0])
        ax.barh(y + h / 2, meas, height=h, label="measured", color=SERIES_COLORS[1])
        for yi, p, m, e in zip(y, pred, meas, err):
            ax.text(max(p, m) * 1.02, yi, f"{e:+.0%}", va="center", fontsize=8)
        ax.set_title(title, fontsize=10)
        ax.set_xlim(0, max(max(pred), max(meas)) * 1.25)
    first = np.atleast_1d(axes)[0]
    first.set_yticks(y, [r.label for r in rows])
    first.invert_yaxis()
    first.legend(loc="lower right", fontsize=8)
    fig.suptitle("predicted vs measured (signed error = predicted / measured - 1)", fontsize=10)
    return fig
