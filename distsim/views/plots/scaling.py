"""How runs scale with devices, and where each step's time goes."""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from distsim.views.plots.style import (IDLE_COLOR, OKABE_ITO, SERIES_COLORS, at_least_one, new_figure,
                                       one_label_each, result_label, series_style, time_scale)
from distsim.views.plots.timeline import device_rows
from distsim.results.result import Result
from distsim.results.trace import EVENT_KINDS
from distsim.validation import InputError, InstanceOf, Number

#: Bar segments of :func:`plot_cost_breakdown`, bottom to top: (kind, legend, colour).
COST_PARTS: tuple[tuple[str, str, str], ...] = (
    ("compute", "compute (forward + backward)", OKABE_ITO["blue"]),
    ("comm", "communication", OKABE_ITO["vermillion"]),
    ("input", "input pipeline", OKABE_ITO["yellow"]),
    ("update", "update", OKABE_ITO["bluish_green"]),
    ("idle", "idle / wait", IDLE_COLOR),
)


def _scaling_points(path: str, results: Sequence[Result]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    results = list(results)  # a series may be empty (nothing measured yet)
    for i, r in enumerate(results):
        Number(0, low_open=True, unit="relative to one device: scaling curves need Summary.speedup")(
            f"{path}[{i}].summary.speedup", InstanceOf(Result, "a Result")(f"{path}[{i}]", r).summary.speedup)
    order = np.argsort([r.num_replicas for r in results])
    n = np.array([results[i].num_replicas for i in order], dtype=float)
    speedup = np.array([results[i].summary.speedup for i in order], dtype=float)
    return n, speedup, speedup / n


def plot_scaling(
    predicted: Mapping[str, Sequence[Result]],
    measured: Mapping[str, Sequence[Result]] | None = None,
) -> Figure:
    """Speedup (left) and scaling efficiency (right) against device count.

    Args:
        predicted: one line per entry, legend label -> results at several
            device counts (e.g. one model over one link, from
            ``distsim.sweep``). Each result needs ``summary.speedup``.
        measured: points to overlay, legend label (name the source, e.g.
            ``"measured here, 2 CPU cores"`` or ``"published: 4x GTX 1080 Ti"``)
            -> results. Drawn as hollow markers without lines.

    The dashed black line is ideal linear scaling (speedup = devices,
    efficiency = 1). Efficiency is speedup / devices.
    """
    for name, series in (("predicted", predicted), ("measured", measured or {})):
        if not isinstance(series, Mapping):
            raise InputError(name, series, "a mapping of legend label -> results")
    if not predicted and not measured:
        raise InputError("predicted", predicted, "at least one series (legend label -> results), here or in measured")
    fig, (ax_s, ax_e) = new_figure(11.0, 4.6, ncols=2)
    all_n = []
    for i, (label, results) in enumerate(predicted.items()):
        n, speedup, eff = _scaling_points(f"predicted[{label!r}]", results)
        all_n.extend(n)
        style = series_style(i)
        ax_s.plot(n, speedup, label=label, **style)
        ax_e.plot(n, eff, label=label, **style)
    for j, (label, results) in enumerate((measured or {}).items()):
        n, speedup, eff = _scaling_points(f"measured[{label!r}]", results)
        all_n.extend(n)
        style = series_style(len(predicted) + j)
        for ax, y in ((ax_s, speedup), (ax_e, eff)):
            ax.plot(n, y, linestyle="", marker=style["marker"], markersize=9, markerfacecolor="none",
                    markeredgewidth=2, color=style["color"], label=label)
    top = max(all_n) if all_n else 1.0
    ideal = np.array([1.0, max(top, 2.0)])
    ax_s.plot(ideal, ideal, color="black", linestyle="--", linewidth=1, label="ideal (linear)", zorder=0)
    ax_e.plot(ideal, [1, 1], color="black", linestyle="--", linewidth=1, label="ideal (linear)", zorder=0)
    for ax in (ax_s, ax_e):
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.set_xlabel("devices (replicas)")
        ax.grid(alpha=0.3, which="both")
    ax_s.set_yscale("log", base=2)
    ax_s.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax_s.set_ylabel("weak-scaling speedup (× one device)")
    ax_e.set_ylabel("scaling efficiency (speedup / devices)")
    ax_e.set_ylim(0, max(1.1, ax_e.get_ylim()[1]))
    ax_s.set_title("speedup")
    ax_e.set_title("efficiency")
    ax_e.legend(fontsize="small", loc="lower left", title="lines: predicted; hollow: measured",
                title_fontsize="small")
    return fig


def cost_per_step(result: Result) -> dict[str, float]:
    """Seconds per step each worker device spends in every event kind, from
    the result's trace: for every device that computes (with its
    ``"<device>/comm"`` stream), its busy seconds per kind divided by the
    steps (for an asynchronous worker: its own updates) it took part in,
    averaged over those devices. Host rows such as the input pipeline's are
    left out: their effect shows as the devices' waiting."""
    trace = InstanceOf(Result, "a Result")("result", result).trace
    if trace is None:
        raise InputError("result.trace", None, "a recorded trace (the cost breakdown is read from it)")
    row_of_device, _ = device_rows(trace.devices)
    row = row_of_device[trace.device]
    computes = np.unique(row[trace.kind == EVENT_KINDS.index("compute")])
    if not len(computes):
        raise InputError("result.trace", None, "a trace in which some device computes",
                         problem=f"no compute event among its {len(trace)} events")
    totals = np.zeros(len(EVENT_KINDS))
    for r in computes:  # per device: its own steps (async workers each do their own updates)
        mine = row == r
        seconds = np.bincount(trace.kind[mine], weights=trace.end_s[mine] - trace.start_s[mine],
                              minlength=len(EVENT_KINDS))
        totals += seconds / len(np.unique(trace.step[mine]))
    return {kind: float(totals[k]) / len(computes) for k, kind in enumerate(EVENT_KINDS)}


def _cost_of(path: str, result: Result) -> dict[str, float]:
    try:
        return cost_per_step(result)
    except InputError as exc:
        raise exc.rebased("result", path) from None


def plot_cost_breakdown(results: Sequence[Result], labels: Sequence[str] | None = None) -> Figure:
    """Stacked bars, one per run (e.g. per strategy): average seconds per
    step a worker device spends computing, communicating, reading input,
    updating and waiting (:func:`cost_per_step`).

    A black diamond marks the run's step time. Where the bar reaches above
    it, communication overlapped compute (it ran in the background).
    """
    results = at_least_one("results", results, Result, "Result")
    labels = one_label_each("labels", labels, len(results), "result") or [result_label(r) for r in results]
    costs = [_cost_of(f"results[{i}]", r) for i, r in enumerate(results)]
    step_s = np.array([r.summary.step_time_s for r in results])
    span = max(max(sum(c.values()) for c in costs), float(step_s.max()))
    factor, unit = time_scale(span)
    fig, ax = new_figure(max(5.0, 1.3 * len(results) + 3.5), 4.6)
    x = np.arange(len(results))
    bottom = np.zeros(len(results))
    for kind, name, color in COST_PARTS:
        height = np.array([c[kind] for c in costs]) / factor
        ax.bar(x, height, bottom=bottom, color=color, edgecolor="0.3", linewidth=0.5, label=name, width=0.6)
        bottom += height
    ax.plot(x, step_s / factor, "D", color="black", markersize=7, label="step time")
    ax.set_xticks(x, labels, rotation=20 if len(results) > 3 else 0, ha="right" if len(results) > 3 else "center",
                  fontsize="small")
    ax.set_ylabel(f"time per step per worker device ({unit})")
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return fig


def plot_speedup_curves(
    devices: Sequence[int],
    curves: Mapping[str, Sequence[float]],
    points: Mapping[str, tuple[Sequence[float], Sequence[float]]] | None = None,
    title: str | None = None,
) -> Figure:
    """Speedup against device count: one line per curve, hollow markers for points.

    Args:
        devices: the device counts of every curve.
        curves: legend label -> speedup at each count (say in the label
            which speedup it is: strong scaling, same global batch; or weak
            scaling, same per-replica batch).
        points: legend label -> ``(device counts, speedups)`` drawn as hollow
            markers without lines (measured or published values).
        title: the axes title.

    The dashed line is ideal linear scaling; the grey line marks speedup 1.
    """
    devices = np.asarray(devices, dtype=float)
    for label, values in curves.items():
        if len(values) != len(devices):
            raise InputError(f"curves[{label!r}]", f"{len(values)} values", f"one per device count ({len(devices)})")
    fig, ax = new_figure(6.4, 3.8)
    ax.plot(devices, devices, color="black", linestyle="--", linewidth=1, label="ideal")
    ax.axhline(1, color="0.6", linewidth=0.8)
    for i, (label, values) in enumerate(curves.items()):
        ax.plot(devices, values, label=label, **series_style(i))
    for j, (label, (n, values)) in enumerate((points or {}).items()):
        ax.plot(n, values, "o", markersize=9, markerfacecolor="none", markeredgewidth=2,
                color=SERIES_COLORS[(len(curves) + j) % len(SERIES_COLORS)], label=label)
    ax.set(xlabel="devices", ylabel="speedup (x one device)", xticks=devices, title=title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    return fig


def plot_ps_shards(shards: Sequence[int], worker_s: float, ps_s: Sequence[float],
                   async_samples_per_s: Sequence[float], k: int) -> Figure:
    """How many parameter-server shards: one direction of a synchronous push (left) and the
    asynchronous throughput (right) against the shard count, with shard count ``k`` marked.

    Args:
        shards: shard counts k.
        worker_s: seconds for a worker's own link to carry one gradient, ``n / B_worker``.
        ps_s: seconds for the busiest PS link when all workers push at once, ``w n / (k B_ps)``, per k.
        async_samples_per_s: predicted asynchronous throughput per k.
        k: the shard count to mark.
    """
    shards, ps_s, rate = np.asarray(shards), np.asarray(ps_s, dtype=float), np.asarray(async_samples_per_s, float)
    i = int(np.flatnonzero(shards == k)[0])
    fig, (ax1, ax2) = new_figure(12.0, 3.6, ncols=2)
    ax1.plot(shards, ps_s * 1e3, color=OKABE_ITO["vermillion"], label="busiest PS link  w·n/(k·B_ps)")
    ax1.axhline(worker_s * 1e3, color=OKABE_ITO["blue"], label="worker link  n/B_worker")
    ax1.plot(shards, np.maximum(ps_s, worker_s) * 1e3, color="black", linewidth=2.5, alpha=0.35,
             label="one direction = max of the two")
    ax1.plot([k], [max(ps_s[i], worker_s) * 1e3], "o", color="black")
    ax1.set(xlabel="PS shards k", ylabel="ms per direction (all workers at once)", yscale="log",
            title=f"synchronous burst: {max(ps_s[i], worker_s) * 1e3:.0f} ms per direction at k = {k}")
    ax1.legend(fontsize="small")
    ax2.plot(shards, rate, color=OKABE_ITO["bluish_green"])
    ax2.plot([k], [rate[i]], "o", color="black")
    ax2.set(xlabel="PS shards k", ylabel="samples/s", ylim=(0, rate.max() * 1.1),
            title=f"asynchronous: {rate[i]:.0f} samples/s at k = {k}")
    for ax in (ax1, ax2):
        ax.grid(alpha=0.3)
    return fig


def plot_message_times(curves: Mapping[str, tuple[Sequence[float], Sequence[float]]],
                       points: Mapping[str, tuple[Sequence[float], Sequence[float]]] | None = None,
                       title: str | None = None) -> Figure:
    """All-reduce time (s) against message size (bytes), log-log: ``curves`` (label -> (sizes, seconds))
    as lines, ``points`` (label -> (sizes, seconds)) as hollow markers (measured values)."""
    if not curves and not points:
        raise InputError("curves", curves, "at least one label -> (sizes in bytes, seconds)")
    fig, ax = new_figure(7, 4.2)
    for i, (label, (x, y)) in enumerate(curves.items()):
        style = series_style(i)
        ax.loglog(x, y, label=label, color=style["color"], linestyle=style["linestyle"])  # no markers: dense x
    for j, (label, (x, y)) in enumerate((points or {}).items()):
        ax.loglog(x, y, "o", markerfacecolor="none", markersize=8, label=label,
                  color=SERIES_COLORS[(len(curves) + j) % len(SERIES_COLORS)])
    ax.set(xlabel="message size per rank (bytes)", ylabel="all-reduce time (s)", title=title)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize="small")
    return fig


def scaling_table(table: Mapping[str, Sequence[float]]) -> str:
    """Strong and weak scaling side by side, one row per device count, as fixed-width text.

    ``table`` holds equal-length ``devices``, ``strong_s`` and ``weak_s`` (step
    times in seconds) and ``strong_speedup`` and ``weak_speedup`` (ratios);
    times are shown in milliseconds.
    """
    lines = [f"{'devices':>7}{'strong: step (ms)':>19}{'speedup':>9}{'weak: step (ms)':>17}{'speedup':>9}"]
    for i, n in enumerate(table["devices"]):
        lines.append(f"{n:>7}{table['strong_s'][i] * 1e3:>19.2f}{table['strong_speedup'][i]:>9.2f}"
                     f"{table['weak_s'][i] * 1e3:>17.2f}{table['weak_speedup'][i]:>9.2f}")
    return "\n".join(lines)
