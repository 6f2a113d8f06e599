"""Figures of distsim runs (matplotlib).

Every function takes :class:`~distsim.results.result.Result` objects (simulated or
measured: they share one schema), traces, schedules or scenarios and returns a
matplotlib :class:`~matplotlib.figure.Figure`; none prints or shows anything.
Axes carry units, colours come from the colour-blind-safe Okabe-Ito palette,
and every legend says what its encodings mean. Save any figure with
:func:`save_figure`.
"""

from distsim.views.plots.comparison import plot_comparison, plot_predicted_vs_measured
from distsim.views.plots.network import plot_bandwidth_sweep
from distsim.views.plots.scaling import cost_per_step, plot_cost_breakdown, plot_scaling
from distsim.views.plots.schedule import animate_schedule, plot_schedule_step, save_animation
from distsim.views.plots.sharding import plot_sharding
from distsim.views.plots.style import OKABE_ITO, SERIES_COLORS, figure_png, save_figure
from distsim.views.plots.timeline import TimelineDrawing, plot_timeline, plot_timelines
from distsim.views.plots.training import plot_staleness, plot_training_curves

__all__ = [
    "OKABE_ITO",
    "SERIES_COLORS",
    "TimelineDrawing",
    "animate_schedule",
    "cost_per_step",
    "figure_png",
    "plot_bandwidth_sweep",
    "plot_comparison",
    "plot_cost_breakdown",
    "plot_predicted_vs_measured",
    "plot_scaling",
    "plot_schedule_step",
    "plot_sharding",
    "plot_staleness",
    "plot_timeline",
    "plot_timelines",
    "plot_training_curves",
    "save_animation",
    "save_figure",
]
