"""The network lab's figures: step time against link bandwidth (predicted curves, measured points),
every NIC's load over a simulated run, and a parameter server's workers' phase over a measured run."""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
from matplotlib.figure import Figure

from distsim.validation import InputError, Number
from distsim.views.plots.style import SERIES_COLORS, new_figure, series_style, time_scale


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


def ps_phases(time_s, worker) -> dict[int, np.ndarray]:
    """For every parameter-server worker but 0, the phase of each of its applies within worker 0's cycle.

    Every update worker ``k`` (``k >= 1``) applies falls between two consecutive applies
    of worker 0; its phase is how far along: 0 (or 1) when the two apply together, 0.5
    half a cycle apart, which for two workers is taking turns.

    Args:
        time_s: when each update was applied, seconds, in apply order.
        worker: which worker applied it (0, 1, ...), one per update.

    Returns:
        ``{k: phases}``, each in [0, 1), for the applies of worker ``k`` that fall
        between worker 0's first and last.
    """
    time_s, worker = np.asarray(time_s, dtype=float), np.asarray(worker)
    if time_s.shape != worker.shape:
        raise InputError("worker", f"{worker.size} entries", f"one per apply time ({time_s.size})")
    if not (np.all(np.isfinite(time_s)) and np.all(np.diff(time_s) >= 0)):
        raise InputError("time_s", "not finite and in order", "apply times in apply order (non-decreasing)")
    own = time_s[worker == 0]
    if own.size < 2:
        raise InputError("worker", f"{own.size} update(s) by worker 0", "at least 2 (a cycle to place others in)")
    out = {}
    for k in sorted(set(worker.tolist()) - {0}):
        t = time_s[worker == k]
        t = t[(t >= own[0]) & (t < own[-1])]
        i = np.searchsorted(own, t, side="right") - 1
        out[int(k)] = (t - own[i]) / (own[i + 1] - own[i])
    return out


def plot_ps_phases(runs: Mapping[str, tuple[Sequence[float], Sequence[int]]], title: str = "") -> Figure:
    """How far apart two parameter-server workers apply, update after update, one series per run.

    The distance is worker 1's phase in worker 0's cycle (:func:`ps_phases`) folded onto
    [0, 0.5]: 0 when the two apply together, 0.5 when they are half a cycle apart (taking turns).

    Args:
        runs: per label, a run's apply times (seconds, in apply order) and the worker of each.
        title: the axes' title.
    """
    if not runs:
        raise InputError("runs", "{}", "at least one run")
    fig, ax = new_figure(7.0, 3.8)
    for i, (name, (time_s, worker)) in enumerate(runs.items()):
        phase = ps_phases(time_s, worker).get(1)
        if phase is None:
            raise InputError(f"runs[{name!r}]", "no update by worker 1", "a run of two or more workers")
        style = series_style(i)
        ax.plot(np.arange(1, phase.size + 1), np.minimum(phase, 1 - phase), color=style["color"],
                linestyle=style["linestyle"], marker=style["marker"], markersize=4, label=name)
    for y in (0.0, 0.5):
        ax.axhline(y, color="black", linewidth=0.8, linestyle=":")
    ax.set_yticks([0.0, 0.25, 0.5], ["0: together\n(lockstep)", "0.25", "0.5: half a cycle\napart (turns)"])
    ax.set_ylim(-0.03, 0.53)
    ax.set_xlabel("worker 1's update, in the order the parameter server applied it")
    ax.set_ylabel("distance from worker 0\n(cycles of worker 0)")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(0.0, -0.22), ncol=len(runs), frameon=False)
    if title:
        ax.set_title(title, fontsize=10)
    return fig


