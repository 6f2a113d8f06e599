"""Run a collective's schedule on gradient vectors, fast and bit-exactly.

:func:`distsim.mechanics.collectives.execute` runs a :class:`~distsim.mechanics.collectives.Schedule`
transfer by transfer. That is the reference, but a ring all-reduce over 64
ranks has thousands of transfers, and doing them one NumPy call at a time would
make a simulated step far slower than the arithmetic it simulates.

A :class:`ReducePlan` runs the *same* schedule with the same floating-point
additions on the same operands in the same order, so it gives bit-identical
results, but batches the work:

1. Compile once: run the schedule symbolically. Every chunk value on every rank
   becomes a node of an expression DAG: a leaf (rank ``r``'s own chunk ``c``)
   or ``left + right``. A ``copy`` moves a node without arithmetic. IEEE
   addition is commutative, so ``a + b`` and ``b + a`` are one node.
2. Evaluate per gradient: all additions at the same depth of the DAG happen in
   one vectorised NumPy call. Operands are read as views where they can be
   (chunk windows of the gradient buffer, slices of the table of sums), and a
   sum overwrites an operand nobody needs any more, so a ring all-reduce keeps
   one row per chunk, hot in cache.

Server ranks (parameter-server shards, CentralStorage's host) start with
zeros; ``0 + x`` is exactly ``x``, so those additions cost nothing.

The plan also proves, at compile time, whether every result rank ends with the
very same sum for every chunk (:attr:`ReducePlan.ranks_agree`). All algorithms
in :mod:`distsim.mechanics.collectives` do, which is why replicas stay bit-identical in
synchronous training, as they do in ``MirroredStrategy``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from distsim.validation import InputError, Integer, OneOf

#: Symbolic id of an all-zero chunk (a server rank's starting value).
_ZERO = -1

_OP = OneOf(("reduce", "copy"))


@dataclass(frozen=True)
class _Operand:
    """Where one side of a level's additions comes from (see :meth:`ReducePlan.reduce`).

    Views, no copy: ``row_slice``, rows ``slice(*row_slice)`` of the table of
    sums, or ``window_slice``, chunk windows starting at elements
    ``range(*window_slice)`` of the gradient buffer. Otherwise (a copy):
    ``rows`` of the table and/or ``windows`` at the given element offsets, with
    ``from_leaf`` saying which is which when both are mixed.
    """

    row_slice: tuple[int, int, int] | None
    rows: np.ndarray | None
    windows: np.ndarray | None
    window_slice: tuple[int, int, int] | None
    from_leaf: np.ndarray | None


@dataclass(frozen=True)
class _Level:
    """One vectorised addition: ``table[out] = left + right`` (``out`` a slice, possibly ``left``'s own rows)."""

    out: tuple[int, int, int]
    left: _Operand
    right: _Operand


@dataclass(frozen=True)
class ReducePlan:
    """A compiled all-reduce: which additions to do, level by level.

    Node ids: leaves ``r * num_chunks + c`` (rank ``r``'s chunk ``c``) come
    first, then the sums, numbered level by level.

    Attributes:
        num_ranks: ranks that contribute a gradient (the schedule's ``num_inputs``).
        chunk_bounds: ``num_chunks + 1`` offsets into the flat vector (elements).
        final: ``(len(result_ranks), num_chunks)`` node holding each result
            rank's chunk.
        final_rows: the same as rows of the table of sums, or ``-1 - leaf``
            for a chunk that is a leaf (nothing was added to it).
        num_additions: chunk additions in the schedule after merging duplicates.
        num_rows: rows of the table of sums: a sum whose operand is not needed
            any more overwrites it (a ring keeps one row per chunk).
        width: elements of the longest chunk; every node is stored this wide
            (a short chunk's last slot holds a neighbour's value, added along
            but never read back).
        levels: per DAG depth, the additions done in one vectorised call.
    """

    num_ranks: int
    chunk_bounds: np.ndarray
    final: np.ndarray
    final_rows: np.ndarray
    num_additions: int
    num_rows: int
    width: int
    levels: tuple[_Level, ...]

    @property
    def num_chunks(self) -> int:
        return len(self.chunk_bounds) - 1

    @property
    def num_elements(self) -> int:
        return int(self.chunk_bounds[-1])

    @property
    def ranks_agree(self) -> bool:
        """True when every result rank ends with the same expression for every chunk."""
        return bool(np.all(self.final == self.final[0]))

    @property
    def depth(self) -> int:
        """Additions on the longest dependency chain (e.g. ``p - 1`` for a ring)."""
        return len(self.levels)

    def gradient_buffer(self, dtype) -> np.ndarray:
        """An uninitialised ``(num_ranks, n)`` array to write gradients into.

        Its memory has ``width`` spare elements at the end, so :meth:`reduce`
        reads chunk windows straight from it without a copy.
        """
        size = self.num_ranks * self.num_elements
        storage = np.zeros(size + self.width, dtype=dtype)
        return storage[:size].reshape(self.num_ranks, self.num_elements)

    def reduce(self, grads: np.ndarray) -> np.ndarray:
        """All-reduce ``grads`` of shape ``(num_ranks, n)``.

        Returns ``(n,)`` when all result ranks agree (the common case), else
        ``(len(result_ranks), n)`` with each one's own result.
        """
        n = self.num_elements
        if np.shape(grads) != (self.num_ranks, n):
            raise InputError("grads.shape", np.shape(grads),
                             f"({self.num_ranks}, {n}): one row of {n} gradient values per rank of this plan")
        grads = np.asarray(grads)
        flat = self._padded(grads)
        windows = np.lib.stride_tricks.sliding_window_view(flat, self.width)
        sums = np.empty((self.num_rows, self.width), dtype=grads.dtype)
        for level in self.levels:
            np.add(_fetch(level.left, sums, windows), _fetch(level.right, sums, windows), out=sums[slice(*level.out)])
        finals = [self.final_rows[0]] if self.ranks_agree else list(self.final_rows)
        out = np.stack([self._gather(rows, sums, flat) for rows in finals])
        return out[0] if self.ranks_agree else out

    def _padded(self, grads: np.ndarray) -> np.ndarray:
        """The gradients as one flat array with ``width`` readable elements past the end."""
        size = grads.size
        base = grads.base
        if (
            grads.flags.c_contiguous
            and isinstance(base, np.ndarray)
            and base.ndim == 1
            and base.size >= size + self.width
            and base.dtype == grads.dtype
            and base.ctypes.data == grads.ctypes.data
        ):
            return base
        flat = np.zeros(size + self.width, dtype=grads.dtype)
        flat[:size] = grads.ravel()
        return flat

    def _gather(self, rows: np.ndarray, sums: np.ndarray, flat: np.ndarray) -> np.ndarray:
        """One rank's result vector from its final row (or leaf) per chunk."""
        parts = []
        for c, row in enumerate(rows):
            lo, hi = self.chunk_bounds[c], self.chunk_bounds[c + 1]
            if row >= 0:
                parts.append(sums[row, : hi - lo])
            else:
                start = ((-1 - row) // self.num_chunks) * self.num_elements + lo
                parts.append(flat[start : start + hi - lo])
        return np.concatenate(parts)


def _fetch(op: _Operand, sums: np.ndarray, windows: np.ndarray) -> np.ndarray:
    if op.row_slice is not None:
        return sums[slice(*op.row_slice)]
    if op.window_slice is not None:
        return windows[slice(*op.window_slice)]
    # Fancy indexing, not take(): take() would first copy the whole strided window view.
    if op.from_leaf is None:
        return sums.take(op.rows, axis=0) if op.rows is not None else windows[op.windows]
    out = np.empty((len(op.from_leaf), sums.shape[1]), dtype=sums.dtype)
    out[op.from_leaf] = windows[op.windows]
    out[~op.from_leaf] = sums.take(op.rows, axis=0)
    return out


def compile_schedule(schedule, chunk_bounds: np.ndarray) -> ReducePlan:
    """Compile ``schedule`` (a :class:`distsim.mechanics.collectives.Schedule`) into a :class:`ReducePlan`.

    Args:
        schedule: needs ``num_ranks``, ``num_inputs``, ``result_ranks``,
            ``num_chunks`` and ``transfers`` with ``step``, ``src``, ``dst``,
            ``chunk`` and ``op`` (``"reduce"`` adds the sender's chunk into the
            receiver's, ``"copy"`` overwrites it). Transfers of one step all
            read the values from before that step, as in
            :func:`distsim.mechanics.collectives.execute`.
        chunk_bounds: ``num_chunks + 1`` element offsets of the chunks.

    Raises:
        InputError: a transfer or result rank outside the schedule, an
            unknown op, chunk bounds that do not fit the chunks, or a result
            rank left with a chunk nobody sent it (a hand-made schedule).
    """
    num_ranks, num_chunks = int(schedule.num_ranks), int(schedule.num_chunks)
    num_inputs = int(schedule.num_inputs)
    _check_transfers(schedule, num_ranks, num_chunks)
    bounds = _chunk_bounds(chunk_bounds, num_chunks)
    state = np.full((num_ranks, num_chunks), _ZERO, dtype=np.int64)
    state[:num_inputs] = np.arange(num_inputs * num_chunks).reshape(num_inputs, num_chunks)
    adds: dict[tuple[int, int], int] = {}
    operands: list[tuple[int, int]] = []
    next_id = num_inputs * num_chunks
    transfers = sorted(schedule.transfers, key=lambda t: t.step)
    i = 0
    while i < len(transfers):
        step = transfers[i].step
        before = state.copy()
        while i < len(transfers) and transfers[i].step == step:
            t = transfers[i]
            sent = int(before[t.src, t.chunk])
            if t.op == "copy":
                state[t.dst, t.chunk] = sent
            else:  # "reduce"
                key = tuple(sorted((int(state[t.dst, t.chunk]), sent)))
                if key[0] == _ZERO:  # 0 + x is exactly x
                    state[t.dst, t.chunk] = key[1]
                else:
                    if key not in adds:
                        adds[key] = next_id
                        operands.append(key)
                        next_id += 1
                    state[t.dst, t.chunk] = adds[key]
            i += 1
    final = state[list(schedule.result_ranks)]
    if np.any(final == _ZERO):
        rank, chunk = np.argwhere(final == _ZERO)[0]
        raise InputError("schedule.result_ranks", schedule.result_ranks,
                         f"ranks that end with every chunk; rank {schedule.result_ranks[rank]} never receives "
                         f"chunk {chunk} (no transfer sends it there)")
    return _levelize(num_inputs, bounds, final, operands, next_id)


def _check_transfers(schedule, num_ranks: int, num_chunks: int) -> None:
    """Every transfer's ``src``, ``dst`` and ``chunk`` and every result rank
    inside the schedule, every ``op`` known; the first bad field is reported."""
    transfers, results = list(schedule.transfers), list(schedule.result_ranks)
    try:
        table, ranks = np.array([(t.src, t.dst, t.chunk) for t in transfers]).reshape(-1, 3), np.array(results)
    except ValueError:  # ragged fields: let the rules below name the bad one
        table = ranks = np.zeros(0)
    if (np.issubdtype(table.dtype, np.integer) and np.all((table >= 0) & (table < (num_ranks, num_ranks, num_chunks)))
            and np.issubdtype(ranks.dtype, np.integer) and np.all((ranks >= 0) & (ranks < num_ranks))
            and all(t.op in _OP.choices for t in transfers)):
        return  # the common case, checked in bulk
    rank = Integer(0, num_ranks - 1, "a rank of the schedule")
    chunk = Integer(0, num_chunks - 1, "a chunk of the schedule")
    for j, t in enumerate(transfers):
        for name, rule in (("src", rank), ("dst", rank), ("chunk", chunk), ("op", _OP)):
            rule(f"schedule.transfers[{j}].{name}", getattr(t, name))
    for j, r in enumerate(results):
        rank(f"schedule.result_ranks[{j}]", r)


def _chunk_bounds(chunk_bounds, num_chunks: int) -> np.ndarray:
    """``chunk_bounds`` as int64 offsets: ``num_chunks + 1`` of them, from 0, never decreasing."""
    bounds = np.asarray(chunk_bounds)
    if (bounds.shape != (num_chunks + 1,) or not np.issubdtype(bounds.dtype, np.integer)
            or bounds[0] != 0 or np.any(np.diff(bounds) < 0)):
        raise InputError("chunk_bounds", chunk_bounds,
                         f"{num_chunks + 1} integer element offsets from 0, never decreasing (one per chunk edge)")
    return bounds.astype(np.int64)


def _levelize(num_ranks, bounds, final, operands, num_nodes) -> ReducePlan:
    """Keep the additions the results need, group them by depth and give them table rows.

    Within a level, sums are ordered by their left operand's row, so a chain such
    as a ring (each level adds one leaf to the previous level's sums) or a tree
    (pairs of the previous level) reads its left operands as a slice, and writes
    its results over them when they are not needed any more.
    """
    num_leaves = num_nodes - len(operands)
    num_chunks = len(bounds) - 1
    needed = np.zeros(num_nodes, dtype=bool)
    stack = list(np.unique(final))
    while stack:
        node = stack.pop()
        if needed[node]:
            continue
        needed[node] = True
        if node >= num_leaves:
            stack.extend(operands[node - num_leaves])
    depth = np.zeros(num_nodes, dtype=np.int64)
    for node in range(num_leaves, num_nodes):  # operands always precede the sum
        left, right = operands[node - num_leaves]
        depth[node] = 1 + max(depth[left], depth[right])
    by_depth: dict[int, list[int]] = {}
    uses: dict[int, list[int]] = {}  # node -> depths of the sums that read it
    for node in range(num_leaves, num_nodes):
        if needed[node]:
            by_depth.setdefault(int(depth[node]), []).append(node)
            for o in operands[node - num_leaves]:
                uses.setdefault(o, []).append(int(depth[node]))
    kept = set(np.unique(final).tolist())
    n = int(bounds[-1])
    # Leaf (r, c) starts at element r * n + bounds[c] of the flat gradient buffer.
    leaf_start = (np.arange(num_leaves) // max(num_chunks, 1)) * n + np.tile(bounds[:-1], num_ranks)
    row_of: dict[int, int] = {}
    num_rows = 0
    levels = []
    for d in sorted(by_depth):
        # Sums before leaves, each in row / leaf order: a sum is the left operand when there is one.
        key = {o: (0, row_of[o]) if o in row_of else (1, o) for node in by_depth[d] for o in operands[node - num_leaves]}
        pairs = [sorted(operands[node - num_leaves], key=lambda o: key[o]) for node in by_depth[d]]
        order = sorted(range(len(pairs)), key=lambda i: (key[pairs[i][0]], key[pairs[i][1]]))
        nodes = [by_depth[d][i] for i in order]
        lefts = [pairs[i][0] for i in order]
        rights = [pairs[i][1] for i in order]
        left_op = _operand(lefts, row_of, leaf_start)
        reusable = (
            left_op.row_slice is not None
            and len(set(lefts)) == len(lefts)
            and not set(lefts) & set(rights)
            and all(o not in kept and max(uses[o]) == d for o in lefts)
        )
        if reusable:
            out = left_op.row_slice
        else:
            out = (num_rows, num_rows + len(nodes), 1)
            num_rows += len(nodes)
        right_op = _operand(rights, row_of, leaf_start)
        for i, node in enumerate(nodes):
            row_of[node] = out[0] + i * out[2]
        levels.append(_Level(out, left_op, right_op))
    sizes = np.diff(bounds)
    final_rows = np.vectorize(lambda node: row_of.get(int(node), -1 - int(node)), otypes=[np.int64])(final)
    return ReducePlan(
        num_ranks=num_ranks,
        chunk_bounds=bounds,
        final=final,
        final_rows=final_rows,
        num_additions=len(row_of),
        num_rows=num_rows,
        width=max(int(sizes.max()), 1) if len(sizes) else 1,
        levels=tuple(levels),
    )


def _progression(values: np.ndarray) -> tuple[int, int, int] | None:
    """``(start, stop, step)`` when ``values`` is an increasing arithmetic progression."""
    step = int(values[1] - values[0]) if len(values) > 1 else 1
    if step > 0 and np.array_equal(values, values[0] + step * np.arange(len(values))):
        return int(values[0]), int(values[-1]) + 1, step
    return None


def _operand(ids: list[int], row_of: dict[int, int], leaf_start: np.ndarray) -> _Operand:
    is_leaf = np.array([i not in row_of for i in ids])
    rows = np.array([row_of.get(i, -1) for i in ids], dtype=np.int64)
    if not is_leaf.any():
        return _Operand(_progression(rows), None if _progression(rows) else rows, None, None, None)
    windows = leaf_start[np.array(ids, dtype=np.int64)[is_leaf]]
    if is_leaf.all():
        return _Operand(None, None, None if _progression(windows) else windows, _progression(windows), None)
    return _Operand(None, rows[~is_leaf], windows, None, is_leaf)
