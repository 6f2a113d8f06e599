"""Calibrate the simulator on this machine: micro-benchmarks -> a "this machine" preset.

:func:`calibrate` times, in fresh task processes (see
:mod:`distsim.real.microbench`):

* the single-replica training step against the per-replica batch; a straight
  line through it gives the host cost of a step (intercept) and the
  **seconds per example** (slope) of the calibration workload;
* the step of a tiny batch (4 examples per replica) on 1, 2, ..., N logical
  devices: what each extra replica adds is the **per-replica dispatch**
  (less the all-reduce, priced by the fitted link); the intercept less one
  dispatch and the optimizer update is the **per-step fixed overhead**;
* the same under CentralStorage, which keeps one copy of the variables: what
  a replica adds there falls short of Mirrored's by the dispatch that serves
  the replica's own copy of the variables (**replica_variable_s**);
* the input pipeline's seconds per example, a large matmul's FLOP rate and a
  memory-copy rate;
* the **all-reduce time against message size** across 2..N logical devices
  (one process) and across 2 and 3 worker processes (MultiWorkerMirrored on
  localhost: the process counts the comparison runs);
* a **parameter-server update with nothing to compute** (one worker, 4
  examples, the in-process cluster): what it takes beyond the model's
  compute, the optimizer's apply and the link's latency and bytes is the PS's
  **per-request cost** (half per pull, half per push).

It fits the simulator's own parameters to those numbers: the device's
``step_overhead_s`` and ``efficiency``; each link's latency and bandwidth by
least squares on the simulator's alpha-beta cost of the very schedule that
runs (:func:`distsim.mechanics.collectives.cost_model`: ``T(n) = S alpha + F n / B``).
It then writes a device preset ``this_machine``, link presets
``this_machine_memory`` (between logical devices) and ``this_machine_grpc``
(between processes, with the PS request cost), and a workload preset
``<workload>@this_machine`` with the measured input cost, through
:func:`distsim.scenario.write_user_preset`.

The machine is shared and noisy, so every measurement is repeated
(``repeats`` rounds, each a fresh process) and medians are taken. Nothing here
imports TensorFlow.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import shlex
import shutil
import signal
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from distsim.mechanics.collectives import cost_model
from distsim.real.env import cpu_model
from distsim.real.launcher import SERVER_STARTED, LaunchError, Task, launch, python_module_argv
from distsim.real.plan import WORKLOAD_MODELS, RunPlan, _model_kwargs
from distsim.real.protocol import TINY_BATCH
from distsim.real.experiment import run as run_experiment
from distsim.real.tfconfig import build_tf_configs, localhost_cluster, task_name
from distsim.scenario import Training, load_preset, write_user_preset
from distsim.validation import InputError, Integer, Number, OneOf, Optional

#: Message sizes (bytes) of the all-reduce benchmarks: 4 KiB .. 4 MiB.
DEFAULT_SIZES_BYTES: tuple[int, ...] = (4096, 65536, 262144, 1048576, 4194304)

#: Worker-process counts of the cross-process all-reduce benchmark (those bench_real runs).
DEFAULT_WORKERS: tuple[int, ...] = (2, 3)

#: Per-worker batch and updates of the parameter-server benchmark.
PS_BATCH, PS_UPDATES = 4, 60

#: Bytes the SGD update moves per parameter (the simulator's default for plain SGD).
OPTIMIZER_BYTES_PER_PARAM = Training().optimizer_bytes_per_param

#: Training steps per point of the step-time curves: enough that timing noise
#: on a shared machine stays small against the point, since every predicted
#: ratio divides by the one-device point (the measurement behind the number:
#: data/measurements/README.md, "Notes moved from docstrings").
CURVE_STEPS = 100

#: Names of the presets :func:`write_presets` writes.
DEVICE_PRESET = "this_machine"
INTRA_LINK_PRESET = "this_machine_memory"
INTER_LINK_PRESET = "this_machine_grpc"


#: Workloads the micro-benchmarks can run (they train the workload's MNIST model).
_WORKLOAD = OneOf(tuple(sorted(WORKLOAD_MODELS)))


def workload_preset_name(workload: str) -> str:
    """``"<workload>@this_machine"``: the calibrated variant of a workload preset."""
    return f"{workload}@{DEVICE_PRESET}"


@dataclass
class LinkFit:
    """A link's alpha-beta parameters fitted to measured all-reduce times.

    Attributes:
        latency_s: per-step latency alpha, seconds.
        bandwidth_Bps: bandwidth B, bytes/s.
        algorithm: the simulator's schedule the fit used.
        ranks: rank count of every measured point.
        message_bytes: message size of every point.
        time_s: measured (median) all-reduce seconds of every point.
    """

    latency_s: float
    bandwidth_Bps: float
    algorithm: str
    ranks: list[int]
    message_bytes: list[int]
    time_s: list[float]

    def predicted_s(self) -> np.ndarray:
        """The fitted model's time for every measured point."""
        return np.array([
            _link_cost(self.algorithm, p, n, self.latency_s, self.bandwidth_Bps, self.algorithm == "ring")
            for p, n in zip(self.ranks, self.message_bytes)
        ])


