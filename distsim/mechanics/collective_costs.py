"""Closed-form costs of the collectives in :mod:`distsim.mechanics.collectives`.

:meth:`~distsim.mechanics.collectives.Schedule.time_s` prices an explicit
schedule transfer by transfer: every step costs ``alpha + bytes / bandwidth``
of its busiest port (one full-duplex port per rank on the intra-node link, one
NIC per node on the inter-node link, shared by that node's ranks), the slower
link class when a step uses both. Building that schedule costs O(p^2) for p
ranks. This module gives the same price from the structure of each algorithm:
its steps fall into a handful of *classes* whose busiest-port bytes are equal,
and the classes and their counts follow from a few integer formulas.

Two modes, one set of formulas. Each rank's message of ``n`` bytes is cut
into ``c`` chunks like ``np.array_split``: ``e = n mod c`` chunks of
``floor(n / c) + 1`` bytes first, then the rest of ``floor(n / c)``.

* ``exact``: integer chunk sizes, so the result equals the explicit schedule's
  price for any ``n`` (tests compare them for every algorithm up to 64 ranks);
* fluid (the default, vectorised over NumPy arrays of sizes and links): the
  chunks are ``n / c`` bytes each, the limit the timing engine, the sweep and
  the link calibration use (they price fractional bucket sizes and fit bytes
  per message byte).

Cost of building a model: O(1) for ring, reduce_to_one, parameter_server,
hierarchical and torus2d; O(log^2 p) for tree (a floor-sum per level counts
the node-crossing pairs); O(log p) for halving_doubling unless the nodes hold
a number of ranks that is not a power of two, where its node loads are
counted rank by rank (O(p log p), NumPy). Evaluating a model is O(number of
classes), at most O(log p).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from distsim.scenario import ALGORITHMS

#: Options each algorithm accepts (see :func:`distsim.mechanics.collectives.build_schedule`).
OPTIONS: dict[str, frozenset[str]] = {
    "ring": frozenset({"ranks_per_node"}),
    "tree": frozenset({"ranks_per_node"}),
    "halving_doubling": frozenset({"ranks_per_node"}),
    "hierarchical": frozenset({"ranks_per_node"}),
    "reduce_to_one": frozenset({"ranks_per_node", "root", "extra_root"}),
    "parameter_server": frozenset({"num_shards", "ps_on_worker_nodes"}),
    "torus2d": frozenset({"dims"}),
}


def positive_int(name: str, value: object) -> int:
    """``value`` as an int >= 1, or a ValueError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name}={value!r}; allowed: an integer >= 1")
    return int(value)


def square_dims(p: int) -> tuple[int, int]:
    """The most square ``(rows, cols)`` with ``rows * cols == p``, rows <= cols."""
    rows = int(math.isqrt(p))
    while p % rows:
        rows -= 1
    return rows, p // rows


def resolve_options(algorithm: str, num_ranks: int, options: dict) -> dict:
    """Check a collective request and fill in every option's default.

    Returns ``ranks_per_node``, ``root``, ``extra_root``, ``num_shards``,
    ``ps_on_worker_nodes`` and ``dims`` (those the algorithm does not use
    keep their defaults). Raises ValueError for an unknown algorithm or
    option, or an invalid value.
    """
    if algorithm not in ALGORITHMS:
        raise ValueError(f"algorithm={algorithm!r}; allowed: {ALGORITHMS}")
    p = positive_int("num_ranks", num_ranks)
    allowed = OPTIONS[algorithm]
    unknown = sorted(set(options) - allowed)
    if unknown:
        raise ValueError(f"option(s) {unknown} not understood by algorithm={algorithm!r}; allowed: {sorted(allowed)}")
    rpn = positive_int("ranks_per_node", options.get("ranks_per_node", p))
    if p % rpn:
        raise ValueError(f"ranks_per_node={rpn} does not divide num_ranks={p}; allowed: a divisor of {p}")
    root = options.get("root", 0)
    if isinstance(root, bool) or not isinstance(root, (int, np.integer)) or not 0 <= root < p:
        raise ValueError(f"root={root!r}; allowed: a rank in 0..{p - 1}")
    dims = options.get("dims") or square_dims(p)
    if len(dims) != 2 or min(dims) < 1 or int(dims[0]) * int(dims[1]) != p:
        raise ValueError(f"dims={tuple(dims)!r}; allowed: (rows, cols) with rows * cols == num_ranks={p}")
    return {
        "ranks_per_node": rpn,
        "root": int(root),
        "extra_root": bool(options.get("extra_root", False)),
        "num_shards": positive_int("num_shards", options.get("num_shards", 1)),
        "ps_on_worker_nodes": bool(options.get("ps_on_worker_nodes", False)),
        "dims": (int(dims[0]), int(dims[1])),
    }


