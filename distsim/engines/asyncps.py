"""Asynchronous parameter-server training as a discrete-event simulation.

Each of ``W`` workers loops forever, independently of the others:

1. **pull** the parameters (``pull_s`` seconds); the PS takes the snapshot
   when it starts serving the pull, and the number of updates applied by then
   is the update's ``read_version``;
2. **compute** a gradient on them (a random time with the worker's mean);
3. **push** the gradient (``push_s`` seconds); the PS applies it on arrival.

The staleness of an applied update is the number of updates the PS applied
between the worker's read and this apply: ``apply index - read_version``.

Two engines give the same :class:`UpdateLog`:

* ``"vectorized"`` (no PS contention): every worker's timeline is a cumulative
  sum of its own durations, the global apply order is one sort, and every read
  version one merge. Over a million worker-updates per second.
* ``"events"``: a plain ``heapq`` event queue in which the PS is a FIFO server
  that spends ``ps_service_s`` on every transfer (push or pull), so workers
  queue behind each other when the PS link is the bottleneck. Used when
  ``ps_service_s > 0``. Without contention it reproduces the vectorized log
  bit for bit (``tests/test_asyncps.py``). With ``duplex=True`` the bytes
  of pushes and pulls queue separately, one server for each direction of a
  full-duplex NIC, and only the PS's per-request host time
  (``ps_request_s``) is shared by both: a pull is the host's work, then the
  bytes out; a push is the bytes in, then the host's work. Each server is
  FIFO and is asked for when a transfer reaches it. With
  ``compute_at_ps=True`` (one server) each worker's time outside its
  transfers is served by that server too, in turn with the transfers and
  applies: the in-process cluster on shared CPU cores.

A push's gradient is applied (``ps_apply_s``) once its bytes are in: when
both the worker's own path (``push_s`` less the host's work and the apply)
and the PS lane's service of its bytes are done. The PS then applies one
gradient at a time, so consecutive applies of a shard end at least
``ps_apply_s`` apart (the shards apply in parallel, each its share).

FIFO queues are not monotone in their costs. Deterministic workers fall
into a periodic rhythm (an order in which they reach each lane), and a
shorter transfer, a shorter latency or less compute can move a worker ahead
of another at a lane, so that the run locks into another order whose cycle
is longer: a cheaper cost can lengthen the mean step. It is a real queueing
effect (who waits behind whom), not rounding: 2 workers on one server
(compute 0.7 s, apply 0.01 s, 16 updates) whose transfer time crosses the
compute time, 0.6999999 s then 0.7000001 s, step 2.9075 s then 2.8200 s. The step then stays at most the cheaper
scenario's lockstep rhythm (``distsim.rhythm_range_s``), every worker at
every station at once, which only grows with latency and compute and only
shrinks with bandwidth: the envelope is monotone, the rhythm inside it is
not (``tests/physical_invariants.py``). That envelope is observed, not
proven: under noise a request can wait behind other workers' longer ones
and a run exceed it; what the stations guarantee is ``(W - 1)(2 s + a) /
steps`` more (``tests/physical_invariants.py::fifo_bound_s``). In 150 random asynchronous
scenarios with the link 1.1, 2 and 10 times faster, 11 of 450 steps grew,
by at most 5.2 % (16 workers), none beyond the faster link's lockstep step;
with several shards a step grew by 10.9 % (32 workers, 3 shards), still
below that lockstep.

Only the compute of a worker's update is random (``compute_mean_s`` times
a factor with mean 1, no less than ``min_compute_s``); its input and its
host's fixed time are not, as in the synchronous timeline and the
one-device baseline (:func:`distsim.engines.timeline.one_device_run`, whose
factors are worker 0's).

``benchmarks/bench_async.py`` compares this event queue with the same model in
SimPy; the plain queue was faster, hence no SimPy dependency.

Events at the same instant are ordered by (worker, kind) with applies
before reads, so a zero-time pull sees its own update and those of
lower-numbered workers applied at that instant; a pull that waited for its
server sees every apply of the instant its service starts (the server
served them first). An instant is
:data:`INSTANT` relative wide in the event engine: times equal in exact
arithmetic differ in their float sums' last bits, and a FIFO lane must not
choose between two workers by rounding. Times are in seconds.
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass, replace

import numpy as np

from distsim.mechanics import stragglers
from distsim.results.result import Result, Staleness
from distsim.scenario import limits
from distsim.validation import Boolean, InputError, Integer, Number, OneOf, Optional

DISTRIBUTIONS = stragglers.DISTRIBUTIONS
ENGINES: tuple[str, ...] = ("auto", "vectorized", "events")
#: Updates one simulation may apply. Measured on this 2-core machine: the
#: event queue applies about 0.5 million a second (5 million: about 10 s); the
#: vectorized engine about 1.4 million a second, its peak memory near 200 bytes
#: an update (5 million: about 4 s and 1 GB). A scenario's own bound
#: (``limits.MAX_ASYNC_UPDATES``) is lower: ``predict`` also builds a trace.
MAX_UPDATES = 5_000_000

_WORKERS = Integer(1, limits.MAX_WORKERS)
_SECONDS = Number(0, unit="seconds")
_MEAN_S = Number(0, low_open=True, unit="seconds")
_BANDWIDTH = Number(0, low_open=True, unit="bytes/s")


@dataclass
class UpdateLog:
    """Every applied update, in the order the PS applied them.

    Attributes:
        worker: worker that sent update ``j`` (int64).
        read_version: updates the PS had applied when that worker read the
            parameters the gradient was computed on (int64).
        read_time_s: when the PS took that snapshot, seconds.
        apply_time_s: when update ``j`` was applied, seconds.
        num_workers: workers in the simulation.
    """

    worker: np.ndarray
    read_version: np.ndarray
    read_time_s: np.ndarray
    apply_time_s: np.ndarray
    num_workers: int

    def __len__(self) -> int:
        return len(self.worker)

    @property
    def staleness(self) -> np.ndarray:
        """Updates applied between each update's read and its own apply."""
        return np.arange(len(self.worker), dtype=np.int64) - self.read_version

    def to_staleness(self) -> Staleness:
        """The staleness record shared with real runs (``distsim.results.result``)."""
        return Staleness(staleness=self.staleness, worker=self.worker.astype(np.int64))

    def per_worker_mean_staleness(self) -> np.ndarray:
        """Mean staleness of each worker's updates (NaN for a worker with none)."""
        counts = np.bincount(self.worker, minlength=self.num_workers)
        sums = np.bincount(self.worker, weights=self.staleness, minlength=self.num_workers)
        with np.errstate(invalid="ignore", divide="ignore"):
            return sums / counts

    @property
    def updates_per_s(self) -> float:
        """Applied updates per simulated second."""
        return len(self) / float(self.apply_time_s[-1]) if len(self) else float("nan")

    def stretched(self, factor: float) -> UpdateLog:
        """The same updates in the same order with every time multiplied by ``factor`` (> 0)."""
        factor = Number(0, low_open=True)("factor", factor)
        return replace(self, read_time_s=self.read_time_s * factor, apply_time_s=self.apply_time_s * factor)