@dataclass
class Calibration:
    """Everything :func:`calibrate` measured and fitted (seconds, bytes, FLOP/s).

    Attributes:
        workload: the calibration workload preset.
        batches: per-replica batches of the step-time curve.
        step_time_s: median single-replica step time per batch.
        step_overhead_s: fitted intercept less one replica's dispatch and
            the optimizer update the simulator adds on its own: the fixed
            cost of every step.
        replica_dispatch_s: host seconds each replica adds to a step.
        replica_variable_s: the part of it that serves the replica's own
            copy of the variables (Mirrored's slope less CentralStorage's).
        replica_counts: logical-device counts of the tiny-batch steps.
        replica_step_time_s: median tiny-batch Mirrored step time per count.
        central_step_time_s: the same under CentralStorage.
        compute_s_per_example: fitted slope, on the whole machine (all cores).
        input_s_per_sample: input pipeline seconds per example.
        matmul_flops_per_s: large-matmul rate on all cores.
        memory_Bps: memory-copy rate.
        physical_cores: cores the logical devices share.
        intra: fit of the all-reduce between logical devices (one process).
        inter: fit of the all-reduce between worker processes.
        ps_update_s: median interval between the updates of the one-worker
            parameter-server benchmark.
        ps_request_s: the PS's per-request cost derived from it.
        rounds: measurement rounds the medians are over.
        meta: provenance (device, CPU, TF version, date, command).
    """

    workload: str
    batches: list[int]
    step_time_s: list[float]
    step_overhead_s: float
    replica_dispatch_s: float
    replica_variable_s: float
    replica_counts: list[int]
    replica_step_time_s: list[float]
    central_step_time_s: list[float]
    compute_s_per_example: float
    input_s_per_sample: float
    matmul_flops_per_s: float
    memory_Bps: float
    physical_cores: int
    intra: LinkFit
    inter: LinkFit
    ps_update_s: float
    ps_request_s: float
    rounds: int
    meta: dict[str, str] = field(default_factory=dict)

    @property
    def workload_flops_per_s(self) -> float:
        """The calibration workload's training FLOP rate on all cores (from the slope)."""
        values, _ = load_preset("workload", self.workload)
        return values["flops_per_sample"] / self.compute_s_per_example

    @property
    def peak_flops_per_core(self) -> float:
        """The larger of the matmul and the workload rate, per core.

        Normally the matmul rate; on a loaded machine the matmul benchmark
        can come out slower than the workload, and a peak below the achieved
        rate would need an efficiency above 1.
        """
        return max(self.matmul_flops_per_s, self.workload_flops_per_s) / self.physical_cores

    @property
    def efficiency(self) -> float:
        """Workload rate / peak, so that the simulator's seconds per example,
        ``flops_per_sample / (peak_flops x efficiency) / physical_cores`` for
        one device on every core, equals the measured slope exactly."""
        return self.workload_flops_per_s / (self.peak_flops_per_core * self.physical_cores)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["peak_flops_per_core"] = self.peak_flops_per_core
        d["efficiency"] = self.efficiency
        return d