def num_chunks(algorithm: str, num_ranks: int, options: dict) -> int:
    """Chunks each rank's message is cut into (resolved ``options``)."""
    if algorithm in ("ring", "hierarchical", "torus2d"):
        return num_ranks
    if algorithm == "halving_doubling":
        return 1 << (num_ranks.bit_length() - 1)
    if algorithm == "parameter_server":
        return options["num_shards"]
    return 1


# ------------------------------------------------------------------ step classes
#
# A class is (count, intra_bytes, inter_bytes): ``count`` steps whose busiest
# intra-node port carries ``intra_bytes`` and busiest NIC ``inter_bytes``
# (None: the steps do not use that link class). ``base`` is the size of a
# small chunk (an array in fluid mode) and ``e`` the number of chunks one
# byte larger (0 in fluid mode).


def _count_residues_below(lo: int, hi: int, modulus: int, bound: int) -> int:
    """How many integers u in [lo, hi] have ``u mod modulus < bound`` (bound <= modulus)."""

    def below(x: int) -> int:  # integers in [0, x) (negative x: minus those in [x, 0))
        return (x // modulus) * bound + min(x % modulus, bound)

    return below(hi + 1) - below(lo)


def _ring(p: int, per_node: int, base, e: int) -> list:
    steps = 2 * (p - 1)
    nodes = p // per_node
    if p == 1:
        return []
    largest = base + (e > 0)
    if nodes == 1:
        return [(steps, largest, None)]
    if per_node == 1:
        return [(steps, None, largest)]
    # Node u's last rank sends to the next node's first: in reduce-scatter step s
    # the chunks crossing nodes are those = (L-1-s) mod L, in all-gather step s
    # those = (L-s) mod L. Every other chunk moves inside a node.
    L = per_node

    def crossing_large(bound: int) -> int:  # steps whose crossing residue r has r < bound
        bound = min(bound, L)
        return (_count_residues_below(L + 1 - p, L - 1, L, bound)
                + _count_residues_below(L + 2 - p, L, L, bound))

    if e == 0:
        return [(steps, base, base)]
    if e == 1:  # only chunk 0 is large: it crosses when r == 0, else it stays inside
        crossing = crossing_large(1)
        return [(crossing, base, base + 1), (steps - crossing, base + 1, base)]
    # Chunks 0 and 1 are large and differ mod L, so some large chunk stays inside.
    crossing = crossing_large(e)
    return [(crossing, base + 1, base + 1), (steps - crossing, base + 1, base)]


def floor_sum(n: int, m: int, a: int, b: int) -> int:
    """``sum(floor((a i + b) / m) for i in range(n))`` in O(log) steps (a, b >= 0, m >= 1)."""
    total = 0
    while n > 0:
        if a >= m:
            total += (n - 1) * n // 2 * (a // m)
            a %= m
        if b >= m:
            total += n * (b // m)
            b %= m
        y_max = a * n + b
        if y_max < m:
            break
        n, b, m, a = y_max // m, y_max % m, a, m
    return total


def _tree(p: int, per_node: int, n) -> list:
    """Binomial tree: at level d = 2^k the pairs (a, a + d), a a multiple of 2d,
    exchange the whole message. A node's ranks never send (or receive) twice in
    one level, so a level costs one message on each link class it uses."""
    counts: dict[tuple[bool, bool], int] = {}
    d = 1
    while d < p:
        pairs = (p - 1 - d) // (2 * d) + 1
        if d >= per_node:
            crossing = pairs
        else:  # a + d is on the next node when a mod L >= L - d
            crossing = floor_sum(pairs, per_node, 2 * d, d) - floor_sum(pairs, per_node, 2 * d, 0)
        key = (pairs > crossing, crossing > 0)
        counts[key] = counts.get(key, 0) + 2  # the reduce and the broadcast level
        d *= 2
    return [(count, n if intra else None, n if inter else None) for (intra, inter), count in counts.items()]


def _block_bytes(d: int, j, base, e: int):
    """Bytes of the aligned block ``j`` of ``d`` chunks."""
    return d * base + np.clip(e - np.asarray(j) * d, 0, d)


def _halving_doubling(p: int, per_node: int, n, base, e: int) -> list:
    """Rabenseifner (see ``collectives._halving_doubling``): at distance d,
    halving and doubling each move one aligned block of d chunks per rank;
    the p - p2 extra ranks fold in and out with the whole message."""
    p2 = 1 << (p.bit_length() - 1)
    nodes = p // per_node
    out = []
    if nodes == 1 or per_node == 1:
        inside = nodes == 1
        if p > p2:
            out.append((2, n, None) if inside else (2, None, n))
        d = 1
        while d < p2:
            block = _block_bytes(d, 0, base, e)
            out.append((2, block, None) if inside else (2, None, block))
            d *= 2
        return out
    if per_node & (per_node - 1) == 0:
        # Nodes are aligned blocks of L = 2^a ranks: below distance L partners
        # share a node; from L on, all L ranks of a node send the same block
        # to one other node over the shared NIC.
        if p > p2:
            out.append((2, None, per_node * n))
        d = 1
        while d < p2:
            block = _block_bytes(d, 0, base, e)
            out.append((2, block, None) if d < per_node else (2, None, per_node * block))
            d *= 2
        return out
    return _halving_doubling_by_rank(p, per_node, n, base, e)


def _halving_doubling_by_rank(p: int, per_node: int, n, base, e: int) -> list:
    """Halving-doubling on nodes of a size that is not a power of two: each
    step's busiest port and NIC, counted rank by rank (O(p) per step)."""
    p2 = 1 << (p.bit_length() - 1)
    nodes = p // per_node
    out = []
    if p > p2:  # fold pairs are p2 > L apart, so they always cross nodes
        senders = np.bincount(np.arange(p2, p) // per_node, minlength=nodes).max()
        receivers = np.bincount(np.arange(p - p2) // per_node, minlength=nodes).max()
        out.append((2, None, int(max(senders, receivers)) * n))
    rank = np.arange(p2)
    node = rank // per_node
    d = 1
    while d < p2:
        partner = rank ^ d
        crossing = node != node[partner]
        # Halving sends the partner's block and receives the own one; doubling
        # the reverse. The loads only swap directions, so both cost the same.
        sent = _block_bytes(d, partner // d, base, e)
        received = _block_bytes(d, rank // d, base, e)
        inter = None
        if crossing.any():
            out_ = np.bincount(node[crossing], weights=sent[crossing], minlength=nodes)
            in_ = np.bincount(node[crossing], weights=received[crossing], minlength=nodes)
            inter = max(out_.max(), in_.max())
        intra = sent[~crossing].max() if not crossing.all() else None
        out.append((2, intra, inter))
        d *= 2
    return out


def _two_level(rows: int, cols: int, base, e: int, own_ports: bool) -> list:
    """Ring reduce-scatter along rows of ``cols`` ranks (one node each), ring
    all-reduce of each row-owned group of ``rows`` chunks down the columns,
    ring all-gather along rows. ``own_ports`` (torus2d): every rank has its
    own port on one link, so the column steps carry one chunk per port
    instead of a node's ``cols`` chunks on one NIC."""
    out = []
    if cols > 1:  # every group of `rows` chunks moves in each row step; group 0 is the largest
        group = rows * base + min(e, rows)
        out.append((2 * (cols - 1), None, group) if own_ports else (2 * (cols - 1), group, None))
    if rows > 1:
        if own_ports:
            column = base + (e > 0)
        else:  # a node's NIC carries chunk t of every group: t = 0 is the largest
            column = cols * base + min(cols, -(-e // rows))
        out.append((2 * (rows - 1), None, column))
    return out


def _reduce_to_one(p: int, per_node: int, root: int, extra_root: bool, n) -> list:
    """Everyone sends the whole message to the root, then the root sends it
    back: the root's port carries its node's messages, its NIC the others'."""
    same_node = per_node if extra_root else per_node - 1
    crossing = p - per_node
    if same_node == 0 and crossing == 0:
        return []
    return [(2, same_node * n if same_node else None, crossing * n if crossing else None)]


def _parameter_server(workers: int, shards: int, co_located: bool, n, base, e: int) -> list:
    """Every worker pushes chunk s to shard s, then pulls it back. On their
    own hosts a shard's NIC takes ``workers`` chunks and a worker's NIC the
    whole message. Co-located, shard s lives on worker ``s mod w``'s node:
    that worker's chunks stay inside, the others' cross."""
    largest = base + (e > 0)
    if not co_located:
        return [(2, None, np.maximum(n, workers * largest))]

    def on_node(u: int):  # bytes of the shards on node u
        count = (shards - u + workers - 1) // workers if u < shards else 0
        large = (e - u + workers - 1) // workers if u < e else 0
        return count * base + large

    if workers == 1:
        return [(2, on_node(0), None)]
    nic = np.maximum(n - on_node(workers - 1), (workers - 1) * on_node(0))
    return [(2, on_node(0), nic)]


def step_classes(algorithm: str, num_ranks: int, options: dict, message_bytes, exact: bool) -> list:
    """The steps of one collective as classes ``(count, intra_bytes, inter_bytes)``.

    ``options`` are resolved (:func:`resolve_options`). ``exact``: integer
    chunks of ``message_bytes`` (a non-negative int); otherwise fluid chunks
    of a scalar size (bytes are then linear in it).
    """
    p = num_ranks
    chunks = num_chunks(algorithm, p, options)
    if exact:
        n = int(message_bytes)
        base, e = divmod(n, chunks)
    else:
        n = float(message_bytes)
        base, e = n / chunks, 0
    per_node = options["ranks_per_node"]
    if algorithm == "ring":
        return _ring(p, per_node, base, e)
    if algorithm == "tree":
        return _tree(p, per_node, n)
    if algorithm == "halving_doubling":
        return _halving_doubling(p, per_node, n, base, e)
    if algorithm == "hierarchical":
        return _two_level(p // per_node, per_node, base, e, own_ports=False)
    if algorithm == "torus2d":
        rows, cols = options["dims"]
        return _two_level(rows, cols, base, e, own_ports=True)
    if algorithm == "reduce_to_one":
        return _reduce_to_one(p, per_node, options["root"], options["extra_root"], n)
    return _parameter_server(p, options["num_shards"], options["ps_on_worker_nodes"], n, base, e)


def price(classes: list, latency_s, bandwidth_Bps, inter_latency_s=None, inter_bandwidth_Bps=None):
    """Seconds of a collective from its step classes (NumPy broadcasting)."""
    a1 = np.asarray(latency_s, dtype=float)
    b1 = np.asarray(bandwidth_Bps, dtype=float)
    a2 = a1 if inter_latency_s is None else np.asarray(inter_latency_s, dtype=float)
    b2 = b1 if inter_bandwidth_Bps is None else np.asarray(inter_bandwidth_Bps, dtype=float)
    total = np.zeros(np.broadcast_shapes(a1.shape, b1.shape, a2.shape, b2.shape))
    for count, intra, inter in classes:
        t_intra = 0.0 if intra is None else a1 + intra / b1
        t_inter = 0.0 if inter is None else a2 + inter / b2
        total = total + count * np.maximum(t_intra, t_inter)
    return total


@dataclass(frozen=True)
class CostModel:
    """The alpha-beta cost of one collective on a fixed set of ranks, for any
    message size and links (see the module docstring)."""

    algorithm: str
    num_ranks: int
    options: tuple

    @property
    def resolved(self) -> dict:
        return dict(self.options)

    def time_s(self, message_bytes, latency_s, bandwidth_Bps, inter_latency_s=None, inter_bandwidth_Bps=None):
        """Seconds for ``message_bytes`` per rank with fluid chunks, vectorised
        over every argument (``latency_s``/``bandwidth_Bps``: the intra-node
        link; ``inter_*``: the inter-node link, default the intra values)."""
        n = np.asarray(message_bytes, dtype=float)
        classes = _fluid_classes(self.algorithm, self.num_ranks, self.options)
        scaled = [(count, None if a is None else a * n, None if b is None else b * n) for count, a, b in classes]
        return price(scaled, latency_s, bandwidth_Bps, inter_latency_s, inter_bandwidth_Bps)

    def exact_time_s(self, message_bytes: int, latency_s, bandwidth_Bps, inter_latency_s=None,
                     inter_bandwidth_Bps=None) -> np.ndarray:
        """Seconds with integer chunks: equal to the explicit schedule's
        :meth:`~distsim.mechanics.collectives.Schedule.time_s`."""
        if isinstance(message_bytes, bool) or not isinstance(message_bytes, (int, np.integer)) or message_bytes < 0:
            raise ValueError(f"message_bytes={message_bytes!r}; allowed: an integer >= 0")
        classes = step_classes(self.algorithm, self.num_ranks, self.resolved, message_bytes, exact=True)
        return price(classes, latency_s, bandwidth_Bps, inter_latency_s, inter_bandwidth_Bps)

    @property
    def num_steps(self) -> int:
        """Steps of the schedule (latency terms on the critical path)."""
        return int(sum(count for count, _, _ in _fluid_classes(self.algorithm, self.num_ranks, self.options)))


@functools.lru_cache(maxsize=1024)
def _fluid_classes(algorithm: str, num_ranks: int, options: tuple) -> list:
    """Step classes for a 1-byte fluid message: bytes per message byte."""
    return step_classes(algorithm, num_ranks, dict(options), 1.0, exact=False)


def cost_model(algorithm: str, num_ranks: int, **options) -> CostModel:
    """The closed-form :class:`CostModel` of ``build_schedule(algorithm,
    num_ranks, ...)`` (same options, same errors)."""
    resolved = resolve_options(algorithm, num_ranks, options)
    return CostModel(algorithm, int(num_ranks), tuple(sorted(resolved.items())))
