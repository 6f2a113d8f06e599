"""Predicted against measured: one table, one figure.

:func:`compare` pairs predicted :class:`~distsim.results.result.Result` objects with
measured ones (a single run each, or several repeats of the same
configuration) and reports, per configuration, step time and throughput with
the signed relative error ``predicted / measured - 1`` (positive: the
simulator predicted too slow a step / too high a throughput).

On a shared, noisy machine absolute times drift between runs, so with a
``baseline`` (the index of e.g. the one-device configuration, measured in the
same rounds) the table also compares **ratios to the baseline**: for each
repeat ``r``, ``measured_step[r] / measured_baseline_step[r]``, median over
repeats, against the predicted ratio. That is the figure to judge the model
on. NumPy only; ``distsim.views.plots.plot_comparison`` draws a comparison.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Sequence, Union

import numpy as np

from distsim.results.result import Result
from distsim.validation import InputError, InstanceOf, Integer, Number, Optional

Measured = Union[Result, Sequence[Result]]


@dataclass(frozen=True)
class ComparisonRow:
    """One configuration (times in seconds, throughputs in samples/s).

    Attributes:
        label: configuration name.
        strategy: strategy name.
        num_replicas: replicas (async: workers).
        predicted_step_time_s, measured_step_time_s: step times; measured is
            the median over repeats.
        step_time_error: ``predicted / measured - 1``.
        predicted_throughput, measured_throughput: samples per second.
        throughput_error: ``predicted / measured - 1``.
        repeats: measured runs behind the row.
        measured_spread: (max - min) / median of the repeats' step times.
        predicted_ratio, measured_ratio, ratio_error: step time relative to
            the baseline row, and its signed error; ``None`` without baseline.
        bottleneck, bottleneck_share: what the prediction names as its
            bottleneck and the share of the step it takes
            (:class:`~distsim.results.result.Summary`); ``None`` when the
            prediction does not say.
    """

    label: str
    strategy: str
    num_replicas: int
    predicted_step_time_s: float
    measured_step_time_s: float
    step_time_error: float
    predicted_throughput: float
    measured_throughput: float
    throughput_error: float
    repeats: int
    measured_spread: float
    predicted_ratio: float | None = None
    measured_ratio: float | None = None
    ratio_error: float | None = None
    bottleneck: str | None = None
    bottleneck_share: float | None = None


@dataclass(frozen=True)
class Comparison:
    """The rows of :func:`compare` and their error statistics.

    Attributes:
        rows: one per configuration.
        baseline: label of the baseline row, or ``None``.
    """

    rows: tuple[ComparisonRow, ...]
    baseline: str | None = None

    @property
    def judged_errors(self) -> np.ndarray:
        """The errors the model is judged on: ratio errors (baseline row
        excluded, its ratio is 1 by construction) with a baseline, else
        step-time errors."""
        if self.baseline is None:
            return np.array([r.step_time_error for r in self.rows])
        return np.array([r.ratio_error for r in self.rows if r.label != self.baseline])

    @property
    def median_abs_error(self) -> float:
        return float(np.median(np.abs(self.judged_errors)))

    @property
    def max_abs_error(self) -> float:
        return float(np.max(np.abs(self.judged_errors)))

    def to_dict(self) -> dict:
        return {
            "baseline": self.baseline,
            "median_abs_error": self.median_abs_error,
            "max_abs_error": self.max_abs_error,
            "rows": [asdict(r) for r in self.rows],
        }

    def to_text(self) -> str:
        """A fixed-width table (ms, samples/s, signed %)."""
        head = f"{'configuration':<34}{'pred ms':>9}{'meas ms':>9}{'err':>8}{'pred/s':>9}{'meas/s':>9}{'err':>8}"
        if self.baseline is not None:
            head += f"{'pred x':>8}{'meas x':>8}{'err':>8}"
        head += "  predicted bottleneck"
        lines = [head, "-" * len(head)]
        for r in self.rows:
            line = (
                f"{r.label:<34}{r.predicted_step_time_s * 1e3:>9.2f}{r.measured_step_time_s * 1e3:>9.2f}"
                f"{r.step_time_error:>+8.0%}{r.predicted_throughput:>9.0f}{r.measured_throughput:>9.0f}"
                f"{r.throughput_error:>+8.0%}"
            )
            if self.baseline is not None:
                line += f"{r.predicted_ratio:>8.2f}{r.measured_ratio:>8.2f}{r.ratio_error:>+8.0%}"
            lines.append(f"{line}  {_bottleneck_text(r)}")
        judged = "ratio to " + self.baseline if self.baseline is not None else "step time"
        lines.append(
            f"judged on {judged}: median |error| {self.median_abs_error:.1%}, max |error| {self.max_abs_error:.1%}"
        )
        return "\n".join(lines)


def _bottleneck_text(row: ComparisonRow) -> str:
    if row.bottleneck is None:
        return "-"
    return f"{row.bottleneck} {row.bottleneck_share:.0%}"


_RESULT = InstanceOf(Result, "a Result")
_STEP_TIME = Number(0, low_open=True, unit="seconds")


def _run(path: str, result: Result) -> Result:
    """``result`` checked: a Result whose step time is a finite number > 0."""
    _STEP_TIME(f"{path}.summary.step_time_s", _RESULT(path, result).summary.step_time_s)
    return result


def _listed(path: str, value, what: str, item: type | None = None) -> list:
    """``value`` as a list after checking it is a list or tuple (of ``item`` instances)."""
    if not isinstance(value, (list, tuple)) or item is not None and not all(isinstance(v, item) for v in value):
        raise InputError(path, value, f"a list of {what}")
    return list(value)


def _as_runs(path: str, item: Measured) -> list[Result]:
    """``item`` as a list of its repeats: a Result, or a non-empty list of them."""
    if isinstance(item, Result):
        return [_run(path, item)]
    if isinstance(item, (str, bytes, dict)) or not isinstance(item, Sequence) or not item:
        raise InputError(path, item, "a Result or a non-empty list of Results (its repeats)")
    return [_run(f"{path}[{j}]", r) for j, r in enumerate(item)]


def _step(r: Result) -> float:
    return float(r.summary.step_time_s)


def compare(
    predicted: Sequence[Result],
    measured: Sequence[Measured],
    *,
    labels: Sequence[str] | None = None,
    baseline: int | None = None,
    paired_baselines: Sequence[Measured] | None = None,
) -> Comparison:
    """Pair predictions with measurements, configuration by configuration.

    Args:
        predicted: one predicted (or simulated) result per configuration.
        measured: per configuration, one measured result or the list of its
            repeats (in round order, so that repeat ``r`` of every
            configuration was measured in the same round).
        labels: row names (default ``"<strategy> x<replicas>"``).
        baseline: index of the baseline configuration for ratio errors.
        paired_baselines: optionally, per configuration, baseline runs
            measured right next to each of its repeats (same count); ratios
            then use these pairs instead of the baseline row's repeats.

    Raises:
        InputError: lengths differ, a bad baseline index, or a step time
            that is not a finite number > 0.
    """
    predicted = [_run(f"predicted[{i}]", p) for i, p in enumerate(_listed("predicted", predicted, "Results"))]
    measured = _listed("measured", measured, "Results (or lists of a Result's repeats)")
    labels = None if labels is None else _listed("labels", labels, "strings", str)
    paired_baselines = None if paired_baselines is None else _listed("paired_baselines", paired_baselines, "Results")
    if not predicted:
        raise InputError("predicted", predicted, "at least one Result")
    runs = [_as_runs(f"measured[{i}]", m) for i, m in enumerate(measured)]
    if len(runs) != len(predicted):
        raise InputError("measured", None, f"one entry per prediction ({len(predicted)})",
                         problem=f"{len(runs)} entries")
    if labels is not None and len(labels) != len(predicted):
        raise InputError("labels", list(labels), f"one label per configuration ({len(predicted)})")
    baseline = Optional(Integer(0, len(predicted) - 1, "an index into predicted"), "no ratios")("baseline", baseline)
    if paired_baselines is not None:
        if baseline is None:
            raise InputError("baseline", None, "an index into predicted when paired_baselines is given "
                             "(the row the pairs stand for)")
        pairs = [_as_runs(f"paired_baselines[{i}]", b) for i, b in enumerate(paired_baselines)]
        if len(pairs) != len(runs):
            raise InputError("paired_baselines", None, f"one entry per configuration ({len(runs)})",
                             problem=f"{len(pairs)} entries")
        for i, (b, r) in enumerate(zip(pairs, runs)):
            if len(b) != len(r):
                raise InputError(f"paired_baselines[{i}]", None, f"{len(r)} runs, one per measured repeat of "
                                 f"configuration {i}", problem=f"{len(b)} runs")
    labels = list(labels) if labels is not None else [f"{p.strategy} x{p.num_replicas}" for p in predicted]
    rows = []
    for i, (p, rs, label) in enumerate(zip(predicted, runs, labels)):
        steps = np.array([_step(r) for r in rs])
        measured_step = float(np.median(steps))
        measured_tp = float(np.median([r.summary.throughput_samples_per_s for r in rs]))
        ratio = {}
        if baseline is not None:
            base_runs = pairs[i] if paired_baselines is not None else runs[baseline]
            base_steps = np.array([_step(r) for r in base_runs])
            if len(base_steps) == len(steps):  # same rounds: ratio per round, then the median
                measured_ratio = float(np.median(steps / base_steps))
            else:
                measured_ratio = measured_step / float(np.median(base_steps))
            predicted_ratio = _step(p) / _step(predicted[baseline])
            ratio = dict(predicted_ratio=predicted_ratio, measured_ratio=measured_ratio,
                         ratio_error=predicted_ratio / measured_ratio - 1.0)
        rows.append(
            ComparisonRow(
                label=label,
                strategy=p.strategy,
                num_replicas=p.num_replicas,
                predicted_step_time_s=_step(p),
                measured_step_time_s=measured_step,
                step_time_error=_step(p) / measured_step - 1.0,
                predicted_throughput=float(p.summary.throughput_samples_per_s),
                measured_throughput=measured_tp,
                throughput_error=float(p.summary.throughput_samples_per_s) / measured_tp - 1.0,
                repeats=len(rs),
                measured_spread=float((steps.max() - steps.min()) / measured_step),
                bottleneck=p.summary.bottleneck,
                bottleneck_share=p.summary.bottleneck_share,
                **ratio,
            )
        )
    return Comparison(tuple(rows), labels[baseline] if baseline is not None else None)