#: What every "the measurements cannot be fitted" error advises.
_CALIBRATE_AGAIN = ("the machine was too busy, or the batches or message sizes too close together: "
                    "calibrate again on a quieter machine, or with more repeats (--repeats)")


def _link_cost(algorithm: str, ranks: int, message_bytes: float, latency_s: float, bandwidth_Bps: float,
               between_processes: bool, **options) -> float:
    """The simulator's all-reduce time on one link class (``options``: the algorithm's own)."""
    if between_processes:  # one rank per worker: every step crosses the inter-worker link
        model = cost_model(algorithm, ranks, ranks_per_node=1, **options)
        return float(model.time_s(message_bytes, 0.0, np.inf, latency_s, bandwidth_Bps))
    model = cost_model(algorithm, ranks, ranks_per_node=ranks, **options)
    return float(model.time_s(message_bytes, latency_s, bandwidth_Bps))


def fit_link(algorithm: str, ranks: Sequence[int], message_bytes: Sequence[int], time_s: Sequence[float],
             *, between_processes: bool, path: str = "time_s") -> LinkFit:
    """Least-squares ``(alpha, 1/B)`` of ``T = S alpha + F n / B`` for the simulator's schedule.

    ``S`` (latency terms) and ``F`` (bytes on the busiest port per message
    byte) come from the simulator's cost model of ``algorithm`` on each point's
    rank count, so the fitted link reproduces these measurements when the
    simulator prices the same collective.

    Raises:
        InputError: at ``path``, when the times do not grow with the message
            size (no bandwidth can be read from them).
    """
    rows = []
    for p, n in zip(ranks, message_bytes):
        s = _link_cost(algorithm, p, 0.0, 1.0, np.inf, between_processes)
        f = _link_cost(algorithm, p, 1.0, 0.0, 1.0, between_processes)
        rows.append([s, f * n])
    a = np.asarray(rows)
    t = np.asarray(time_s, dtype=float)
    # Plain least squares: on a busy machine the small messages' times are
    # mostly timing noise (tens of microseconds either way), so the large
    # messages set the bandwidth and the intercept the latency.
    (alpha, inv_b), *_ = np.linalg.lstsq(a, t, rcond=None)
    if not inv_b > 0:
        raise InputError(path, [round(float(x), 6) for x in t],
                         f"all-reduce times that grow with the message size (over sizes {sorted(set(message_bytes))} "
                         f"the fitted seconds per byte is {float(inv_b):.3g}); {_CALIBRATE_AGAIN}")
    alpha = max(float(alpha), 0.0)
    return LinkFit(alpha, 1.0 / float(inv_b), algorithm, list(map(int, ranks)), list(map(int, message_bytes)),
                   [float(x) for x in t])


def _median_points(rounds_by_ranks: dict[int, list], sizes: list[int]) -> tuple[list, list, list]:
    """(ranks, message bytes, median seconds over rounds) of every measured
    point, from each rank count's per-round lists of all-reduce times per size."""
    ranks, message_bytes, times = [], [], []
    for n, rounds in rounds_by_ranks.items():
        ranks += [n] * len(sizes)
        message_bytes += sizes
        times += list(np.median(rounds, axis=0))
    return ranks, message_bytes, times


def _dispatch_slope(counts: Sequence[int], step_s: Sequence[float], grad_bytes: float, intra: LinkFit,
                    **options) -> float:
    """Seconds each replica adds to a tiny-batch step (>= 0), less the
    gradient's all-reduce (the simulator's reduce_to_one with ``options``,
    priced by the fitted link): the slope of a line through every count, which
    one noisy step time moves less than a two-point difference."""
    if len(counts) < 2:
        return 0.0
    reduce_s = [_link_cost("reduce_to_one", n, grad_bytes, intra.latency_s, intra.bandwidth_Bps, False, **options)
                if n > 1 else 0.0 for n in counts]
    return max(float(np.polyfit(counts, np.asarray(step_s) - np.asarray(reduce_s), 1)[0]), 0.0)