def expected_staleness_immediate_pulls(num_workers: int) -> float:
    """Mean staleness with immediate pulls and free communication: ``N - 1``,
    for any compute-time distribution."""
    return float(num_workers - 1)


def expected_staleness_exponential(compute_mean_s) -> np.ndarray:
    """Per-worker mean staleness ``(sum(mu) - mu_i) / mu_i`` for exponential
    compute times with rates ``mu_i = 1 / compute_mean_s[i]``."""
    mu = 1.0 / np.asarray(compute_mean_s, dtype=float)
    return (mu.sum() - mu) / mu


def worker_means_s(num_workers: int, compute_mean_s, path: str = "compute_mean_s", rule: Number = _MEAN_S,
                   each: str = "> 0 seconds") -> np.ndarray:
    """Each worker's mean compute time, seconds: ``compute_mean_s`` is one
    number for every worker or a sequence of one per worker, each finite and > 0
    (or as ``rule`` allows, which ``each`` says).

    Raises:
        InputError: at ``path`` (``path[i]`` for a bad element).
    """
    if not isinstance(compute_mean_s, (list, tuple, np.ndarray)) or np.ndim(compute_mean_s) == 0:
        return np.full(num_workers, rule(path, compute_mean_s), dtype=float)
    if len(compute_mean_s) != num_workers:
        raise InputError(path, compute_mean_s, f"one number for every worker, or a list of {num_workers} (one per "
                         f"worker), each {each}")
    return np.array([rule(f"{path}[{i}]", v) for i, v in enumerate(compute_mean_s)], dtype=float)


