"""Figures of distsim runs (matplotlib).

Every function takes :class:`~distsim.results.result.Result` objects (simulated or
measured: they share one schema), traces, schedules or scenarios and returns a
matplotlib :class:`~matplotlib.figure.Figure`; none prints or shows anything.
Axes carry units, colours come from the colour-blind-safe Okabe-Ito palette,
and every legend says what its encodings mean. Save any figure with
:func:`save_figure`.
"""

from distsim.views.plots.comparison import plot_comparison, plot_predicted_vs_measured
from distsim.views.plots.network import nic_load, plot_bandwidth_sweep, plot_nic_load, plot_ps_phases, ps_phases
from distsim.views.plots.scaling import (
    cost_per_step,
    plot_cost_breakdown,
    plot_message_times,
    plot_ps_shards,
    plot_scaling,
    plot_speedup_curves,
    scaling_table,
)
from distsim.views.plots.losslab import plot_loss_lab, plot_mistake_by_replicas
from distsim.views.plots.pipeline import outline_passes, plot_microbatch_sweep, plot_pipeline_schedules
from distsim.views.plots.schedule import animate_schedule, plot_schedule_step, save_animation
from distsim.views.plots.sharding import plot_sharding
from distsim.views.plots.style import OKABE_ITO, SERIES_COLORS, figure_png, new_figure, save_figure, series_style, time_scale
from distsim.views.plots.timeline import TimelineDrawing, plot_timeline, plot_timelines
from distsim.views.plots.training import (
    plot_checkpoint_waste,
    plot_resumed_run,
    plot_staleness,
    plot_staleness_shares,
    plot_training_curves,
)

__all__ = [
    "scaling_table",
    "plot_checkpoint_waste",
    "OKABE_ITO",
    "SERIES_COLORS",
    "TimelineDrawing",
    "animate_schedule",
    "cost_per_step",
    "figure_png",
    "new_figure",
    "plot_bandwidth_sweep",
    "nic_load",
    "plot_nic_load",
    "plot_ps_phases",
    "ps_phases",
    "plot_comparison",
    "plot_loss_lab",
    "plot_mistake_by_replicas",
    "plot_cost_breakdown",
    "outline_passes",
    "plot_message_times",
    "plot_microbatch_sweep",
    "plot_pipeline_schedules",
    "plot_predicted_vs_measured",
    "plot_ps_shards",
    "plot_resumed_run",
    "plot_scaling",
    "plot_speedup_curves",
    "plot_schedule_step",
    "plot_sharding",
    "plot_staleness",
    "plot_staleness_shares",
    "plot_timeline",
    "plot_timelines",
    "plot_training_curves",
    "save_animation",
    "save_figure",
    "series_style",
    "time_scale",
]