def fit(local_rounds: Sequence[dict], collective_rounds: Sequence[dict], ps_rounds: Sequence[float], *,
        workload: str, physical_cores: int | None = None) -> Calibration:
    """A :class:`Calibration` from raw micro-benchmark rounds (medians over rounds).

    ``collective_rounds`` may mix worker counts (each round says its own);
    ``ps_rounds`` are the one-worker parameter-server update intervals.
    """
    for name, rounds in (("local_rounds", local_rounds), ("collective_rounds", collective_rounds),
                         ("ps_rounds", ps_rounds)):
        if not rounds:
            raise InputError(name, rounds, "at least one round of measurements")
    _WORKLOAD("workload", workload)
    Optional(Integer(1), "as many as the machine reports")("physical_cores", physical_cores)
    first = local_rounds[0]
    batches = list(first["batches"])
    steps = np.median([r["step_time_s"] for r in local_rounds], axis=0)
    slope, intercept = np.polyfit(np.asarray(batches, float), steps, 1)
    if not slope > 0:
        # Noise larger than the compute the batches add; every fitted cost below would inherit it.
        raise InputError("local_rounds.step_time_s", [round(float(t), 6) for t in steps],
                         f"step times that grow with the batch (over batches {batches} the fitted slope is "
                         f"{float(slope):.3g} s/example); {_CALIBRATE_AGAIN}")
    memory_Bps = float(np.median([r["memory_Bps"] for r in local_rounds]))
    values, _ = load_preset("workload", workload)
    grad_bytes = values["num_params"] * values["bytes_per_param"]
    sizes = list(first["sizes_bytes"])
    intra_times = {int(n): [r["allreduce_s"][n] for r in local_rounds] for n in first["allreduce_s"]}
    intra = fit_link("reduce_to_one", *_median_points(intra_times, sizes), between_processes=False,
                     path="local_rounds.allreduce_s")
    inter_times = {w: [r["allreduce_s"] for r in collective_rounds if r["workers"] == w]
                   for w in sorted({r["workers"] for r in collective_rounds})}
    inter = fit_link("ring", *_median_points(inter_times, sizes), between_processes=True,
                     path="collective_rounds.allreduce_s")
    if inter.bandwidth_Bps > memory_Bps:
        # Every byte between two processes is copied through memory at least
        # once (into the socket and out of it), so no real link beats it.
        raise InputError("collective_rounds.allreduce_s", [round(x, 6) for x in inter.time_s],
                         f"all-reduce times that give a bandwidth at most this machine's memory bandwidth "
                         f"({memory_Bps:.3g} B/s), not {inter.bandwidth_Bps:.3g} B/s; {_CALIBRATE_AGAIN}")
    # Each replica beyond the first adds its dispatch and makes the gradient's
    # all-reduce one rank wider; the fitted link prices the latter.
    counts = list(first["replica_counts"])
    tiny = np.median([r["replica_step_time_s"] for r in local_rounds], axis=0)
    central = np.median([r["central_step_time_s"] for r in local_rounds], axis=0)
    # On the shared cores each replica's dispatch and compute take turns
    # (distsim.engines.steady), so a replica adds both: the slope less the
    # tiny batch's compute is the dispatch.
    tiny_compute = TINY_BATCH * float(slope)
    dispatch = max(_dispatch_slope(counts, tiny, grad_bytes, intra) - tiny_compute, 0.0)
    # CentralStorage pays the variables' share of the dispatch once per step,
    # so its slope (>= 0) is the rest; the share is kept within [0, dispatch].
    central_dispatch = max(_dispatch_slope(counts, central, grad_bytes, intra, extra_root=True) - tiny_compute, 0.0)
    variable = max(dispatch - central_dispatch, 0.0)
    # The intercept holds every per-step cost that does not grow with the
    # batch: the fixed overhead, one replica's dispatch and the optimizer
    # update, which the simulator adds separately (parameters x bytes /
    # memory bandwidth).
    update_s = values["num_params"] * OPTIMIZER_BYTES_PER_PARAM / memory_Bps
    overhead = max(float(intercept) - update_s - dispatch, 0.0)
    # One PS worker's update = pull + compute + push + the PS applying the
    # gradient (the simulator prices that apply itself, like the update above:
    # distsim.engines.costs.ps_apply_s); each transfer is the link's
    # latency and bytes plus the PS's request cost.
    ps_update = float(np.median(ps_rounds))
    compute = overhead + dispatch + PS_BATCH * float(slope)
    link = inter.latency_s + grad_bytes / inter.bandwidth_Bps
    request = max((ps_update - compute - update_s) / 2 - link, 0.0)
    return Calibration(
        workload=workload,
        batches=batches,
        step_time_s=[float(x) for x in steps],
        step_overhead_s=overhead,
        replica_dispatch_s=dispatch,
        replica_variable_s=variable,
        replica_counts=counts,
        replica_step_time_s=[float(x) for x in tiny],
        central_step_time_s=[float(x) for x in central],
        compute_s_per_example=float(slope),
        input_s_per_sample=float(np.median([r["input_s_per_sample"] for r in local_rounds])),
        matmul_flops_per_s=float(np.median([r["matmul_flops_per_s"] for r in local_rounds])),
        memory_Bps=memory_Bps,
        physical_cores=physical_cores or os.cpu_count() or 1,
        intra=intra,
        inter=inter,
        ps_update_s=ps_update,
        ps_request_s=request,
        rounds=len(local_rounds),
        meta={
            "device": first["device"],
            "cpu_model": first["cpu_model"],
            "tf_version": first["tf_version"],
            "intra_cross_device_op": first["cross_device_op"],
            "inter_cross_device_op": collective_rounds[0]["cross_device_op"],
            "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "command": shlex.join([sys.executable, *sys.argv]),
        },
    )