def worker_time_s(input_s, host_s, compute_s, min_compute_s, prefetch) -> np.ndarray:
    """A worker's time per update outside its transfers, seconds: the host's
    fixed time plus the compute (at least ``min_compute_s``), and the input
    overlapping both with ``prefetch`` (``max(input, host + compute)``) or
    before them without (their sum)."""
    device = host_s + np.maximum(compute_s, min_compute_s)
    return np.where(prefetch, np.maximum(input_s, device), input_s + device)


class _ComputeTimes:
    """Per-worker random streams: worker i's k-th time outside its transfers
    is the same whichever engine asks and in whatever batch sizes.

    Only the compute is random, as in the synchronous engines and the
    one-device baseline (``distsim.engines.timeline``): the k-th draw is
    ``max(mean x factor, min_compute)``; the input and the host's fixed time
    are not, and come on top (``input + host + compute``) or, with
    ``prefetch``, overlap it (``max(input, host + compute)``)."""

    def __init__(self, means: np.ndarray, distribution: str, sigma: float, seed: int, input_s=0.0, host_s=0.0,
                 min_compute_s=0.0, prefetch: bool = True):
        self.means = means
        self.distribution = distribution
        self.sigma = sigma
        self.rngs = [np.random.Generator(np.random.PCG64(s)) for s in np.random.SeedSequence(seed).spawn(len(means))]
        self.input_s, self.host_s, self.min_compute_s = (np.broadcast_to(np.asarray(x, dtype=float), means.shape)
                                                         for x in (input_s, host_s, min_compute_s))
        self.prefetch = prefetch

    def own_s(self, worker: int, compute_s: np.ndarray) -> np.ndarray:
        """Worker ``worker``'s times outside its transfers for compute times ``compute_s``."""
        return worker_time_s(self.input_s[worker], self.host_s[worker], compute_s, self.min_compute_s[worker],
                             self.prefetch)

    def mean_s(self) -> np.ndarray:
        """Each worker's time outside its transfers at its mean compute time."""
        return np.array([float(self.own_s(w, self.means[w])) for w in range(len(self.means))])

    def draw(self, worker: int, size: int) -> np.ndarray:
        factor = stragglers.factors(self.rngs[worker], self.distribution, size, self.sigma)
        return self.own_s(worker, self.means[worker] * factor)