def nic_load(result, bin_s: float = 1e-3) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Bytes each NIC sends per second over a simulated lab run, from its trace.

    A ring all-reduce (``"all-reduce"`` events) has every worker send ``2 (p-1)/p``
    gradients per step, spread over that step's all-reduce time; a parameter server
    sends one copy of the weights per ``"pull variables"`` event and receives one
    gradient per ``"push gradient"`` event, which its worker sends. Bytes are on the
    wire: the gradient divided by the link's ``payload_fraction`` (frame headers).

    Args:
        result: :func:`distsim.predict`'s result of a lab scenario (with its trace and scenario).
        bin_s: width of a time bin, seconds.

    Returns:
        ``(bin_start_s, {nic: bytes_per_s})``: ``"ps"`` (parameter server only) and
        ``"w0"``, ``"w1"``, ..., each one value per bin.
    """
    if result.trace is None or result.scenario is None:
        raise InputError("result", "no trace or scenario", "distsim.predict's result of a scenario")
    bin_s = Number(0, low_open=True, unit="s")("bin_s", bin_s)
    cluster, trace = result.scenario.cluster, result.trace
    wire_bytes = result.scenario.workload.gradient_bytes / cluster.inter_link.payload_fraction
    edges = np.arange(0.0, trace.span_s + bin_s, bin_s)
    load = {name: np.zeros(edges.size - 1) for name in
            (["ps"] if result.strategy == "parameter_server" else []) + [f"w{w}" for w in range(cluster.num_workers)]}
    labels = np.asarray(trace.labels)[trace.label]
    owner = [trace.devices[d].split("/")[0] for d in trace.device]
    ring = 2 * (cluster.num_workers - 1) / cluster.num_workers * wire_bytes
    for (start, end, step, label, who) in zip(trace.start_s, trace.end_s, trace.step, labels, owner):
        if label == "pull variables" and result.strategy == "parameter_server":
            _spread(load["ps"], edges, start, end, wire_bytes)
        elif label == "push gradient":
            _spread(load[who], edges, start, end, wire_bytes)
        elif label.startswith("all-reduce"):
            mine = (np.asarray(owner) == who) & (trace.step == step) & np.char.startswith(labels, "all-reduce")
            _spread(load[who], edges, start, end, ring * (end - start) / (trace.end_s - trace.start_s)[mine].sum())
    return edges[:-1], {k: v / bin_s for k, v in load.items()}


def _spread(load: np.ndarray, edges: np.ndarray, start: float, end: float, total: float) -> None:
    """Add ``total`` bytes sent evenly over ``[start, end)`` to the bins of ``load``."""
    overlap = np.clip(np.minimum(edges[1:], end) - np.maximum(edges[:-1], start), 0.0, None)
    load += total * overlap / (end - start)


def plot_nic_load(results: Mapping[str, object], window_s: tuple[float, float], bin_s: float = 1e-3) -> Figure:
    """Every NIC's sending load over a window of simulated lab runs (:func:`nic_load`), one panel per run,
    one row per NIC, each row filled up to the share of its NIC's rate it uses.

    Args:
        results: per label, :func:`distsim.predict`'s result of a lab scenario.
        window_s: ``(start, end)`` of the window shown, seconds of simulated time.
        bin_s: width of a time bin, seconds.
    """
    if not results:
        raise InputError("results", "{}", "at least one result")
    start, end = window_s
    fig, axes = new_figure(7.0, 1.0 + 0.45 * sum(r.scenario.cluster.num_workers + 1 for r in results.values()),
                           nrows=len(results), sharex=True, squeeze=False)
    scale, unit = time_scale(end - start)
    for ax, (name, result), color in zip(axes[:, 0], results.items(), SERIES_COLORS):
        t, load = nic_load(result, bin_s)
        keep = (t >= start) & (t < end)
        rate = result.scenario.cluster.inter_link.bandwidth_Bps
        for row, (nic, values) in enumerate(load.items()):
            ax.fill_between((t[keep] - start) / scale, -row, -row + 0.85 * values[keep] / rate, step="post",
                            color=color, linewidth=0)
            ax.axhline(-row + 0.85, color="black", linewidth=0.6, linestyle=":")
        ax.set_yticks([-row + 0.4 for row in range(len(load))],
                      ["parameter server" if nic == "ps" else f"worker {nic[1:]}" for nic in load])
        ax.set_ylim(-len(load) + 0.9, 1.0)
        ax.set_title(f"{name}: bytes each NIC sends (dotted: its full rate)", fontsize=9, loc="left")
    axes[-1, 0].set_xlabel(f"simulated time ({unit})")
    return fig