def rounds_from_calibration(stored: dict) -> tuple[list[dict], list[dict], list[float]]:
    """``(local_rounds, collective_rounds, ps_rounds)`` of one round each, rebuilt
    from a stored :meth:`Calibration.to_dict`: its per-point medians, which
    :func:`fit` (a median per point, then the fits) turns back into the same
    calibration. A calibration stored before the CentralStorage curve was
    measured gets Mirrored's curve in its place, which fits
    ``replica_variable_s = 0`` (the model of that time)."""
    meta = stored["meta"]
    intra, inter = stored["intra"], stored["inter"]
    sizes = list(dict.fromkeys(intra["message_bytes"]))

    def by_ranks(link: dict) -> dict[int, list[float]]:
        times: dict[int, list[float]] = {}
        for n, t in zip(link["ranks"], link["time_s"]):
            times.setdefault(int(n), []).append(float(t))
        return times

    local = {
        "batches": stored["batches"], "step_time_s": stored["step_time_s"], "memory_Bps": stored["memory_Bps"],
        "sizes_bytes": sizes, "allreduce_s": by_ranks(intra), "replica_counts": stored["replica_counts"],
        "replica_step_time_s": stored["replica_step_time_s"],
        "central_step_time_s": stored.get("central_step_time_s", stored["replica_step_time_s"]),
        "input_s_per_sample": stored["input_s_per_sample"], "matmul_flops_per_s": stored["matmul_flops_per_s"],
        "device": meta["device"], "cpu_model": meta["cpu_model"], "tf_version": meta["tf_version"],
        "cross_device_op": meta["intra_cross_device_op"],
    }
    collective = [{"workers": w, "allreduce_s": t, "cross_device_op": meta["inter_cross_device_op"]}
                  for w, t in by_ranks(inter).items()]
    return [local], collective, [stored["ps_update_s"]]


