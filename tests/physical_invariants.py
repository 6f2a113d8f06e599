"""Physical invariants of one prediction, as checks that return their violations.

Each check takes a scenario (and its prediction) and returns a list of
:class:`Violation`; ``tests/test_invariants.py`` asserts the list is empty,
``benchmarks/bench_invariants.py`` counts them. The invariants follow from
what a step *is*, not from the engine's code:

* a replica cannot do more than one device's work: efficiency <= 1, strong
  speedup <= N replicas (per-replica batches never change a device's FLOP
  rate, and each worker brings at most its own host), but for one stated
  mechanism each: asynchronous workers whose PS has several shards leave part of
  the update to the shards' hosts, and each worker but the first draws its own
  compute noise, which the baseline does not share (:func:`async_bound`); backup
  workers drop the slowest replicas of every step, which one device cannot
  (:func:`backup_bound`);
* with ``b`` backup workers and deterministic compute, a step keeps ``K =
  N - b`` of ``N`` replicas' gradients, so efficiency <= ``K / N`` (the
  deterministic case of :func:`backup_bound`, tight when the global batch
  splits evenly and nothing is sent);
* one replica that communicates with nobody runs exactly the baseline, so
  its efficiency is 1 under any noise (the baseline draws from the same
  compute distribution);
* more bandwidth never slows a step, more latency never speeds it up, and
  more compute per example never speeds it up (the step is a max-plus
  composition of costs, monotone in each of them), with one stated
  exception: two or more asynchronous workers' FIFO queues at the PS can
  lock into a slower rhythm with a faster link, a shorter latency or less
  compute, never slower than that scenario's lockstep bound
  (``distsim/engines/asyncps.py``; :func:`distsim.rhythm_range_s`); and
  Horovod's fusion buffers follow where the tensors' ready times fall between
  cycle ticks, so more compute can merge two buffers into one and save a
  collective's fixed cost, never more than :func:`fusion_slack_s`;
* throughput x epoch time is the epoch's examples, to within the one
  partial global batch an epoch may end on; with several workers' own
  streams (FILE, OFF) its last batches may spread over several partial
  steps, up to a bound derived from the streams (:func:`epoch_slots`);
* every summary number is finite and positive (comm_fraction in [0, 1]);
* a :func:`distsim.sweep` row is :func:`distsim.predict` for the same
  scenario when compute is deterministic (sweep evaluates the mean compute
  time); for asynchronous training sweep is documented as an upper bound on
  throughput (``distsim/engines/sweeps.py`` docstring), so it is held to that,
  except where one in-process server serves every stage in turn
  (:func:`computes_at_ps`): there nothing queues apart from the turns, and
  the closed form is held to equality.
"""

from __future__ import annotations

import collections
import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

import distsim

#: Relative slack of every comparison: a few ulps of float64 accumulated over a
#: few hundred additions (steps x collectives); a genuine effect is far larger.
RTOL = 1e-9

#: Strategies whose single replica sends nothing anywhere. A parameter server
#: (strategy or algorithm) keeps the variables on another task. central_storage
#: is included: with one compute device TensorFlow puts the variables on it
#: (tensorflow/python/distribute/parameter_server_strategy.py, lines 303-307 in TF 2.21:
#: "If there is only one GPU, put everything on that GPU").
ALONE = ("default", "one_device", "mirrored", "multi_worker_mirrored", "central_storage", "tpu")

INVARIANTS: tuple[str, ...] = (
    "efficiency<=1",
    "strong_speedup<=N",
    "one_replica_efficiency=1",
    "backup_efficiency<=K/N",
    "throughput*epoch=examples",
    "finite_positive",
    "step_time_vs_inter_bandwidth",
    "step_time_vs_intra_bandwidth",
    "step_time_vs_inter_latency",
    "step_time_vs_intra_latency",
    "step_time_vs_compute",
    "sweep=predict",
)


#: How often a stated mechanism let a step move the wrong way, by mechanism (counted by :func:`check_monotone`,
#: reported by ``benchmarks/bench_invariants.py``): evidence that the draws reach it.
EXCUSED: collections.Counter = collections.Counter()


@dataclass(frozen=True)
class Violation:
    invariant: str
    detail: str


def uses_ps(scenario: distsim.Scenario) -> bool:
    s = scenario.strategy
    return s.name == "parameter_server" or s.algorithm == "parameter_server"


def is_async(scenario: distsim.Scenario) -> bool:
    return scenario.strategy.resolved_mode == "async"


def worker_streams(scenario: distsim.Scenario) -> list[int]:
    """Examples in each input stream: the dataset under DATA (and for
    asynchronous workers, which take batches from one pass over the data);
    all of it for each worker under OFF; each worker's files under FILE."""
    examples, policy, workers = scenario.workload.num_examples, scenario.training.shard_policy, scenario.cluster.num_workers
    if is_async(scenario) or workers == 1 or policy == "DATA":
        return [examples]
    if policy == "OFF":
        return [examples] * workers
    # FILE: num_files files of sizes differing by at most one, worker w reading files w, w + W, ...
    files, extra = divmod(examples, scenario.training.num_files)
    sizes = [files + (i < extra) for i in range(scenario.training.num_files)]
    return [sum(sizes[w::workers]) for w in range(workers)]


def epoch_examples(scenario: distsim.Scenario) -> float:
    """Examples one epoch trains on: the workers' streams (:func:`worker_streams`),
    each less its final partial global batch with ``drop_remainder``;
    with ``b`` backup workers of ``N`` replicas a step
    applies the gradients of only ``N - b`` replicas, each one replica's
    share of the step's examples (TensorFlow's ``SyncReplicasOptimizer``
    averages ``replicas_to_aggregate`` gradients and drops the rest)."""
    batch, drop = scenario.training.global_batch, scenario.training.drop_remainder
    # Each stream is batched by the global batch (its final partial batch dropped with drop_remainder),
    # then split among the replicas.
    epoch = sum(n - n % batch if drop else n for n in worker_streams(scenario))
    n = scenario.num_replicas
    return epoch * (n - scenario.training.backup_workers) / n


