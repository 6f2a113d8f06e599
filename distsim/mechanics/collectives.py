"""Gradient summation algorithms as explicit schedules, with alpha-beta costs.

A :class:`Schedule` lists every :class:`Transfer` (who sends which chunk to
whom, at which step). The same schedule is executed on NumPy arrays by
:func:`execute` (so tests and the numerics can check that every rank really
ends with the sum), priced by :meth:`Schedule.time_s`, and drawn by the plots.

Ranks, chunks, steps:

* Each rank's message (the flat gradient, ``message_bytes`` long) is cut into
  ``num_chunks`` chunks with ``np.array_split``.
* Transfers with the same ``step`` happen at the same time. ``op="reduce"``
  adds the source chunk, as it was at the start of the step, into the
  destination chunk; ``op="copy"`` overwrites the destination chunk with it.
* Ranks ``0..num_inputs-1`` contribute a gradient. Some algorithms add
  server ranks after them that start with zeros: the parameter-server shards
  (``"parameter_server"``) and the host CPU of CentralStorage
  (``"reduce_to_one"`` with ``extra_root=True``).
* ``result_ranks`` end with the full sum. For ``"parameter_server"`` these are
  the workers; PS shard ``s`` (rank ``num_inputs + s``) ends holding the sum of
  its own chunk ``s`` only, which is what a variable shard is.

Cost model (alpha-beta with ports): in each step every rank has one full-duplex
port to the intra-node link and every node one full-duplex NIC to the
inter-node link, shared by the ranks on that node. A step takes
``alpha + bytes / bandwidth`` of its busiest port (in or out), taking the
slower of the intra and inter classes when a step uses both. The time of the
additions themselves is neglected (they run at memory bandwidth, far above
link bandwidth). This reproduces the textbook formulas and adds PS and NIC contention for
free. :mod:`distsim.mechanics.collective_costs` gives the same price in
closed form (:func:`cost_model`), without building the schedule; build one
only to execute it on arrays, animate it or inspect it.

Bandwidths are in bytes per second, latencies in seconds, sizes in bytes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from distsim.mechanics.collective_costs import CostModel, cost_model, resolve_options
from distsim.scenario import ALGORITHMS

__all__ = ["ALGORITHMS", "OPS", "CostModel", "Schedule", "Transfer", "build_schedule", "chunk_sizes",
           "closed_form_time_s", "cost_model", "execute"]

OPS: tuple[str, ...] = ("reduce", "copy")


@dataclass(frozen=True)
class Transfer:
    """One chunk sent from one rank to another.

    Attributes:
        step: time step; transfers of one step run concurrently.
        src: sending rank.
        dst: receiving rank.
        chunk: chunk index (0..num_chunks-1).
        bytes: size of the chunk in bytes.
        op: ``"reduce"`` (dst += src) or ``"copy"`` (dst = src).
    """

    step: int
    src: int
    dst: int
    chunk: int
    bytes: int
    op: str


@dataclass
class Schedule:
    """An all-reduce (or push/pull) as explicit transfers, plus its cost.

    Attributes:
        algorithm: one of :data:`ALGORITHMS`.
        num_ranks: ranks taking part, including server ranks.
        num_chunks: chunks each rank's message is split into.
        transfers: all transfers, sorted by step.
        message_bytes: size of one rank's message in bytes.
        num_inputs: ranks ``0..num_inputs-1`` contribute a gradient; the
            others start with zeros.
        result_ranks: ranks that end with the full sum.
        node_of_rank: host (node) of each rank; transfers between nodes use
            the inter-node link and share that node's NIC.
    """

    algorithm: str
    num_ranks: int
    num_chunks: int
    transfers: tuple[Transfer, ...]
    message_bytes: int
    num_inputs: int
    result_ranks: tuple[int, ...]
    node_of_rank: tuple[int, ...]
    _columns: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def num_steps(self) -> int:
        return max((t.step for t in self.transfers), default=-1) + 1

    @property
    def chunk_bytes(self) -> np.ndarray:
        """Bytes in each chunk."""
        return chunk_sizes(self.message_bytes, self.num_chunks)

    def _arrays(self) -> dict[str, np.ndarray]:
        if not self._columns:
            cols = {
                name: np.array([getattr(t, name) for t in self.transfers], dtype=np.int64)
                for name in ("step", "src", "dst", "bytes")
            }
            node = np.asarray(self.node_of_rank, dtype=np.int64)
            cols["inter"] = node[cols["src"]] != node[cols["dst"]]
            self._columns.update(cols)
        return self._columns

    def step_times_s(
        self,
        latency_s: float,
        bandwidth_Bps: float,
        inter_latency_s: float | None = None,
        inter_bandwidth_Bps: float | None = None,
    ) -> np.ndarray:
        """Seconds each step takes (see the module docstring for the model).

        ``latency_s``/``bandwidth_Bps`` describe the intra-node link (one port
        per rank); ``inter_*`` the inter-node link (one NIC per node), and
        default to the intra values.
        """
        _check_link(latency_s, bandwidth_Bps, "latency_s", "bandwidth_Bps")
        inter_latency_s = latency_s if inter_latency_s is None else inter_latency_s
        inter_bandwidth_Bps = bandwidth_Bps if inter_bandwidth_Bps is None else inter_bandwidth_Bps
        _check_link(inter_latency_s, inter_bandwidth_Bps, "inter_latency_s", "inter_bandwidth_Bps")
        intra_bytes, inter_bytes, intra_used, inter_used = _busiest_port_bytes(self)
        return np.maximum(
            np.where(intra_used, latency_s + intra_bytes / bandwidth_Bps, 0.0),
            np.where(inter_used, inter_latency_s + inter_bytes / inter_bandwidth_Bps, 0.0),
        )

    def time_s(
        self,
        latency_s: float,
        bandwidth_Bps: float,
        inter_latency_s: float | None = None,
        inter_bandwidth_Bps: float | None = None,
    ) -> float:
        """Total alpha-beta time of the schedule in seconds."""
        return float(self.step_times_s(latency_s, bandwidth_Bps, inter_latency_s, inter_bandwidth_Bps).sum())

    def algbw_Bps(self, time_s: float) -> float:
        """Algorithm bandwidth: message bytes / time (NCCL's algbw)."""
        return self.message_bytes / time_s

    def busbw_Bps(self, time_s: float) -> float:
        """Bus bandwidth: algbw * 2(p-1)/p for all-reduce over the p
        contributing ranks (NCCL's busbw), comparable with link speed."""
        p = self.num_inputs
        return self.algbw_Bps(time_s) * 2 * (p - 1) / p

    def bytes_sent(self) -> np.ndarray:
        """Bytes each rank sends over the whole schedule."""
        c = self._arrays()
        return np.bincount(c["src"], weights=c["bytes"], minlength=self.num_ranks)


def _busiest_port_bytes(schedule: Schedule) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per step: bytes through the busiest intra-node port (one per rank) and
    the busiest node NIC (shared by a node's ranks), counting the larger of
    in and out, and whether the step uses each link class."""
    c = schedule._arrays()
    n_steps = schedule.num_steps
    node = np.asarray(schedule.node_of_rank, dtype=np.int64)
    out = []
    for is_inter, port in ((False, np.arange(schedule.num_ranks)), (True, node)):
        m = c["inter"] == is_inter
        n_ports = int(port.max()) + 1 if len(port) else 1
        sent = np.zeros((n_steps, n_ports))
        received = np.zeros((n_steps, n_ports))
        np.add.at(sent, (c["step"][m], port[c["src"][m]]), c["bytes"][m])
        np.add.at(received, (c["step"][m], port[c["dst"][m]]), c["bytes"][m])
        used = np.zeros(n_steps, dtype=bool)
        used[c["step"][m]] = True
        out.append((np.maximum(sent, received).max(axis=1, initial=0.0), used))
    (intra, intra_used), (inter, inter_used) = out
    return intra, inter, intra_used, inter_used


def _check_link(latency_s: float, bandwidth_Bps: float, lat_name: str, bw_name: str) -> None:
    if not latency_s >= 0:
        raise ValueError(f"{lat_name}={latency_s!r}; allowed: >= 0 seconds")
    if not bandwidth_Bps > 0:
        raise ValueError(f"{bw_name}={bandwidth_Bps!r}; allowed: > 0 bytes/s")


def chunk_sizes(message_bytes: int, num_chunks: int) -> np.ndarray:
    """Bytes per chunk when ``message_bytes`` are split like ``np.array_split``."""
    base, extra = divmod(int(message_bytes), int(num_chunks))
    return np.array([base + 1] * extra + [base] * (num_chunks - extra), dtype=np.int64)


class _Builder:
    """Collects transfers; sizes come from the chunk table."""

    def __init__(self, message_bytes: int, num_chunks: int):
        self.sizes = chunk_sizes(message_bytes, num_chunks)
        self.transfers: list[Transfer] = []

    def send(self, step: int, src: int, dst: int, chunks, op: str) -> None:
        for c in np.atleast_1d(chunks):
            self.transfers.append(Transfer(int(step), int(src), int(dst), int(c), int(self.sizes[c]), op))


def _ring_reduce_scatter(b: _Builder, ranks, groups, step0: int) -> int:
    """Ring reduce-scatter over ``ranks`` of chunk groups (``groups[j]`` is
    the list of chunks in super-chunk j, one per rank). Afterwards ranks[i]
    holds super-chunk (i + 1) mod p reduced. Returns the next free step."""
    p = len(ranks)
    for s in range(p - 1):
        for i, r in enumerate(ranks):
            b.send(step0 + s, r, ranks[(i + 1) % p], groups[(i - s) % p], "reduce")
    return step0 + p - 1


def _ring_all_gather(b: _Builder, ranks, groups, step0: int) -> int:
    """Ring all-gather, assuming ranks[i] holds super-chunk (i + 1) mod p."""
    p = len(ranks)
    for s in range(p - 1):
        for i, r in enumerate(ranks):
            b.send(step0 + s, r, ranks[(i + 1) % p], groups[(i + 1 - s) % p], "copy")
    return step0 + p - 1


def _ring(p: int, message_bytes: int) -> tuple[_Builder, int]:
    b = _Builder(message_bytes, p)
    groups = [[j] for j in range(p)]
    step = _ring_reduce_scatter(b, list(range(p)), groups, 0)
    _ring_all_gather(b, list(range(p)), groups, step)
    return b, p


def _tree(p: int, message_bytes: int) -> tuple[_Builder, int]:
    """Binomial tree: reduce to rank 0, then broadcast back, one message a step."""
    b = _Builder(message_bytes, 1)
    levels = math.ceil(math.log2(p)) if p > 1 else 0
    for k in range(levels):
        d = 1 << k
        for r in range(d, p, 2 * d):
            b.send(k, r, r - d, 0, "reduce")
    for j, k in enumerate(reversed(range(levels))):
        d = 1 << k
        for r in range(0, p, 2 * d):
            if r + d < p:
                b.send(levels + j, r, r + d, 0, "copy")
    return b, 1


def _halving_doubling(p: int, message_bytes: int) -> tuple[_Builder, int]:
    """Rabenseifner: recursive-halving reduce-scatter then recursive-doubling
    all-gather on the largest power of two p2 <= p. The p - p2 extra ranks
    first fold their whole message into a partner and get the result back at
    the end (two extra full-message steps)."""
    p2 = 1 << (p.bit_length() - 1)
    extra = p - p2
    b = _Builder(message_bytes, p2)
    every_chunk = np.arange(p2)
    step = 0
    if extra:
        for r in range(p2, p):
            b.send(step, r, r - p2, every_chunk, "reduce")
        step += 1
    lo = np.zeros(p2, dtype=int)
    hi = np.full(p2, p2)
    history = []
    d = p2 // 2
    while d >= 1:
        mid = (lo + hi) // 2
        for r in range(p2):
            keep_low = (r & d) == 0
            send = np.arange(mid[r], hi[r]) if keep_low else np.arange(lo[r], mid[r])
            b.send(step, r, r ^ d, send, "reduce")
        history.append((d, lo.copy(), hi.copy()))
        low_half = (np.arange(p2) & d) == 0
        hi = np.where(low_half, mid, hi)
        lo = np.where(low_half, lo, mid)
        step += 1
        d //= 2
    for d, lo_before, hi_before in reversed(history):
        for r in range(p2):
            b.send(step, r, r ^ d, np.arange(lo[r], hi[r]), "copy")
        lo, hi = lo_before, hi_before
        step += 1
    if extra:
        for r in range(p2, p):
            b.send(step, r - p2, r, every_chunk, "copy")
    return b, p2


def _two_level(rows: int, cols: int, message_bytes: int) -> tuple[_Builder, int]:
    """Rank ``row * cols + col``: ring reduce-scatter along each row, ring
    all-reduce of each row-owned piece down each column, ring all-gather along
    rows. Chunk ``j * rows + k`` is piece k of super-chunk j."""
    b = _Builder(message_bytes, rows * cols)
    groups = [list(range(j * rows, (j + 1) * rows)) for j in range(cols)]
    row_ranks = [[row * cols + c for c in range(cols)] for row in range(rows)]
    step = 0
    if cols > 1:
        for ranks in row_ranks:
            _ring_reduce_scatter(b, ranks, groups, 0)
        step = cols - 1
    if rows > 1:
        for c in range(cols):
            owned = groups[(c + 1) % cols]
            pieces = [[chunk] for chunk in owned]
            col_ranks = [row * cols + c for row in range(rows)]
            after_rs = _ring_reduce_scatter(b, col_ranks, pieces, step)
            end = _ring_all_gather(b, col_ranks, pieces, after_rs)
        step = end
    if cols > 1:
        for ranks in row_ranks:
            _ring_all_gather(b, ranks, groups, step)
    return b, rows * cols


def _reduce_to_one(p: int, message_bytes: int, root: int, extra_root: bool) -> tuple[_Builder, int]:
    b = _Builder(message_bytes, 1)
    n = p + 1 if extra_root else p
    root = p if extra_root else root
    others = [r for r in range(n) if r != root]
    for r in others:
        b.send(0, r, root, 0, "reduce")
    for r in others:
        b.send(1, root, r, 0, "copy")
    return b, 1


def _parameter_server(workers: int, shards: int, message_bytes: int) -> tuple[_Builder, int]:
    b = _Builder(message_bytes, shards)
    for w in range(workers):
        for s in range(shards):
            b.send(0, w, workers + s, s, "reduce")
    for w in range(workers):
        for s in range(shards):
            b.send(1, workers + s, w, s, "copy")
    return b, shards


def build_schedule(algorithm: str, num_ranks: int, message_bytes: int, **options) -> Schedule:
    """Build the schedule of ``algorithm`` for ``num_ranks`` contributing ranks.

    Args:
        algorithm: one of :data:`ALGORITHMS`.
        num_ranks: replicas (or PS workers) whose gradients are summed.
        message_bytes: gradient bytes per rank.
        **options:
            ``ranks_per_node`` (hierarchical, and optional for the others):
                consecutive ranks on one node; hierarchical needs it to
                divide ``num_ranks``. Defaults: hierarchical and flat
                algorithms put all ranks on one node.
            ``dims`` (torus2d): ``(rows, cols)`` with rows * cols == num_ranks;
                default: the most square factorisation.
            ``root`` (reduce_to_one): the rank that sums, default 0.
            ``extra_root`` (reduce_to_one): sum on an extra rank (the host
                CPU of CentralStorage) that contributes nothing; default False.
            ``num_shards`` (parameter_server): PS shards k, default 1.
            ``ps_on_worker_nodes`` (parameter_server): put shard s on worker
                s's node instead of its own node; default False.

    Raises:
        ValueError: unknown algorithm or option, or an invalid value.
    """
    resolved = resolve_options(algorithm, num_ranks, options)
    p = int(num_ranks)
    if isinstance(message_bytes, bool) or not isinstance(message_bytes, (int, np.integer)) or message_bytes < 0:
        raise ValueError(f"message_bytes={message_bytes!r}; allowed: an integer >= 0")
    rpn = resolved["ranks_per_node"]
    num_inputs = p
    result_ranks = tuple(range(p))
    nodes = tuple(r // rpn for r in range(p))
    if algorithm == "ring":
        b, chunks = _ring(p, message_bytes)
    elif algorithm == "tree":
        b, chunks = _tree(p, message_bytes)
    elif algorithm == "halving_doubling":
        b, chunks = _halving_doubling(p, message_bytes)
    elif algorithm == "hierarchical":
        b, chunks = _two_level(p // rpn, rpn, message_bytes)
    elif algorithm == "torus2d":
        rows, cols = resolved["dims"]
        b, chunks = _two_level(rows, cols, message_bytes)
        nodes = tuple(range(p))  # every TPU core has its own ICI ports
    elif algorithm == "reduce_to_one":
        extra_root = resolved["extra_root"]
        b, chunks = _reduce_to_one(p, message_bytes, resolved["root"], extra_root)
        if extra_root:
            nodes = nodes + (0,)  # the host CPU sits on the first node
            result_ranks = tuple(range(p + 1))
    else:
        k = resolved["num_shards"]
        b, chunks = _parameter_server(p, k, message_bytes)
        if resolved["ps_on_worker_nodes"]:
            nodes = tuple(range(p)) + tuple(s % p for s in range(k))
        else:
            nodes = tuple(range(p + k))
    return Schedule(
        algorithm=algorithm,
        num_ranks=len(nodes),
        num_chunks=chunks,
        transfers=tuple(sorted(b.transfers, key=lambda t: t.step)),
        message_bytes=int(message_bytes),
        num_inputs=num_inputs,
        result_ranks=result_ranks,
        node_of_rank=nodes,
    )


def execute(schedule: Schedule, arrays: list[np.ndarray]) -> list[np.ndarray]:
    """Run ``schedule`` on real arrays and return every rank's final array.

    ``arrays`` holds one flat array per contributing rank
    (``schedule.num_inputs``) or one per rank (``schedule.num_ranks``); server
    ranks not given start with zeros. Each array is split into
    ``schedule.num_chunks`` chunks with ``np.array_split``. The inputs are not
    modified.
    """
    if len(arrays) not in (schedule.num_inputs, schedule.num_ranks):
        raise ValueError(
            f"got {len(arrays)} arrays; allowed: {schedule.num_inputs} (contributing ranks) "
            f"or {schedule.num_ranks} (all ranks)"
        )
    arrays = [np.asarray(a) for a in arrays]
    shapes = {a.shape for a in arrays}
    if len(shapes) != 1 or arrays[0].ndim != 1:
        raise ValueError(f"arrays must be flat and of one length; got shapes {sorted(shapes)}")
    state = [a.copy() for a in arrays]
    state += [np.zeros_like(arrays[0]) for _ in range(schedule.num_ranks - len(arrays))]
    bounds = np.concatenate([[0], np.cumsum([len(c) for c in np.array_split(state[0], schedule.num_chunks)])])
    by_step: dict[int, list[Transfer]] = {}
    for t in schedule.transfers:
        by_step.setdefault(t.step, []).append(t)
    for step in sorted(by_step):
        before = [a.copy() for a in state]
        for t in by_step[step]:
            lo, hi = bounds[t.chunk], bounds[t.chunk + 1]
            if t.op == "reduce":
                state[t.dst][lo:hi] += before[t.src][lo:hi]
            elif t.op == "copy":
                state[t.dst][lo:hi] = before[t.src][lo:hi]
            else:
                raise ValueError(f"transfer op={t.op!r}; allowed: {OPS}")
    return state


def closed_form_time_s(algorithm: str, num_ranks: int, message_bytes, latency_s, bandwidth_Bps,
                       inter_latency_s=None, inter_bandwidth_Bps=None, ranks_per_node=None, num_shards=1):
    """Seconds of ``algorithm`` over ``num_ranks`` ranks for ``message_bytes``
    per rank (vectorised over the sizes and links): the closed form of the
    schedule (:func:`cost_model`), here with the textbook's arguments.
    ``ranks_per_node`` places consecutive ranks on one node (for
    ``torus2d``: the columns of the grid); ``num_shards`` is the parameter
    server's shard count."""
    options: dict = {}
    if ranks_per_node is not None:
        options = {"dims": (int(num_ranks) // int(ranks_per_node), int(ranks_per_node))} if algorithm == "torus2d" \
            else {"ranks_per_node": int(ranks_per_node)}
    if algorithm == "parameter_server":
        options = {"num_shards": int(num_shards)}
    return cost_model(algorithm, int(num_ranks), **options).time_s(message_bytes, latency_s, bandwidth_Bps,
                                                                   inter_latency_s, inter_bandwidth_Bps)