def simulate_async(
    num_workers: int,
    num_updates: int,
    compute_mean_s=1.0,
    distribution: str = "exponential",
    *,
    sigma: float = 0.5,
    push_s: float = 0.0,
    pull_s: float = 0.0,
    ps_service_s: float = 0.0,
    seed: int = 0,
    engine: str = "auto",
    duplex: bool = False,
    ps_request_s: float = 0.0,
    ps_apply_s: float = 0.0,
    input_s=0.0,
    host_s=0.0,
    min_compute_s=0.0,
    prefetch: bool = True,
    compute_at_ps: bool = False,
) -> UpdateLog:
    """Simulate asynchronous PS training until ``num_updates`` are applied.

    Args:
        num_workers: workers W.
        num_updates: updates to apply.
        compute_mean_s: mean compute time per gradient, seconds; a scalar or
            one value per worker (heterogeneous workers). The only random
            part of a worker's time outside its transfers: its k-th compute
            is ``compute_mean_s`` times a random factor with mean 1.
        distribution: compute-time distribution, one of :data:`DISTRIBUTIONS`.
        sigma: log-standard-deviation of the lognormal (its mean stays
            ``compute_mean_s``).
        push_s: seconds to send a gradient when the PS is free (latency plus
            bytes over the worker's link), see :func:`link_times_s`.
        pull_s: seconds to fetch the parameters when the PS is free.
        ps_service_s: seconds of PS link time each transfer occupies (bytes
            per shard over the PS bandwidth, see :func:`link_times_s`); > 0
            makes transfers queue at the PS (FIFO).
        seed: seed of the compute-time streams.
        duplex: the PS link is full duplex: of each transfer's
            ``ps_service_s``, the bytes (``ps_service_s - ps_request_s``)
            queue per direction (pushes apart from pulls) and only
            ``ps_request_s`` queues for the PS's host, which both share.
            Otherwise every transfer holds the one PS server for all of
            ``ps_service_s``.
        ps_request_s: with ``duplex``, the PS's host time per transfer, seconds
            (at most ``ps_service_s``).
        ps_apply_s: the PS's time to apply a pushed gradient, seconds: held
            after the push's bytes are in (by the host with ``duplex``, else by
            the one server), one apply at a time, and part of ``push_s`` (a
            push ends at its apply).
        input_s: a worker's input per update (reading and copying its
            batch), seconds, not random; a scalar or one per worker.
        host_s: a worker host's fixed time per update (step overhead and
            dispatch), seconds, not random; a scalar or one per worker.
        min_compute_s: least a compute lasts (the host's kernel launches of
            other replicas, ``steady.launch_s``), seconds; a scalar or one
            per worker.
        prefetch: the input overlaps the host's and the device's work:
            a worker's time outside its transfers is ``max(input, host +
            compute)``; without, ``input + host + compute``.
        compute_at_ps: the one PS server (not ``duplex``) also serves each
            worker's time outside its transfers, FIFO with the transfers and
            applies, once the worker's pull is done (needs the event engine).
        engine: ``"auto"`` (vectorized unless there is PS contention),
            ``"vectorized"`` or ``"events"``.
    """
    num_workers = _WORKERS("num_workers", num_workers)
    num_updates = Integer(1, MAX_UPDATES)("num_updates", num_updates)
    means = worker_means_s(num_workers, compute_mean_s)
    distribution = stragglers.DISTRIBUTION("distribution", distribution)
    sigma = stragglers.SIGMA("sigma", sigma)
    push_s, pull_s, ps_service_s = (_SECONDS(name, value) for name, value in
                                    (("push_s", push_s), ("pull_s", pull_s), ("ps_service_s", ps_service_s)))
    engine = OneOf(ENGINES)("engine", engine)
    if engine == "vectorized" and ps_service_s > 0:
        raise InputError("ps_service_s", ps_service_s,
                         "0 with engine='vectorized' (PS contention needs engine='events' or 'auto')")
    ps_apply_s = Number(0, push_s, unit="seconds, at most push_s")("ps_apply_s", ps_apply_s)
    if engine == "vectorized" and ps_apply_s > 0:
        raise InputError("ps_apply_s", ps_apply_s,
                         "0 with engine='vectorized' (applies queue at the PS: engine='events' or 'auto')")
    duplex = Boolean()("duplex", duplex)
    ps_request_s = Number(0, ps_service_s, unit="seconds, at most ps_service_s")("ps_request_s", ps_request_s)
    if Boolean()("compute_at_ps", compute_at_ps) and (duplex or engine == "vectorized"):
        raise InputError("compute_at_ps", compute_at_ps, "False with duplex=True or engine='vectorized' (the "
                         "workers' time is served by the one PS server of the event engine)")
    draws = _checked_times(means, distribution, sigma, seed, input_s, host_s, min_compute_s, prefetch)
    if engine == "events" or (engine == "auto" and (ps_service_s + ps_apply_s > 0 or compute_at_ps)):
        return _simulate_events(num_workers, num_updates, draws, push_s, pull_s, ps_service_s,
                                ps_request_s if duplex else None, ps_apply_s, bool(compute_at_ps))
    return _simulate_vectorized(num_workers, num_updates, draws, push_s, pull_s)


