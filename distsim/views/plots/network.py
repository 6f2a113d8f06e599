"""Step time against link bandwidth: predicted curves with measured points on them."""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
from matplotlib.figure import Figure

from distsim.validation import InputError, Number
from distsim.views.plots.style import new_figure, series_style


def plot_bandwidth_sweep(
    rates_mbit: Sequence[float],
    predicted_s: Mapping[str, Sequence[float]],
    measured: Mapping[str, Sequence[tuple[float, float]]] | None = None,
    flat_s: Mapping[str, float] | None = None,
    title: str = "",
) -> Figure:
    """Step time (log) against each NIC's rate (log), one series per configuration.

    Args:
        rates_mbit: the rates of the predicted curves, Mbit/s.
        predicted_s: per series, the predicted step time (seconds) at each rate.
        measured: per series (same names), measured ``(rate_mbit, step_s)`` points.
        flat_s: horizontal reference lines (e.g. one worker, which needs no
            network), seconds by label.
        title: the axes' title.
    """
    rates = np.array([Number(0, low_open=True, unit="Mbit/s")(f"rates_mbit[{i}]", r)
                      for i, r in enumerate(rates_mbit)], dtype=float)
    if len(rates) < 2:
        raise InputError("rates_mbit", list(rates_mbit), "at least two rates (a curve)")
    fig, ax = new_figure(7.0, 4.4)
    for i, (name, ys) in enumerate(predicted_s.items()):
        if len(ys) != len(rates):
            raise InputError(f"predicted_s[{name!r}]", len(ys), f"one step time per rate ({len(rates)})")
        style = series_style(i)
        ax.plot(rates, ys, color=style["color"], linestyle=style["linestyle"], label=f"{name}: predicted")
        points = (measured or {}).get(name, [])
        if points:
            x, y = zip(*points)
            ax.plot(x, y, linestyle="none", marker=style["marker"], color=style["color"], markersize=7,
                    markeredgecolor="black", label=f"{name}: measured")
    for j, (name, value) in enumerate((flat_s or {}).items()):
        ax.axhline(value, color="black", linestyle=(0, (1, 2 + j)), linewidth=1.2, label=name)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("every NIC's rate, each direction (Mbit/s)")
    ax.set_ylabel("step time (s)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    if title:
        ax.set_title(title)
    return fig