def restrict_rounds(local_rounds: Sequence[dict], collective_rounds: Sequence[dict], *, devices: Sequence[int],
                    workers: Sequence[int]) -> tuple[list[dict], list[dict]]:
    """The rounds with only the points of ``devices`` logical devices (the
    all-reduces among exactly that many, the tiny-batch steps on up to the
    largest) and ``workers`` worker processes, so that :func:`fit` learns
    nothing from the counts a held-out configuration runs.

    Raises:
        InputError: at ``devices`` or ``workers`` when a count was not measured.
    """
    measured_devices = {int(n) for n in local_rounds[0]["allreduce_s"]}
    measured_workers = {int(r["workers"]) for r in collective_rounds}
    for name, wanted, have in (("devices", devices, measured_devices), ("workers", workers, measured_workers)):
        if not wanted or not set(wanted) <= have:
            raise InputError(name, list(wanted), f"a non-empty subset of the measured counts {sorted(have)}")
    top = max(devices)
    local = []
    for r in local_rounds:
        keep = [i for i, n in enumerate(r["replica_counts"]) if n <= top]
        local.append(r | {
            "allreduce_s": {k: v for k, v in r["allreduce_s"].items() if int(k) in devices},
            "replica_counts": [r["replica_counts"][i] for i in keep],
            "replica_step_time_s": [r["replica_step_time_s"][i] for i in keep],
            "central_step_time_s": [r["central_step_time_s"][i] for i in keep],
        })
    return local, [r for r in collective_rounds if int(r["workers"]) in workers]


# ---- running the micro-benchmarks -------------------------------------------------------------------
def _spec_task(name: str, spec_path: Path, out: Path, tf_config: dict | None = None) -> Task:
    argv = ["microbench", "--spec", str(spec_path), "--out", str(out)]
    if tf_config is not None:
        argv += ["--tf-config", json.dumps(tf_config, separators=(",", ":"))]
    return Task(name, python_module_argv("distsim.real", *argv), ready_pattern=SERVER_STARTED if tf_config else None,
                stop_signal=signal.SIGKILL)


def _launch_spec(spec: dict, workdir: Path, tf_configs: Sequence[dict | None], timeout_s: float) -> dict:
    workdir.mkdir(parents=True, exist_ok=True)
    spec_path = workdir / "spec.json"
    spec_path.write_text(json.dumps(spec))
    tasks = [
        _spec_task(task_name(c) if c else "local", spec_path, workdir / f"{task_name(c) if c else 'local'}.json", c)
        for c in tf_configs
    ]
    outcome = launch(tasks, workdir, timeout_s=timeout_s)
    if not outcome.ok:
        raise LaunchError(outcome)
    return json.loads((workdir / f"{tasks[0].name}.json").read_text())


def calibration_plan(workload: str) -> RunPlan:
    """The single-replica plan whose model and data the micro-benchmarks use."""
    model = WORKLOAD_MODELS[_WORKLOAD("workload", workload)]
    values, _ = load_preset("workload", workload)
    return RunPlan("one_device", model=model, model_kwargs=_model_kwargs(model, values["num_params"]), device="cpu")


def measure_local(workload: str, workdir: Path, *, batches=(16, 32, 64, 128, 256), devices=(2, 4),
                  sizes_bytes=None, steps: int = CURVE_STEPS, timeout_s: float = 600) -> dict:
    """One round of the in-process micro-benchmarks: the ``single`` and the
    ``local`` part, each in a fresh process; one dict with both."""
    plan = calibration_plan(workload).to_dict()
    single = {"part": "single", "plan": plan, "batches": list(batches), "steps": steps}
    local = {"part": "local", "plan": plan, "devices": list(devices),
             "sizes_bytes": list(sizes_bytes or DEFAULT_SIZES_BYTES), "steps": steps}
    return _launch_spec(single, workdir / "single", [None], timeout_s) | _launch_spec(
        local, workdir / "local", [None], timeout_s)