def _checked_times(means, distribution, sigma, seed, input_s, host_s, min_compute_s, prefetch) -> _ComputeTimes:
    """:class:`_ComputeTimes` with the per-worker fixed times and ``prefetch`` checked."""
    fixed = [worker_means_s(len(means), value, name, _SECONDS, ">= 0 seconds") for name, value in
             (("input_s", input_s), ("host_s", host_s), ("min_compute_s", min_compute_s))]
    return _ComputeTimes(means, distribution, sigma, seed, *fixed, Boolean()("prefetch", prefetch))


def own_time_means_s(updates_per_worker, compute_mean_s=1.0, distribution: str = "exponential", *,
                     sigma: float = 0.5, seed: int = 0, input_s=0.0, host_s=0.0, min_compute_s=0.0,
                     prefetch: bool = True) -> np.ndarray:
    """Each worker's mean time outside its transfers over the first
    ``updates_per_worker[w]`` draws of its stream: the draws
    :func:`simulate_async` (same arguments) gave a run in which worker ``w``
    made that many updates. A worker with none gets its time at the mean
    compute."""
    means = worker_means_s(len(np.ravel(updates_per_worker)), compute_mean_s)
    draws = _checked_times(means, stragglers.DISTRIBUTION("distribution", distribution),
                           stragglers.SIGMA("sigma", sigma), seed, input_s, host_s, min_compute_s, prefetch)
    at_mean = draws.mean_s()
    return np.array([float(np.mean(draws.draw(w, int(n)))) if n > 0 else at_mean[w]
                     for w, n in enumerate(np.ravel(updates_per_worker))])


#: Most population vectors :func:`fair_share_updates_per_s` walks (workers of
#: each distinct cycle time + 1, multiplied): a few milliseconds of NumPy each.
MAX_MVA_POPULATIONS = 100_000


def fair_share_updates_per_s(delay_s, demand_s) -> float:
    """Updates per second of workers whose transfers share the PS's NIC fairly.

    Every worker cycles through a pull, its compute and a push. Concurrent
    TCP transfers through one NIC direction share its rate (processor
    sharing), unlike :func:`simulate_async`'s FIFO lanes, which serve one
    transfer at a time. A closed network of processor-sharing stations and
    per-worker delays has a product-form stationary distribution whatever the
    distributions of the service times (Baskett, Chandy, Muntz and Palacios,
    JACM 1975), so its throughput depends on the mean demands only, and exact
    mean-value analysis gives it (Reiser and Lavenberg, JACM 1980): with ``n``
    workers a station's residence time is its demand times one plus its mean
    queue with ``n - 1`` workers. Workers with equal delays form one class
    (multi-class MVA over their population vectors).

    Args:
        delay_s: per worker, seconds of its cycle spent outside the stations
            (compute, latencies), each >= 0.
        demand_s: per station, seconds of service each cycle needs there
            (e.g. the pull and push bytes over each direction of the PS NIC),
            each >= 0.
    """
    delay_s = np.asarray([_SECONDS(f"delay_s[{i}]", d) for i, d in enumerate(np.ravel(delay_s))])
    demand_s = np.asarray([_SECONDS(f"demand_s[{i}]", d) for i, d in enumerate(np.ravel(demand_s))])
    _WORKERS("len(delay_s)", len(delay_s))
    delays, counts = np.unique(delay_s, return_counts=True)
    populations = int(np.prod(counts + 1))
    if populations > MAX_MVA_POPULATIONS:
        raise InputError("delay_s", f"{len(delays)} distinct delays", f"at most {MAX_MVA_POPULATIONS} population "
                         "vectors (product of each delay's worker count + 1)")
    queue: dict[tuple[int, ...], np.ndarray] = {}
    rate = 0.0
    # Lexicographic order visits every population minus one worker before the population itself.
    for n in itertools.product(*(range(c + 1) for c in counts)):
        rate, q = 0.0, np.zeros(len(demand_s))
        for c, n_c in enumerate(n):
            if n_c:
                fewer = n[:c] + (n_c - 1,) + n[c + 1:]
                residence = demand_s * (1.0 + queue.get(fewer, 0.0))
                rate_c = n_c / (delays[c] + residence.sum())
                q += rate_c * residence
                rate += rate_c
        queue[n] = q
    return rate