def epoch_slots(scenario: distsim.Scenario) -> float:
    """The most ``throughput x epoch_time`` may reach: the epoch's examples
    plus one global batch (the final partial step), or, with several
    workers' own streams (FILE, OFF), their steps' room. Derivation: a
    worker batches its stream of ``L`` examples by the global batch ``B``
    into ``ceil(L / B)`` batches and re-cuts each into ``W x R`` pieces, of
    which its ``R`` replicas take ``R`` a step (TensorFlow's cyclic
    ``batch_sizes_for_worker``), so one batch lasts ``W`` steps and the
    worker is done after ``W ceil(L / B)`` steps; the epoch is the longest
    worker's, and no step holds more than ``B`` examples, so a full step's
    throughput times the epoch's steps is at most ``B W max ceil(L / B)``.
    Its final steps may all be partial: the workers' last batches spread
    over up to ``W`` steps (and further where FILE streams differ)."""
    t, workers = scenario.training, scenario.cluster.num_workers
    examples = epoch_examples(scenario)
    streams = worker_streams(scenario)
    if len(streams) == 1:
        return examples + t.global_batch
    batches = max(n // t.global_batch if t.drop_remainder else -(-n // t.global_batch) for n in streams)
    n = scenario.num_replicas
    return max(examples + t.global_batch, t.global_batch * workers * batches * (n - t.backup_workers) / n)


def check_summary(scenario: distsim.Scenario, result: distsim.Result) -> list[Violation]:
    """Efficiency, strong speedup, one replica, throughput x epoch and finiteness of one prediction."""
    s, n = result.summary, scenario.num_replicas
    out = _finite_positive(scenario, result)
    if out:
        return out  # the comparisons below mean nothing on NaN
    allowed = max(async_bound(scenario, result), backup_bound(scenario, result))
    if s.efficiency > allowed * (1 + RTOL):
        out.append(Violation("efficiency<=1", f"efficiency={s.efficiency:.6g} with {n} replicas"))
    if s.strong_speedup > n * allowed * (1 + RTOL):
        out.append(Violation("strong_speedup<=N", f"strong_speedup={s.strong_speedup:.6g} > {n} replicas"))
    if deterministic_backup(scenario) and s.efficiency > backup_bound(scenario, result) * (1 + RTOL):
        out.append(Violation("backup_efficiency<=K/N", f"efficiency={s.efficiency:.9g} keeping "
                             f"{n - scenario.training.backup_workers} of {n} replicas (bound "
                             f"{backup_bound(scenario, result):.9g})"))
    if n == 1 and scenario.strategy.name in ALONE and not uses_ps(scenario) and abs(s.efficiency - 1) > RTOL:
        out.append(Violation("one_replica_efficiency=1", f"efficiency={s.efficiency!r} (strategy "
                             f"{scenario.strategy.name}, {scenario.training.compute_distribution} compute)"))
    product, examples = s.throughput_samples_per_s * s.epoch_time_s, epoch_examples(scenario)
    if not examples - scenario.training.global_batch - RTOL * examples <= product <= epoch_slots(scenario) * (1 + RTOL):
        out.append(Violation("throughput*epoch=examples", f"throughput x epoch_time = {product:.6g} examples, "
                             f"the epoch trains on {examples:,.6g} (global batch {scenario.training.global_batch:,})"))
    return out


def async_bound(scenario: distsim.Scenario, result: distsim.Result) -> float:
    """The most an asynchronous run's efficiency may reach: 1 for a
    deterministic one-shard PS, more by two stated mechanisms.

    * Sharded apply (``ps_apply_s`` in ``distsim/engines/costs.py``): the
      ``k > 1`` shards apply their shares of the update on their own hosts at
      once, so a worker's cycle may be shorter than one device's step by up
      to ``u' = update x (1 - 1 / k)``, ``update = num_params x
      optimizer_bytes_per_param / memory_bandwidth_Bps`` of the device.
    * Independent noise: worker 0 draws the baseline's compute factors
      (common random numbers, ``distsim.engines.timeline.one_device_run``),
      the other workers their own, so a luckier worker cycles faster than
      the baseline's device steps.

    Derivation. The run ends at the ``N x steps``-th update, so some worker
    ``w`` has applied ``steps`` of them by then, and its ``steps`` cycles
    take at least ``T'_w - steps x u'``, where ``T'_w`` is the one device's
    run with ``w``'s factors ``f_wk`` (each cycle holds that worker's input,
    host work and compute, and a push whose apply is the update less
    ``u'``). The run's time is a max-plus composition, 1-Lipschitz in each
    compute, so ``T'_w >= T_base - c D_w`` with ``D_w = sum_k (f_0k -
    f_wk)+`` and ``c`` a replica batch's mean compute, and ``c <= T_base /
    sum_k f_0k`` (the device computes one step after another). Efficiency
    is ``T_base / T_run`` (``N x steps`` updates of a replica batch against
    ``steps`` of them), hence, over the worst ``w``,
    ``1 / (1 - max_w D_w / sum_k f_0k - u' / step)`` (infinite where the
    denominator is not positive), ``step = T_base / steps`` the baseline's
    mean step.

    The factors are the asynchronous engine's documented streams
    (``distsim.engines.asyncps._ComputeTimes``): worker ``w``'s is
    ``numpy.random.Generator(PCG64(SeedSequence(seed).spawn(N)[w]))``
    (``standard_exponential``, or ``exp(sigma x standard_normal - sigma^2 / 2)``)."""
    if not is_async(scenario):
        return 1.0
    t, n = scenario.training, scenario.num_replicas
    s, w, d = result.summary, scenario.workload, scenario.cluster.device
    shards = scenario.strategy.num_ps or 1
    update = w.num_params * t.optimizer_bytes_per_param / d.memory_bandwidth_Bps * (1 - 1 / shards)
    replica_batch = -(-t.global_batch // n)
    step = replica_batch / (s.throughput_samples_per_s / s.speedup)
    f = np.array([_factors(np.random.Generator(np.random.PCG64(seq)), scenario, t.steps)
                  for seq in np.random.SeedSequence(t.seed).spawn(n)])
    luck = float(np.max(np.sum(np.maximum(f[0] - f, 0.0), axis=1))) / float(np.sum(f[0]))
    room = 1.0 - luck - update / step
    return 1.0 / room if room > 0 else math.inf


def _factors(rng: np.random.Generator, scenario: distsim.Scenario, size) -> np.ndarray:
    """Compute factors with mean 1 as ``distsim.mechanics.stragglers.factors`` documents them."""
    t = scenario.training
    if t.compute_distribution == "exponential":
        return rng.standard_exponential(size)
    if t.compute_distribution == "lognormal":
        return np.exp(t.compute_sigma * rng.standard_normal(size) - 0.5 * t.compute_sigma**2)
    return np.ones(size)


def backup_bound(scenario: distsim.Scenario, result: distsim.Result) -> float:
    """The most an efficiency may reach with ``b`` backup workers: 1, or the
    bound below when it is higher. The stated mechanism (``stragglers.py``):
    a step waits for the ``K = N - b`` fastest of ``N`` replicas and drops the
    others, while one device must finish every step it starts, so under noise
    ``N`` replicas can beat ``N`` devices' throughput.

    Derivation. One device's run (the baseline) draws its ``k``-th compute
    factor ``f_0k`` as replica 0's (common random numbers,
    ``distsim.engines.timeline.one_device_run``). Give that device instead
    the factor ``X_k``, the ``K``-th smallest of the step's replicas'
    ``(b_rk / b_0) f_rk`` (``b_rk`` replica ``r``'s examples in step ``k``,
    ``b_0`` a full step's largest replica batch): its compute is then the
    ``K``-th fastest replica's, every other cost of its step no more than the
    scenario's (its input, host work and update are one replica's), so its run
    takes ``T' <= T_run``. A run is a max-plus composition of its costs,
    so shortening one compute by ``d`` shortens it by at most ``d``:
    ``T_base <= T' + c sum_k (f_0k - X_k)+``, ``c = b_0`` examples' compute,
    and ``T' >= c sum_k X_k`` (the device computes one step after another).
    Efficiency is ``(K / N) (E_run / (N E_base)) (T_base / T_run)`` (the
    throughput counts ``K`` of ``N`` replicas' examples, ``E`` the examples
    of each run's steps), hence the bound
    ``(K / N) (E_run / (N E_base)) (1 + sum_k (f_0k - X_k)+ / sum_k X_k)``.

    The factors are the timeline's documented stream: ``numpy.random.default_rng(seed)``,
    ``N`` a step (``standard_exponential``, or ``exp(sigma x standard_normal
    - sigma^2 / 2)`` for the lognormal; ``distsim.mechanics.stragglers.factors``)."""
    t, n = scenario.training, scenario.num_replicas
    if not t.backup_workers or is_async(scenario):
        return 1.0
    keep, steps, g = n - t.backup_workers, t.steps, t.global_batch
    rng = np.random.default_rng(t.seed)
    f = np.array([_factors(rng, scenario, n) for _ in range(steps)])  # one call a step, as the timeline draws
    run = _step_examples(steps, g, int(result.summary.steps_per_epoch),
                         epoch_examples(scenario) * n / keep)
    b0 = -(-g // n)
    base_epoch = scenario.workload.num_examples
    base_steps = base_epoch // b0 if t.drop_remainder else -(-base_epoch // b0)
    base = _step_examples(steps, b0, base_steps, base_steps * b0 if t.drop_remainder else base_epoch)
    ratio = np.array([_replica_batches(int(e), n) for e in run]) / b0
    x = np.partition(ratio * f, keep - 1, axis=1)[:, keep - 1]
    gain = 1.0 + np.sum(np.maximum(f[:, 0] - x, 0.0)) / max(float(np.sum(x)), 1e-300)
    return keep / n * float(np.sum(run)) / (n * float(np.sum(base))) * gain


def deterministic_backup(scenario: distsim.Scenario) -> bool:
    """Synchronous backup workers under deterministic compute: :func:`backup_bound` is then ``K / N`` for even
    splits. Derivation: every factor is 1, so the device of :func:`backup_bound`'s argument
    keeps its own compute wherever the ``K``-th fastest replica holds a full replica batch
    (``X_k = 1``), and efficiency is at most ``(K / N) (E_run / (N E_base)) steps / sum_k X_k``:
    ``K / N`` when every replica holds ``b_0`` examples (then ``E_run = N E_base`` and every ``X_k = 1``).
    Uneven splits give a smaller ``K``-th replica batch, hence a bound the uneven ``X_k`` raise."""
    return bool(scenario.training.backup_workers) and not is_async(scenario) and \
        scenario.training.compute_distribution == "deterministic"


def _step_examples(steps: int, batch: int, per_epoch: int, epoch_total: float) -> np.ndarray:
    """Examples of each of ``steps`` steps cycling through epochs of ``per_epoch`` steps: full batches, then
    the rest of ``epoch_total`` (at least 1, at most a batch)."""
    last = min(max(epoch_total - (per_epoch - 1) * batch, 1.0), batch)
    return np.where(np.arange(steps) % per_epoch == per_epoch - 1, last, float(batch))


def _replica_batches(examples: int, replicas: int) -> list[int]:
    """tf.distribute's split of a global batch: chunks of ``ceil(examples / replicas)`` in replica order."""
    chunk = -(-examples // replicas)
    return [min(max(examples - r * chunk, 0), chunk) for r in range(replicas)]


def _finite_positive(scenario: distsim.Scenario, result: distsim.Result) -> list[Violation]:
    s = result.summary
    # median_step_time_s exists once the engine reports it beside the mean (issue 24, item 2).
    names = [n for n in ("step_time_s", "throughput_samples_per_s", "speedup", "efficiency", "strong_speedup",
                         "epoch_time_s", "memory_bytes_per_replica", "median_step_time_s") if hasattr(s, n)]
    bad = [f"{n}={getattr(s, n)!r}" for n in names if not _positive(getattr(s, n))]
    if s.comm_fraction is None or not 0 <= s.comm_fraction <= 1 + RTOL:
        bad.append(f"comm_fraction={s.comm_fraction!r} (outside [0, 1])")
    if not (isinstance(s.steps_per_epoch, (int, np.integer)) and s.steps_per_epoch >= 1):
        bad.append(f"steps_per_epoch={s.steps_per_epoch!r}")
    if is_async(scenario) and (s.mean_staleness is None or not math.isfinite(s.mean_staleness)
                               or s.mean_staleness < 0):
        bad.append(f"mean_staleness={s.mean_staleness!r}")
    steps = np.asarray(result.step_times_s, dtype=float)
    if steps.size == 0 or not np.all(np.isfinite(steps)) or not np.all(steps > 0):
        bad.append(f"step_times_s has {int(np.sum(~(np.isfinite(steps) & (steps > 0))))} of {steps.size} "
                   "entries not finite and > 0")
    return [Violation("finite_positive", "; ".join(bad))] if bad else []


def _positive(x) -> bool:
    return x is not None and math.isfinite(x) and x > 0


# ------------------------------------------------------------------ monotone


@dataclass(frozen=True)
class Knob:
    """A field whose growth must move the step time one way.

    Attributes:
        invariant: its name in :data:`INVARIANTS`.
        path: the scenario field (``None``: chosen by :meth:`path_for`).
        slower: ``True`` when growing it may only lengthen the step
            (latency, compute); ``False`` when it may only shorten it (bandwidth).
    """

    invariant: str
    path: str | None
    slower: bool

    def path_for(self, scenario: distsim.Scenario) -> str:
        if self.path is not None:
            return self.path
        # Compute per example: the measured time replaces the FLOP count when it is set.
        measured = scenario.workload.compute_s_per_sample is not None
        return "workload.compute_s_per_sample" if measured else "workload.flops_per_sample"


KNOBS: tuple[Knob, ...] = (
    Knob("step_time_vs_inter_bandwidth", "cluster.inter_link.bandwidth_Bps", slower=False),
    Knob("step_time_vs_intra_bandwidth", "cluster.intra_link.bandwidth_Bps", slower=False),
    Knob("step_time_vs_inter_latency", "cluster.inter_link.latency_s", slower=True),
    Knob("step_time_vs_intra_latency", "cluster.intra_link.latency_s", slower=True),
    Knob("step_time_vs_compute", None, slower=True),
)


def grown(value: float, factor: float, floor: float) -> float:
    """``value`` grown by ``factor`` (> 1), and by at least ``floor`` (a latency of 0 grows too)."""
    return max(value * factor, value + floor)


def check_monotone(scenario: distsim.Scenario, result: distsim.Result, knob: Knob, factor: float,
                   floor: float, predict: Callable = distsim.predict) -> list[Violation]:
    """The step time of ``scenario`` against the same scenario with ``knob`` grown by ``factor``."""
    path = knob.path_for(scenario)
    before = scenario.value_at(path)
    after = grown(before, factor, floor)
    changed = scenario.replace(path, after)
    t0, t1 = result.summary.step_time_s, predict(changed).summary.step_time_s
    wrong = t1 < t0 * (1 - RTOL) if knob.slower else t1 > t0 * (1 + RTOL)
    if not wrong:
        return []
    if knob.invariant == "step_time_vs_compute" and t0 - t1 <= fusion_slack_s(scenario) + RTOL * t0:
        EXCUSED["fusion buffers merged (fusion_slack_s)"] += 1
        return []  # the stated mechanism: a fused step merged buffers (fusion_slack_s bounds what that saves)
    if is_async(scenario) and scenario.num_replicas >= 2:
        # The stated mechanism (distsim/engines/asyncps.py docstring): FIFO queues at the PS lock into a
        # rhythm, and a cheaper transfer or compute can change who waits behind whom, so the run with the
        # smaller cost may take the longer step. That step stays at most its own scenario's lockstep bound
        # (every worker at every station at once, distsim.rhythm_range_s), which only grows with latency and
        # compute and only falls with bandwidth: the step may move the wrong way only inside that envelope.
        # Under noise the envelope is lockstep_bound_s, derived from the engine's stations over the run's own
        # draws: their lockstep plus the others' updates under way at the end, (W - 1)(2 s + a) / steps, as a
        # noisy run can queue behind longer requests and exceed the lockstep rhythm itself.
        cheaper, longer = (scenario, t0) if knob.slower else (changed, t1)
        noisy = cheaper.training.compute_distribution != "deterministic"
        if longer <= (lockstep_bound_s(cheaper) if noisy else distsim.rhythm_range_s(cheaper)[1]) * (1 + RTOL):
            EXCUSED["async FIFO rhythm" + (", noisy (lockstep_bound_s)" if noisy else " (rhythm_range_s)")] += 1
            return []
    return [Violation(knob.invariant, f"{path} {before:.6g} -> {after:.6g}: step_time_s {t0:.9g} -> {t1:.9g} "
                      f"({(t1 / t0 - 1) * 100:+.3g} %)")]


# --------------------------------------------------------------------- sweep

_SWEPT = ("step_time_s", "throughput_samples_per_s", "speedup", "strong_speedup", "efficiency", "comm_fraction",
          "epoch_time_s", "steps_per_epoch", "memory_bytes_per_replica")


def sweep_applies(scenario: distsim.Scenario) -> bool:
    """Sweep evaluates the mean compute time: compare only deterministic scenarios."""
    return scenario.training.compute_distribution == "deterministic"


def check_sweep(scenario: distsim.Scenario, result: distsim.Result) -> list[Violation]:
    """The one-row sweep of ``scenario`` (its own global batch) against its prediction."""
    row = distsim.sweep(scenario, {"training.global_batch": [scenario.training.global_batch]})
    s = result.summary
    if is_async(scenario):
        swept = float(row["throughput_samples_per_s"][0])
        if computes_at_ps(scenario):
            # One never-idle FIFO server serves every stage in turn: the closed form W / (sum of the cycles)
            # is exact, with no queueing left out.
            if not abs(swept - s.throughput_samples_per_s) <= RTOL * swept:
                return [Violation("sweep=predict", f"in-process async sweep throughput {swept:.9g}, predict's "
                                  f"{s.throughput_samples_per_s:.9g} (one server in turn: exact)")]
            return []
        # Documented upper bound: sweep does not count queueing at the PS.
        if not swept >= s.throughput_samples_per_s * (1 - RTOL):
            return [Violation("sweep=predict", f"async sweep throughput {swept:.9g} below predict's "
                              f"{s.throughput_samples_per_s:.9g} (sweep is documented as an upper bound)")]
        return []
    bad = []
    for name in _SWEPT:
        a, b = float(row[name][0]), float(getattr(s, name))
        # comm_fraction is a difference of step-sized times over the step: its rounding is RTOL of 1 (the
        # step), not of its own value, which can be ~1e-7 when communication is almost all hidden.
        scale = max(abs(a), abs(b), 1.0) if name == "comm_fraction" else max(abs(a), abs(b))
        if not abs(a - b) <= RTOL * scale:
            bad.append(f"{name}: sweep {a:.9g}, predict {b:.9g}")
    return [Violation("sweep=predict", "; ".join(bad))] if bad else []


# -------------------------------------------------------------------- fusion


def fusion_slack_s(scenario: distsim.Scenario) -> float:
    """The most a step of ``scenario`` may shrink, seconds, when its compute
    per example grows (0 unless Horovod fusion groups the gradients).

    The stated mechanism (``distsim/mechanics/gradients.py``,
    ``fusion_groups``; Horovod's ``RunLoopOnce`` in
    ``horovod/common/operations.cc`` sleeps to the next cycle start, and
    ``Controller::FuseResponses`` in ``controller.cc`` fills a buffer while
    ``tensor_size + new_tensor_size <= threshold``): a tensor travels in the
    buffer of the first cycle tick at or after it is ready, a tick's tensors
    filling buffers next-fit. With more compute the ticks fall elsewhere in
    the backward pass, and two tick groups can merge into one, with fewer
    buffers, each saving a collective's fixed cost.

    Derivation. Let ``d(x)`` be one collective's push of ``x`` bytes. The
    last collective ends at ``max_g (launch_g + sum_{j >= g} d_j)`` (one at a
    time, in order). Take the maximizing suffix ``S`` of the cheaper run,
    starting at tensor ``i``. (1) Its launch, tensor ``i``'s tick, comes no
    later in the costlier run: readiness is a max-plus function of compute,
    and ticks are counted from the last replica's forward end, which grows
    no more than a later point of the same backward pass (replicas that
    share CPU cores compute one after another: there, allow one cycle
    ``c``). (2) When ``d`` is affine on ``[0, G]`` (``d(x) = a + b x``,
    ``G`` the gradient's bytes), the suffix's durations are ``a`` times its
    buffer count plus ``b`` times its bytes, and the costlier run's buffers
    holding ``S``'s tensors are no fewer than the cheaper run's less the
    tick boundaries of ``S`` the costlier run lost: next-fit over two
    concatenated groups uses at least the two groups' buffers less one
    (the second group's first items fit in the first's last buffer, the
    rest is next-fit afresh), and next-fit over a group is no more than
    over its pieces. The cheaper run's tensors are ready within ``B`` of
    the first tick, ``B`` its longest backward pass, so its ticks are at
    most ``ceil(B / c) + 1`` and its tick boundaries at most ``ceil(B /
    c)``: the step shrinks by at most ``a ceil(B / c)``, and by at most
    ``a (tensors - 1)`` (one buffer per tensor at most). (3) For any other
    ``d`` (a step class priced ``max(a1 + x / b1, a2 + x / b2)`` over two
    link classes, or NCCL's cheaper of two protocols): merging two buffers
    saves at most ``A``, the largest zero-byte price of any protocol
    (``d_Q(u) + d_Q(v) - d_Q(u + v) <= d_Q(0)`` for the protocol ``Q``
    chosen at ``u + v``, each class's max of affine prices with positive
    latencies), and splitting one never saves (a sum of maxima of affine
    functions with non-negative intercepts is subadditive; for NCCL's
    cheaper of two such prices subadditivity is proven only where both are
    affine, and assumed otherwise: the benchmark's fused draws test it), so
    the costlier run's buffers cost at least the cheaper run's less ``A``
    per lost buffer boundary, at most ``tensors - 1``.

    The mean step is the run's time over its steps, each step's chain end
    shrinking by at most the bound, so the mean step does too.
    ``B = 2/3 max(b0 s f, launch)``: the largest replica batch ``b0``,
    ``s`` seconds per example (``compute_s_per_sample``, else
    ``flops_per_sample / (peak_flops x efficiency)``, over the cores a CPU
    replica uses; the straggler's when fewer), ``f`` the largest compute
    factor of the run's draws (the timeline's documented stream,
    :func:`backup_bound`) and ``launch`` the compute's floor, the other
    replicas' kernel launches (``distsim/engines/steady.py``, RULES.md rule
    16)."""
    t = scenario.training
    if t.grouping != "fusion" or t.backup_workers or is_async(scenario):
        return 0.0
    prices = _push_prices(scenario)
    if not prices:
        return 0.0
    g = float(scenario.workload.gradient_bytes)
    w = scenario.workload
    tensors = len(w.tensor_params) or w.num_gradient_tensors
    fixed = max(price(0.0) for price in prices)
    lost = tensors - 1
    if _affine(prices, g):
        lost = min(lost, math.ceil(_longest_backward_s(scenario) / t.fusion_cycle_s))
    return fixed * lost + (t.fusion_cycle_s if _shares_cores(scenario) else 0.0)


def _push_prices(scenario: distsim.Scenario) -> list[Callable[[float], float]]:
    """One collective's push of ``x`` bytes as the engine prices it, one
    function per protocol it chooses from (NCCL: LL and Simple, the cheaper
    taken; ``distsim.mechanics.communication.Communication.time_s``, whose
    host-CPU paths ignore the protocol). The price of one collective is an
    input of the step here, not what is checked: the check is how fusion
    composes the prices."""
    from distsim.engines.steady import Collectives
    from distsim.mechanics.stepcosts import step_costs

    coll = Collectives.of(scenario)
    if coll is None:
        return []
    p, comm = step_costs(scenario), coll.comm
    host_path = comm.two_level_ps or (comm.plan.algorithm == "reduce_to_one" and comm.plan.options.get("extra_root")
                                      and comm.topology is not None)
    if comm.protocol != "nccl" or host_path or comm.plan.algorithm is None:
        return [lambda x: float(coll.duration_s(p, x))]
    half = 0.5 if comm.uses_ps else 1.0  # a parameter server's push is the first of two symmetric halves
    return [lambda x, q=q: half * float(comm._all_reduce_s(p, np.asarray(x, dtype=float), q))
            for q in ("LL", "Simple")]


def _affine(prices: list[Callable[[float], float]], g: float) -> bool:
    """Whether the cheapest of ``prices`` is affine on ``[0, g]``. Each price
    is a sum of maxima of affine functions (convex): it is affine on ``[0, g]``
    when it meets its chord at ``g / 2``; the cheaper of two affine prices is
    one of them throughout when the same one is cheaper at both ends."""
    for price in prices:
        ends = price(0.0) + price(g)
        if not abs(2 * price(g / 2) - ends) <= RTOL * ends:
            return False
    at_0 = [price(0.0) for price in prices]
    at_g = [price(g) for price in prices]
    return int(np.argmin(at_0)) == int(np.argmin(at_g)) or len(prices) == 1


def _shares_cores(scenario: distsim.Scenario) -> bool:
    c = scenario.cluster
    return c.device.kind == "cpu" and c.physical_cores is not None and c.devices_per_worker > 1


def _longest_backward_s(scenario: distsim.Scenario) -> float:
    """An upper bound on any replica's backward pass in any step, seconds (see :func:`fusion_slack_s`)."""
    c, w, t = scenario.cluster, scenario.workload, scenario.training
    per_example = w.compute_s_per_sample
    if per_example is None:
        per_example = w.flops_per_sample / (c.device.peak_flops * c.device.efficiency)
    if c.device.kind == "cpu" and c.physical_cores is not None:
        per_example /= min(c.physical_cores, c.straggler_cores or c.physical_cores)
    tensors = len(w.tensor_params) or w.num_gradient_tensors
    launch = (c.devices_per_worker - 1) * 4 * tensors * c.device.kernel_launch_s
    n = scenario.num_replicas
    rng = np.random.default_rng(t.seed)
    worst = max(1.0, max(float(np.max(_factors(rng, scenario, n))) for _ in range(t.steps)))
    return 2 / 3 * max(-(-t.global_batch // n) * per_example, launch) * worst


# ------------------------------------------------------------- async envelope


def lockstep_bound_s(scenario: distsim.Scenario) -> float:
    """The longest mean step an asynchronous PS run may take, seconds, under
    its own compute draws: ``max_w (1 / steps) sum_k own_wk + W (2 s + a)
    + (W - 1) (2 s + a) / steps`` (:func:`fifo_bound_s`), or where transfers
    stream through a full-duplex NIC the fair-sharing bound below.

    ``own_wk`` is worker ``w``'s time outside the PS's stations in its
    ``k``-th update (its input, host work and compute, the latencies and
    its own link's share of the transfers: ``c_wk + pull_s + push_s - 2 s
    - a``), ``s`` the PS time a transfer holds, ``a`` the apply, ``W`` the
    workers, ``steps`` the updates per worker (the run is ``N = W steps``
    updates and its mean step ``T / steps``, ``T`` its last apply). The
    first two terms are :func:`own_draws_lockstep_s`, every worker at every
    station at once; the third is what FIFO queueing can add to it.

    The stations (``distsim.engines.asyncps._simulate_events``). One server
    (``ps_cluster="in_process"`` or a link that is not full duplex) serves a
    worker's pull (``s``), its push (``s``) and its apply (``a``). Full
    duplex: the host serves a pull's request (``h = ps_request_s``) and a
    push's request with its apply (``h + a``), each NIC direction the bytes
    (``b = s - h``): ``2 h + a + 2 b = 2 s + a`` of service per update in
    either case. ``num_ps`` shards are modelled as one shard's stations
    with its share (``s`` and ``a`` are per shard): the bound is of that.

    Three facts of that engine the proof uses, read from its code, not
    called here. (1) A worker has at most one request at the whole PS at a
    time: its push is asked for after its pull is served, its apply after
    its push's bytes are in, its next pull when its apply ends. (2) Every
    station books a request when it arrives, ``start = max(t, free)``, so a
    waiting request sees its station busy without a gap until it starts,
    with requests booked before it: by (1), other workers'. (3) Asked for
    at ``t``, a pull ends at ``max(t + pull_s, start + b)`` (``start`` its
    last station's, after the host's ``h`` with full duplex; one server:
    ``h = 0``, ``b = s``), a push's bytes are in at ``max(t + push_s - a -
    h, start + b)`` and its apply ends ``h + a`` after it starts; and
    ``pull_s >= s``, ``push_s >= s + a`` (``async_costs``: the link is at
    least a shard's service, the apply is part of a push). So an update of
    worker ``w`` lasts at most ``own_wk + 2 s + a`` plus its waits, and a
    partly done one has taken at most that much of it with its waits so far.

    Derivation. Let ``n_u`` be the updates worker ``u`` has applied before
    ``T``: ``sum_u n_u <= N - 1``, so some ``w`` has ``n_w <= steps - 1``.
    By ``T`` it has done ``n_w`` updates and part of one more, so
    ``T <= sum_{k <= n_w + 1} own_wk + (n_w + 1)(2 s + a) + waits_w``
    (3). Its waits at a station are disjoint spans in which that station
    serves other workers (2), so they add up to at most the service the
    others had by ``T`` at all stations: each ``u`` its ``n_u`` updates and
    part of the next (by (1) never more), ``(n_u + 1)(2 s + a)``. Then
    ``T <= sum_{k <= steps} own_wk + (sum_u n_u + W)(2 s + a)
    <= steps max_w mean_k own_wk + (W steps + W - 1)(2 s + a)``; divide by
    ``steps``. One worker waits for nobody and meets it exactly; with more,
    ``(W - 1)(2 s + a) / steps`` is the others' updates under way at ``T``.

    The earlier bound, ``W (2 s + a)`` alone, assumed a worker waits at
    each visit behind one request of each other worker no longer than its
    own there: on one server an apply waits behind transfers, and 7 workers
    with 3 exponential updates took 209.8 ms a step against its 207.7 ms
    (``tests/test_invariants.py``).

    Assumption: times within the engine's ``INSTANT`` (1e-12 relative) are
    one instant, where it may start a request up to that much early; the
    tests' ``RTOL`` is far above it.

    Where transfers stream through a full-duplex PS NIC
    (``asyncrun.streamed``) the prediction is not that FIFO run:
    ``asyncrun.phased`` sets its rate to fair sharing's, exact mean-value
    analysis (``asyncps.fair_share_updates_per_s``) of the ``W`` workers,
    each with a delay ``Z_w`` (its class's mean time outside the stations
    over the draws each made, plus the links), cycling through stations of
    demands ``b``, ``b`` and ``2 h + a``. There a class's residence at
    station ``k`` is ``D_k (1 + Q_k)`` with ``Q_k`` the queues of the other
    ``W - 1`` workers, which add up to at most ``W - 1``: a cycle lasts at
    most ``Z_w + 2 s + a + (W - 1) max(b, 2 h + a)``, and the mean step,
    ``W`` over the workers' summed rates, at most the longest cycle.
    ``Z_w`` is the mean of ``w``'s first ``n_w`` own times, ``n_w`` its
    updates in the FIFO run (none: its time at the mean compute), which the
    run's end ``T`` brackets without the engine: ``T`` is at least some
    worker's first ``steps`` updates, ``min_u sum_{k <= steps} (own_uk + 2 s
    + a)``, and at most ``steps`` times the FIFO bound; ``w`` made at most
    the ``n`` with ``sum_{k <= n} (own_wk + 2 s + a) <= T``, and at least
    those that end before ``T`` even behind every other worker's service,
    ``sum_{k <= n} own_wk + (n + N + W - 2)(2 s + a)`` (the derivation
    above). ``Z_w`` is then at most the largest mean over that range
    (:func:`shared_bound_s`). Looser than the FIFO bound where the range
    reaches the first few draws; the bound times the lanes' stretch at the
    mean compute, as here before, was no bound: the noisy log is stretched
    to its own draws' rate.

    The draws are the asynchronous engine's documented streams
    (``distsim.engines.asyncps._ComputeTimes``, as :func:`async_bound`):
    worker ``w``'s ``k``-th compute is ``max(c_w f_wk, min_compute_w)``,
    with its input and host time on top (``input + host + compute``) or,
    with prefetch, overlapping (``max(input, host + compute)``). The costs
    are the engine's inputs (:func:`distsim.engines.costs.async_costs`),
    not what is checked: the check is the queueing's composition."""
    from distsim.engines import asyncrun

    costs = _costs(scenario)
    return shared_bound_s(scenario) if costs.duplex and asyncrun.streamed(scenario) else fifo_bound_s(scenario)


def computes_at_ps(scenario: distsim.Scenario) -> bool:
    """Whether the PS's one server also serves the workers' own time (``distsim/engines/costs.py``,
    ``async_costs``: an ``in_process`` cluster of CPU devices sharing ``cluster.physical_cores``)."""
    c = scenario.cluster
    return scenario.strategy.ps_cluster == "in_process" and c.device.kind == "cpu" and c.physical_cores is not None


def served_bound_s(scenario: distsim.Scenario) -> float:
    """The longest mean step where the PS's one server serves each worker's own time as well as its
    transfers and apply (:func:`computes_at_ps`), seconds: ``links + (1 / steps)`` times the sum of the
    ``N + W - 1`` largest ``own_uk + 2 s + a`` over every worker's first ``N`` draws.

    Derivation, with the facts of :func:`lockstep_bound_s` (one request per worker at the PS, FIFO
    stations booked on arrival, a request's own path no longer than its service there apart from the
    links): some worker ``w`` has applied ``n_w <= steps - 1`` updates before the run's end ``T``, so
    ``T`` is at most its own ``n_w + 1`` updates (own time, ``2 s + a``, links) plus its waits, and it
    waits only while the server serves other workers, at most their ``n_u + 1`` updates each (own time
    now included). That is a sum of ``sum_u (n_u + 1) <= N - 1 + W`` terms ``own_uk + 2 s + a``, each
    worker's first ones (``k <= N``), plus ``steps`` links: at most the largest ``N + W - 1`` of them.
    Deterministic, ``W (c + 2 s + a) + (W - 1)(c + 2 s + a) / steps`` (``c`` the own time)."""
    costs = _costs(scenario)
    links, per_update = _station_terms(costs)
    workers, steps = scenario.num_replicas, scenario.training.steps
    updates = workers * steps
    terms = np.sort((_own_draws(scenario, costs, updates) + per_update).ravel())[::-1]
    return links + float(np.sum(terms[:updates + workers - 1])) / steps


def fifo_bound_s(scenario: distsim.Scenario) -> float:
    """The longest mean step of an asynchronous PS scenario's FIFO run (the
    event engine's lanes, unstretched), seconds: :func:`own_draws_lockstep_s`
    plus ``(W - 1)(2 s + a) / steps`` (derivation: :func:`lockstep_bound_s`)."""
    if computes_at_ps(scenario):
        return served_bound_s(scenario)
    costs = _costs(scenario)
    links, per_update = _station_terms(costs)
    workers, steps = scenario.num_replicas, scenario.training.steps
    own = float(np.max(np.mean(_own_draws(scenario, costs, steps), axis=1)))
    return own + links + workers * per_update + (workers - 1) * per_update / steps


def shared_bound_s(scenario: distsim.Scenario) -> float:
    """The longest mean step where transfers share a full-duplex PS NIC fairly, seconds:
    ``max_w Z_w + 2 s + a + (W - 1) max(b, 2 h + a)`` (derivation: :func:`lockstep_bound_s`), ``Z_w`` the
    largest mean of worker ``w``'s first ``n`` own times (links included) over the counts ``n`` its FIFO
    run may have made, or its time at the mean compute where that may be none."""
    costs = _costs(scenario)
    links, per_update = _station_terms(costs)
    workers, steps, request = scenario.num_replicas, scenario.training.steps, float(costs.ps_request_s)
    updates = workers * steps
    own = _own_draws(scenario, costs, updates) + links
    n = np.arange(1, updates + 1)
    least = np.cumsum(own + per_update, axis=1)  # the least time worker w takes for its first n updates
    # Counts the FIFO run may have given (its end T: at least some worker's first `steps` updates, at most
    # steps x fifo_bound_s): n was done by T only if least(n) <= T; before T for sure if even with every
    # other worker's service ahead, (N - 2 + W) (2 s + a), the n updates end before T could.
    most = np.sum(least <= steps * fifo_bound_s(scenario) * (1 + RTOL), axis=1)
    surely = np.sum(np.cumsum(own, axis=1) + (n + updates + workers - 2) * per_update
                    < float(np.min(least[:, steps - 1])) * (1 - RTOL), axis=1)
    prefix_means = np.cumsum(own, axis=1) / n
    at_mean = _own_draws(scenario, costs, 1, at_mean=True)[:, 0] + links
    delay = 0.0
    for w, (lo, hi) in enumerate(zip(surely, most)):
        if hi >= max(lo, 1):
            delay = max(delay, float(np.max(prefix_means[w, max(lo, 1) - 1:hi])))
        if lo == 0:  # it may have made none: the prediction then takes its time at the mean compute
            delay = max(delay, float(at_mean[w]))
    largest_demand = max(float(costs.ps_service_s) - request, 2 * request + float(costs.ps_apply_s))
    return delay + per_update + (workers - 1) * largest_demand


def own_draws_lockstep_s(scenario: distsim.Scenario) -> float:
    """The lockstep rhythm of an asynchronous PS run over its own draws,
    seconds a step, unstretched: every worker at every PS station at once,
    ``max_w mean_k own_wk + W (2 s + a)`` (terms as in
    :func:`lockstep_bound_s`). A physical rhythm, not a bound: FIFO
    queueing can exceed it (:func:`lockstep_bound_s`). Deterministic
    compute gives the mean compute's lockstep (``distsim.rhythm_range_s``);
    noisy compute each worker's mean over its first ``steps`` draws. Where the one server serves
    the workers' own time too (:func:`computes_at_ps`) lockstep holds them all there, one after
    another: ``sum_w mean_k own_wk`` in place of the slowest."""
    costs = _costs(scenario)
    links, per_update = _station_terms(costs)
    means = np.mean(_own_draws(scenario, costs, scenario.training.steps), axis=1)
    own = float(np.sum(means) if computes_at_ps(scenario) else np.max(means))
    return own + links + scenario.num_replicas * per_update


def _costs(scenario: distsim.Scenario):
    """The event engine's inputs for ``scenario`` (``distsim.engines.costs.async_costs``)."""
    from distsim.engines.costs import async_costs
    from distsim.mechanics.stepcosts import step_costs
    from distsim.mechanics.strategies import plan

    return async_costs(step_costs(scenario), plan(scenario))


def _station_terms(costs) -> tuple[float, float]:
    """``(links, 2 s + a)`` seconds: a worker's latencies and own link beyond the PS's service
    (``push_s + pull_s - 2 s - a``), and the PS's service per update."""
    service, apply = float(costs.ps_service_s), float(costs.ps_apply_s)
    return float(costs.push_s + costs.pull_s) - 2 * service - apply, 2 * service + apply


def _own_draws(scenario: distsim.Scenario, costs, draws: int, at_mean: bool = False) -> np.ndarray:
    """Each worker's first ``draws`` times outside its transfers (input, host, compute; the links
    apart), seconds, shape ``(W, draws)``; ``at_mean``: at the mean compute (every factor 1)."""
    workers = scenario.num_replicas
    parts = costs.worker_parts(workers)
    mean = np.asarray(parts["compute_mean_s"], dtype=float).reshape(-1, 1)
    zero = np.zeros((workers, 1))
    input_s, host_s, least = (np.asarray(parts.get(k, zero), dtype=float).reshape(-1, 1)
                              for k in ("input_s", "host_s", "min_compute_s"))
    f = np.ones((workers, draws)) if at_mean else np.array(
        [_factors(np.random.Generator(np.random.PCG64(seq)), scenario, draws)
         for seq in np.random.SeedSequence(scenario.training.seed).spawn(workers)])
    device = host_s + np.maximum(mean * f, least)
    return np.maximum(input_s, device) if parts.get("prefetch", True) else input_s + device