def measure_collective(workload: str, workdir: Path, *, workers: int = 2, sizes_bytes=None,
                       timeout_s: float = 600) -> dict:
    """One round of the all-reduce benchmark across ``workers`` localhost worker processes."""
    plan = calibration_plan(workload).with_(strategy="multi_worker_mirrored", num_workers=workers)
    spec = {"part": "collective", "plan": plan.to_dict(), "sizes_bytes": list(sizes_bytes or DEFAULT_SIZES_BYTES)}
    return _launch_spec(spec, workdir, build_tf_configs(localhost_cluster(workers), localhost_only=True), timeout_s)


def measure_ps(workload: str, *, timeout_s: float = 600) -> float:
    """One round of the parameter-server benchmark: seconds between the
    updates of one worker on the in-process cluster with a 4-example batch."""
    plan = calibration_plan(workload).with_(strategy="parameter_server", num_workers=1, num_ps=1,
                                            per_replica_batch=PS_BATCH, steps_per_epoch=PS_UPDATES,
                                            ps_cluster="in_process")
    return run_experiment(plan, progress=False, timeout_s=timeout_s).summary.step_time_s


def _meminfo_bytes() -> float:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return float(line.split()[1]) * 1024
    except OSError:
        pass
    return 16e9


def _counts(path: str, values: Sequence[int], rule: Integer) -> list[int]:
    """``values`` as a non-empty list, each checked by ``rule`` (errors at ``path[i]``)."""
    if isinstance(values, (str, bytes, dict)) or not np.iterable(values) or not len(values := list(values)):
        raise InputError(path, values, f"a non-empty list, each {rule.allowed()}")
    return [rule(f"{path}[{i}]", v) for i, v in enumerate(values)]


def write_presets(cal: Calibration, directory: str | Path | None = None) -> list[Path]:
    """Write the device, both links and the workload as user presets (see module docs)."""
    how = f"distsim.real.calibrate() on {cal.meta.get('cpu_model', cpu_model())}, {cal.meta.get('date', '')}"
    device = {
        "kind": "cpu",
        "peak_flops": cal.peak_flops_per_core,
        "efficiency": cal.efficiency,
        "memory_bandwidth_Bps": cal.memory_Bps,
        "memory_bytes": _meminfo_bytes(),
        "step_overhead_s": cal.step_overhead_s,
        "replica_dispatch_s": cal.replica_dispatch_s,
        "replica_variable_s": cal.replica_variable_s,
    }
    device_sources = {
        "peak_flops": f"measured: float32 1024^3 matmul rate / {cal.physical_cores} cores ({how})",
        "efficiency": f"measured: {cal.workload} training FLOP rate / matmul rate; slope of step time vs batch "
                      f"({cal.batches}) = {cal.compute_s_per_example:.3g} s/example on all cores ({how})",
        "memory_bandwidth_Bps": f"measured: in-place scale of a 64 MiB float32 variable ({how})",
        "memory_bytes": "this machine's MemTotal (/proc/meminfo)",
        "step_overhead_s": f"measured: intercept of single-replica step time vs batch, less one replica's "
                           f"dispatch and the update ({how})",
        "replica_dispatch_s": f"measured: slope of the step time at {TINY_BATCH} examples per replica against the "
                              f"device count ({cal.replica_counts}), less the all-reduce and those examples' "
                              f"compute ({how})",
        "replica_variable_s": f"measured: that slope less the same slope under CentralStorage, which keeps one "
                              f"copy of the variables ({how})",
    }
    paths = [write_user_preset("device", DEVICE_PRESET, device, device_sources, directory)]
    for name, link, what in ((INTRA_LINK_PRESET, cal.intra, "logical devices in one process"),
                             (INTER_LINK_PRESET, cal.inter, "worker processes over localhost gRPC")):
        src = (f"fitted: all-reduce between {what}, {link.algorithm} schedule, "
               f"{len(link.time_s)} sizes x ranks {sorted(set(link.ranks))} ({how})")
        values = {"bandwidth_Bps": link.bandwidth_Bps, "latency_s": link.latency_s}
        sources = {"bandwidth_Bps": src, "latency_s": src}
        if link is cal.inter:
            values["request_s"] = cal.ps_request_s
            sources["request_s"] = (f"measured: one-worker parameter-server update of {PS_BATCH} examples "
                                    f"({cal.ps_update_s * 1e3:.2f} ms) less compute and two transfers, halved ({how})")
        paths.append(write_user_preset("link", name, values, sources, directory))
    values, sources = load_preset("workload", cal.workload)
    values["input_s_per_sample"] = cal.input_s_per_sample
    sources["input_s_per_sample"] = f"measured: the real runs' tf.data pipeline alone ({how})"
    paths.append(write_user_preset("workload", workload_preset_name(cal.workload), values, sources, directory))
    return paths