def link_times_s(
    message_bytes: int,
    bandwidth_Bps: float,
    latency_s: float = 0.0,
    num_shards: int = 1,
    ps_bandwidth_Bps: float | None = None,
) -> dict[str, float]:
    """``push_s``, ``pull_s`` and ``ps_service_s`` for :func:`simulate_async`
    from a message size and links: a transfer takes ``latency + n / B_worker``
    when the PS is idle, and occupies each of the ``k`` PS shards for
    ``(n / k) / B_ps`` (no contention when ``ps_bandwidth_Bps`` is None)."""
    message_bytes = Number(0, unit="bytes")("message_bytes", message_bytes)
    bandwidth_Bps = _BANDWIDTH("bandwidth_Bps", bandwidth_Bps)
    latency_s = _SECONDS("latency_s", latency_s)
    num_shards = Integer(1)("num_shards", num_shards)
    ps_bandwidth_Bps = Optional(_BANDWIDTH, "no PS contention")("ps_bandwidth_Bps", ps_bandwidth_Bps)
    link = latency_s + message_bytes / bandwidth_Bps
    service = 0.0 if ps_bandwidth_Bps is None else message_bytes / num_shards / ps_bandwidth_Bps
    return {"push_s": link, "pull_s": link, "ps_service_s": service}