def calibrate(
    *,
    workload: str = "mnist_mlp",
    repeats: int = 3,
    workers: Sequence[int] = DEFAULT_WORKERS,
    batches: Sequence[int] = (16, 32, 64, 128, 256),
    devices: Sequence[int] = (2, 4),
    sizes_bytes: Sequence[int] = DEFAULT_SIZES_BYTES,
    steps: int = CURVE_STEPS,
    out: str | Path | None = None,
    write: bool = True,
    preset_dir: str | Path | None = None,
    progress: bool = False,
    timeout_s: float = 600.0,
) -> Calibration:
    """Run the micro-benchmarks ``repeats`` times, fit, and (by default) write the presets.

    Args:
        workload: the MNIST workload preset to calibrate with.
        repeats: rounds; each round runs the local, the collective and the
            parameter-server part in fresh processes; medians over rounds
            are fitted.
        workers: worker-process counts of the collective part.
        batches: per-replica batches of the step-time curve.
        devices: logical-device counts of the in-process all-reduce.
        sizes_bytes: all-reduce message sizes.
        steps: training steps per batch size.
        out: also write the calibration (raw and fitted) as JSON here.
        write: write the presets (see :func:`write_presets`).
        preset_dir: where to write them (default: the user preset dir).
        progress: show a progress bar over the rounds.
        timeout_s: per micro-benchmark launch.

    Raises:
        InputError: an argument it cannot use, before anything runs.
    """
    _WORKLOAD("workload", workload)
    repeats = Integer(1)("repeats", repeats)
    workers = _counts("workers", workers, Integer(2, note="a collective across processes needs two"))
    batches = _counts("batches", batches, Integer(1))
    devices = _counts("devices", devices, Integer(2, note="an all-reduce needs two devices"))
    sizes_bytes = _counts("sizes_bytes", sizes_bytes, Integer(1, note="bytes"))
    steps = Integer(1)("steps", steps)
    Number(0, low_open=True, unit="seconds")("timeout_s", timeout_s)
    workdir = Path(tempfile.mkdtemp(prefix="distsim-calibrate-"))
    rounds = range(repeats)
    if progress:
        from tqdm.auto import tqdm

        rounds = tqdm(rounds, desc="calibrate", unit="round")
    try:
        local, collective, ps = [], [], []
        for i in rounds:
            local.append(measure_local(workload, workdir / f"local{i}", batches=batches, devices=devices,
                                       sizes_bytes=sizes_bytes, steps=steps, timeout_s=timeout_s))
            for w in workers:
                collective.append(measure_collective(workload, workdir / f"collective{i}-{w}", workers=w,
                                                     sizes_bytes=sizes_bytes, timeout_s=timeout_s))
            ps.append(measure_ps(workload, timeout_s=timeout_s))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    cal = fit(local, collective, ps, workload=workload)
    if write:
        cal.meta["presets"] = json.dumps([str(p) for p in write_presets(cal, preset_dir)])
    if out is not None:
        Path(out).write_text(json.dumps({"calibration": cal.to_dict(), "local_rounds": local,
                                         "collective_rounds": collective, "ps_rounds": ps}, indent=1))
    return cal