def _simulate_vectorized(num_workers, num_updates, draws, push_s, pull_s) -> UpdateLog:
    cycle_mean = draws.mean_s() + push_s + pull_s
    share = (1 / cycle_mean) / np.sum(1 / cycle_mean)
    want = np.ceil(num_updates * share * 1.1 + 16).astype(np.int64)
    computes = [draws.draw(w, int(want[w])) for w in range(num_workers)]
    while True:
        pull_starts, applies = [], []
        for c in computes:
            # The same additions, in the same order, as the event engine does.
            steps = np.empty(3 * len(c))
            steps[0::3], steps[1::3], steps[2::3] = pull_s, c, push_s
            t = np.cumsum(steps)
            applies.append(t[2::3])
            pull_starts.append(np.concatenate([[0.0], t[2:-1:3]]))
        horizon = min(a[-1] for a in applies)
        done = sum(int(np.searchsorted(a, horizon, side="right")) for a in applies)
        if done >= num_updates:
            break
        # Some worker ran out of drawn cycles before the others reached update U.
        for w in range(num_workers):
            computes[w] = np.concatenate([computes[w], draws.draw(w, len(computes[w]) // 2 + 16)])
    # One stable sort by time of every apply (kind 0) and read (kind 1), laid out
    # worker by worker with applies first, orders ties by (instant, worker, kind).
    times = np.concatenate([x for pair in zip(applies, pull_starts) for x in pair])
    kind = np.concatenate([np.repeat(np.array([0, 1], dtype=np.int8), len(a)) for a in applies])
    who = np.repeat(np.arange(num_workers, dtype=np.int64), [2 * len(a) for a in applies])
    merged = np.argsort(times, kind="stable")
    # Times within INSTANT of the one before are one instant, ordered by (worker, kind) as the layout is.
    ordered = times[merged]
    instant = np.cumsum(np.concatenate([[0], ordered[1:] > ordered[:-1] * (1 + INSTANT)]))
    merged = merged[np.lexsort((merged, instant))]
    is_apply = kind[merged] == 0
    order = merged[is_apply][:num_updates]
    # The read paired with an apply sits len(applies[w]) after it in `times`.
    offset = np.concatenate([np.full(len(a), len(a), dtype=np.int64) for a in applies])
    version = np.empty(len(times), dtype=np.int64)
    version[merged] = np.cumsum(is_apply) - is_apply
    apply_index = np.flatnonzero(kind == 0)
    read_of = apply_index + offset
    read_pos = np.empty(len(times), dtype=np.int64)
    read_pos[apply_index] = read_of
    return UpdateLog(
        worker=who[order],
        read_version=version[read_pos[order]],
        read_time_s=times[read_pos[order]],
        apply_time_s=times[order],
        num_workers=num_workers,
    )


_APPLY, _READ, _PULL_DONE, _COMPUTE_DONE, _PULL_SEND, _PUSH_IN, _LATE_READ = 0, 1, 2, 3, 4, 5, 6
_PULL, _PUSH = "pull", "push"


def _simulate_events(num_workers, num_updates, draws, push_s, pull_s, ps_service_s, duplex_request_s=None,
                     apply_s=0.0, compute_at_ps=False) -> UpdateLog:
    """The event engine; ``duplex_request_s`` (not None) splits each transfer's
    service into shared host time and per-direction bytes (see :func:`simulate_async`).

    Every server is FIFO and is asked for at the moment a transfer reaches it,
    so no booking ever holds a server for a later transfer while an earlier
    one waits. Duplex: a pull is the host's work (the snapshot, at its start)
    and then the bytes out; a push is the bytes in and then the host's work
    (the apply, ``apply_s`` more of it, at its end). A push's bytes are in at
    the later of its own path's end and its lane service's end; only then is
    the server that applies asked for, so applies never overlap."""
    block = 256
    compute = [draws.draw(w, block) for w in range(num_workers)]
    used = [0] * num_workers
    read_version = [0] * num_workers
    read_time = [0.0] * num_workers
    asked = [0.0] * num_workers  # when each worker's transfer in flight began
    out_worker = np.empty(num_updates, dtype=np.int64)
    out_version = np.empty(num_updates, dtype=np.int64)
    out_read = np.empty(num_updates)
    out_apply = np.empty(num_updates)
    duplex = duplex_request_s is not None
    host_s = duplex_request_s if duplex else 0.0
    bytes_s = ps_service_s - host_s
    # Simplex: the one server also applies (it is the PS's only station); duplex: the host.
    apply_server = "host" if duplex else _PULL
    # When each server is free: the host (shared by both directions), pulls, pushes. Simplex: one server.
    free = {"host": 0.0, _PULL: 0.0, _PUSH: 0.0}
    applied = 0
    heap: list[tuple[float, int, int]] = []
    push = heapq.heappush

    def serve(t: float, server: str, busy_s: float) -> float:
        """Queue at ``server`` at time ``t``; when its service starts (at ``t`` if the server is free within
        the instant, which a later event of the instant may have booked first)."""
        start = max(t, free[server])
        if start <= t * (1 + INSTANT):
            start = t
        free[server] = start + busy_s
        return start

    def ask_pull(t: float, w: int) -> None:
        asked[w] = t
        service = host_s if duplex else ps_service_s
        start = serve(t, "host" if duplex else _PULL, service)
        # A pull that waited starts as its server ends another job, maybe an apply at that very instant:
        # its snapshot comes after that apply whichever worker's it was (see _pop_instant).
        push(heap, (start, w, _LATE_READ if start > t else _READ))
        if duplex:
            push(heap, (start + host_s, w, _PULL_SEND))
        else:
            push(heap, (max(t + pull_s, start + ps_service_s), w, _PULL_DONE))

    for w in range(num_workers):
        ask_pull(0.0, w)
    while applied < num_updates:
        t, w, kind = _pop_instant(heap)
        if kind == _APPLY:
            out_worker[applied] = w
            out_version[applied] = read_version[w]
            out_read[applied] = read_time[w]
            out_apply[applied] = t
            applied += 1
            ask_pull(t, w)
        elif kind in (_READ, _LATE_READ):
            read_version[w] = applied
            read_time[w] = t
        elif kind == _PULL_SEND:
            start = serve(t, _PULL, bytes_s)
            push(heap, (max(asked[w] + pull_s, start + bytes_s), w, _PULL_DONE))
        elif kind == _PULL_DONE:
            i = used[w]
            if i == len(compute[w]):
                compute[w] = np.concatenate([compute[w], draws.draw(w, len(compute[w]))])
            used[w] = i + 1
            own = float(compute[w][i])
            start = serve(t, _PULL, own) if compute_at_ps else t
            push(heap, (start + own, w, _COMPUTE_DONE))
        elif kind == _COMPUTE_DONE:
            # The bytes are in when both the worker's own path and the PS lane are done with them.
            start = serve(t, _PUSH if duplex else _PULL, bytes_s)
            push(heap, (max(t + push_s - host_s - apply_s, start + bytes_s), w, _PUSH_IN))
        else:  # _PUSH_IN: the host then does its work and applies the gradient, one push at a time
            start = serve(t, apply_server, host_s + apply_s) if host_s + apply_s > 0 else t
            push(heap, (start + host_s + apply_s, w, _APPLY))
    return UpdateLog(
        worker=out_worker,
        read_version=out_version,
        read_time_s=out_read,
        apply_time_s=out_apply,
        num_workers=num_workers,
    )


#: Relative width of an instant: events whose times differ by less than this (times a time) are
#: simultaneous. Two times equal in exact arithmetic (a worker's push reaching a lane as another's compute
#: ends, both two services and a compute after their start) differ in the last bits of their float sums,
#: and which of them a FIFO lane serves first then depends on the rounding of an unrelated cost: a
#: 1 us longer latency put 2 in-process workers into another start and moved their step by -1.5 %.
#: 1e-12 is ten thousand float64 ulps, far below any cost a scenario prices.
INSTANT = 1e-12


def _pop_instant(heap: list[tuple[float, int, int]]) -> tuple[float, int, int]:
    """The next event in (instant, worker, kind) order: of the events within
    :data:`INSTANT` of the earliest, the lowest (worker, kind), at its own time;
    the snapshot of a pull that waited for its server comes after every other
    event of its instant (the server's job before it may be an apply ending then)."""
    first = heapq.heappop(heap)
    if not heap or heap[0][0] > first[0] * (1 + INSTANT):
        return first
    near = [first]
    while heap and heap[0][0] <= first[0] * (1 + INSTANT):
        near.append(heapq.heappop(heap))
    chosen = min(near, key=lambda e: (e[2] == _LATE_READ, e[1], e[2]))
    for e in near:
        if e is not chosen:
            heapq.heappush(heap, e)
    return chosen


@dataclass(frozen=True)
class InFlight:
    """One worker's share of an asynchronous run, from its trace.

    Attributes:
        worker: worker id.
        updates_per_s: its applied updates per second.
        in_flight_s: mean seconds from reading the parameters to its update landing.
        busy_share: fraction of the run it had an update in flight
            (``updates_per_s * in_flight_s``; 1 with immediate pulls).
        predicted_staleness: the others' update rate times ``in_flight_s``.
        measured_staleness: its updates' mean staleness.
    """

    worker: int
    updates_per_s: float
    in_flight_s: float
    busy_share: float
    predicted_staleness: float
    measured_staleness: float


def in_flight(result: Result) -> list[InFlight]:
    """Per worker: the law "staleness = the others' update rate x my time in flight", against the measurement.

    ``result`` is an asynchronous run with staleness and a trace whose
    ``compute`` events start when a worker read the parameters, and a curve
    whose times are when each update landed (what :mod:`distsim.real` records).
    """
    if result.staleness is None or result.curve is None or result.trace is None:
        missing = next(f for f in ("staleness", "curve", "trace") if getattr(result, f) is None)
        raise InputError(f"result.{missing}", None, "an asynchronous run with staleness, a curve and a trace")
    compute = sorted((e for e in result.trace.events() if e.kind == "compute"), key=lambda e: e.step)
    start = np.array([e.start_s for e in compute])
    end = np.asarray(result.curve.time_s)
    worker, stale = result.staleness.worker, result.staleness.staleness
    if len(start) != len(end):
        raise InputError("result.trace", f"{len(start)} compute events",
                         f"one per update of the curve ({len(end)}): a trace that matches the curve")
    span = float(end[-1] - start[0])
    rows = []
    for w in np.unique(worker):
        mine = worker == w
        rate, others = mine.sum() / span, (~mine).sum() / span
        flight = float(np.mean(end[mine] - start[mine]))
        rows.append(InFlight(int(w), float(rate), flight, float(rate * flight), float(others * flight),
                             float(stale[mine].mean())))
    return rows
