"""Which examples land on which replica: global batch -> per-worker -> per-replica.

This module reproduces how ``tf.distribute`` (TensorFlow 2.21, verified by
``tests/real/test_rebatch_tf.py``) splits a batched dataset across replicas.
Replicas are numbered worker-major: global replica ``g = w * R + r`` for
replica ``r`` of worker ``w`` with ``R`` replicas per worker.

TensorFlow uses two different rules, depending on the auto-shard policy:

* ``"DATA"`` (also what ``AUTO`` becomes for in-memory data such as
  ``from_tensor_slices`` or ``range``): every worker reads the whole dataset.
  Each global batch of ``r`` examples is cut, in replica order, into chunks of
  ``ceil(r / N)`` examples for the ``N = W * R`` replicas; replicas past the
  end of the batch get an *empty* batch. So 10 examples on 4 replicas give
  ``[3, 3, 3, 1]`` and a final partial batch of 2 gives ``[1, 1, 0, 0]``.
  (The auto-shard rewrite replaces the newer rebatch by this "legacy" one.)
* ``"FILE"`` and ``"OFF"``: each worker reads its own stream (its files, or the
  whole dataset for ``OFF``), batches it with the global batch size, and
  re-cuts that stream cyclically into TensorFlow's ``batch_sizes_for_worker``
  sizes: ``B mod N`` replicas get ``ceil(B / N)``, the rest ``floor(B / N)``,
  rotated by ``w * R`` for worker ``w`` (:func:`rebatch_sizes`). A worker whose
  stream has run out feeds empty batches until every worker is done. With
  ``OFF`` every worker sees the same examples.

Sizes are in examples; indices are positions in the (unshuffled) dataset.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from distsim.scenario import SHARD_POLICIES  # AutoShardPolicy values modelled here
from distsim.validation import Integer, OneOf

_POSITIVE = Integer(1)
_COUNT = Integer(0)


def _check_positive_int(name: str, value: object) -> int:
    return _POSITIVE(name, value)


def _check_nonnegative_int(name: str, value: object) -> int:
    return _COUNT(name, value)


def _check_policy(policy: str) -> str:
    return OneOf(SHARD_POLICIES)("policy", policy)


def replica_batch_sizes(global_batch: int, num_replicas: int) -> list[int]:
    """Examples each replica gets from one (possibly partial) global batch.

    This is the ``DATA``-policy rule, which is what MirroredStrategy and
    MultiWorkerMirroredStrategy apply to in-memory datasets: chunks of
    ``ceil(global_batch / num_replicas)`` in replica order, the last non-empty
    chunk holding the remainder and any later replicas getting 0.

    >>> replica_batch_sizes(10, 4)
    [3, 3, 3, 1]
    >>> replica_batch_sizes(2, 4)
    [1, 1, 0, 0]
    """
    global_batch = _check_nonnegative_int("global_batch", global_batch)
    num_replicas = _check_positive_int("num_replicas", num_replicas)
    chunk = -(-global_batch // num_replicas)
    starts = np.minimum(np.arange(num_replicas) * chunk, global_batch)
    return np.diff(np.append(starts, global_batch)).tolist()


def rebatch_sizes(
    global_batch: int, num_workers: int, replicas_per_worker: int, worker_index: int
) -> list[int]:
    """TensorFlow's ``batch_sizes_for_worker``: the cyclic re-cut sizes of one
    worker under the ``FILE`` and ``OFF`` policies (length ``W * R``, sum
    ``global_batch``, any two sizes differ by at most one).

    >>> rebatch_sizes(7, 2, 2, 1)
    [2, 1, 2, 2]
    """
    global_batch = _check_positive_int("global_batch", global_batch)
    num_workers = _check_positive_int("num_workers", num_workers)
    replicas_per_worker = _check_positive_int("replicas_per_worker", replicas_per_worker)
    worker_index = Integer(0, num_workers - 1, "a worker's index")("worker_index", worker_index)
    n = num_workers * replicas_per_worker
    floor, num_ceil = divmod(global_batch, n)
    worker_0 = [floor + 1] * num_ceil + [floor] * (n - num_ceil)
    offset = worker_index * replicas_per_worker
    return worker_0[offset:] + worker_0[:offset]


def worker_batch_sizes(global_batch: int, num_workers: int, replicas_per_worker: int) -> list[int]:
    """Examples each worker gets from one global batch (``DATA`` rule): the sum
    over its replicas. 1024 on 4 workers x 4 GPUs gives 256 per worker."""
    num_workers = _check_positive_int("num_workers", num_workers)
    replicas_per_worker = _check_positive_int("replicas_per_worker", replicas_per_worker)
    sizes = replica_batch_sizes(global_batch, num_workers * replicas_per_worker)
    return [sum(sizes[w * replicas_per_worker : (w + 1) * replicas_per_worker]) for w in range(num_workers)]


def file_ranges(num_examples: int, num_files: int) -> list[np.ndarray]:
    """Example indices stored in each of ``num_files`` files: contiguous, sizes
    differing by at most one (``np.array_split``)."""
    num_examples = _check_positive_int("num_examples", num_examples)
    num_files = _check_positive_int("num_files", num_files)
    return np.array_split(np.arange(num_examples, dtype=np.int64), num_files)


def _validate(num_examples, global_batch, num_workers, replicas_per_worker, policy, num_files):
    num_examples = _check_positive_int("num_examples", num_examples)
    global_batch = _check_positive_int("global_batch", global_batch)
    num_workers = _check_positive_int("num_workers", num_workers)
    replicas_per_worker = _check_positive_int("replicas_per_worker", replicas_per_worker)
    _check_policy(policy)
    if policy == "FILE":
        num_files = Integer(num_workers, num_examples, "one file per worker at least, one example per file at least")(
            "num_files", num_files)
    return num_examples, global_batch, num_workers, replicas_per_worker, num_files


def _worker_streams(num_examples: int, num_workers: int, policy: str, num_files: int | None) -> list[np.ndarray]:
    """What each worker reads, in order, under ``FILE`` or ``OFF``."""
    if policy == "OFF":
        return [np.arange(num_examples, dtype=np.int64)] * num_workers
    files = file_ranges(num_examples, num_files)
    return [np.concatenate(files[w::num_workers]) for w in range(num_workers)]


def _cyclic_chunk_bounds(stream_len: int, global_batch: int, sizes: list[int], drop_remainder: bool) -> np.ndarray:
    """Boundaries of the chunks a worker's stream is re-cut into (unbatch, then
    batch with ``sizes`` cyclically); ``drop_remainder`` drops the final
    partial global batch of the stream first."""
    if drop_remainder:
        stream_len -= stream_len % global_batch
    full_cycles = stream_len // global_batch
    cycle = np.concatenate([[0], np.cumsum(sizes)])
    ends = (np.arange(full_cycles)[:, None] * global_batch + cycle[None, 1:]).ravel()
    rest = stream_len - full_cycles * global_batch
    if rest:
        # Chunks of the partial cycle up to and including the one that ends it.
        needed = int(np.searchsorted(cycle[1:], rest, side="left")) + 1
        tail = np.minimum(cycle[1 : needed + 1], rest) + full_cycles * global_batch
        ends = np.concatenate([ends, tail])
    return np.concatenate([[0], ends]).astype(np.int64)


def step_assignments(
    num_examples: int,
    global_batch: int,
    num_workers: int = 1,
    replicas_per_worker: int = 1,
    drop_remainder: bool = False,
    policy: str = "DATA",
    num_files: int | None = None,
) -> list[list[np.ndarray]]:
    """Example indices each replica gets at each step of one epoch.

    Args:
        num_examples: examples in the dataset, stored in order ``0..n-1``
            (for ``FILE``: in ``num_files`` contiguous files, see
            :func:`file_ranges`).
        global_batch: examples per step across all replicas (the ``batch()``
            size of the input pipeline).
        num_workers: workers (hosts).
        replicas_per_worker: replicas (devices) per worker.
        drop_remainder: the pipeline's ``batch(..., drop_remainder=True)``.
        policy: auto-shard policy, one of :data:`SHARD_POLICIES`.
        num_files: files the dataset is stored in (``FILE`` only).

    Returns:
        ``steps[s][g]``: int64 array of example indices for global replica
        ``g = w * replicas_per_worker + r`` at step ``s``; empty where that
        replica gets an empty batch.
    """
    n, b, w_count, r_count, num_files = _validate(
        num_examples, global_batch, num_workers, replicas_per_worker, policy, num_files
    )
    if policy == "DATA":
        stop = n - n % b if drop_remainder else n
        steps = []
        for start in range(0, stop, b):
            sizes = replica_batch_sizes(min(b, stop - start), w_count * r_count)
            bounds = start + np.concatenate([[0], np.cumsum(sizes)])
            steps.append([np.arange(lo, hi, dtype=np.int64) for lo, hi in zip(bounds[:-1], bounds[1:])])
        return steps
    per_worker_chunks = []
    for w, stream in enumerate(_worker_streams(n, w_count, policy, num_files)):
        bounds = _cyclic_chunk_bounds(len(stream), b, rebatch_sizes(b, w_count, r_count, w), drop_remainder)
        per_worker_chunks.append([stream[lo:hi] for lo, hi in zip(bounds[:-1], bounds[1:])])
    num_steps = max(-(-len(chunks) // r_count) for chunks in per_worker_chunks)
    empty = np.zeros(0, dtype=np.int64)
    return [
        [
            chunks[s * r_count + r] if s * r_count + r < len(chunks) else empty
            for chunks in per_worker_chunks
            for r in range(r_count)
        ]
        for s in range(num_steps)
    ]


def steps_per_epoch(
    num_examples: int,
    global_batch: int,
    num_workers: int = 1,
    replicas_per_worker: int = 1,
    drop_remainder: bool = False,
    policy: str = "DATA",
    num_files: int | None = None,
) -> int:
    """Steps in one epoch, without building the index arrays (same arguments
    as :func:`step_assignments`; the count is :func:`epoch`'s)."""
    n, b, w_count, r_count, num_files = _validate(
        num_examples, global_batch, num_workers, replicas_per_worker, policy, num_files
    )
    return int(epoch(n, b, w_count, r_count, drop_remainder, policy, num_files).steps)


@dataclass(frozen=True)
class Epoch:
    """The shape of one epoch: 0-d arrays for one scenario, one entry per row
    for a sweep grid.

    Attributes:
        steps: synchronous steps in the epoch.
        examples: examples the replicas process in it, counting repeats
            (under ``OFF`` every worker reads the whole dataset, so
            ``num_workers x num_examples``; ``drop_remainder`` drops each
            stream's final partial global batch).
        last_examples: examples in the final step (``global_batch`` when
            the epoch divides evenly) under ``DATA``. Under ``FILE``/``OFF``,
            where workers run out of their streams at different steps, the
            examples left after ``steps - 1`` full global batches, clipped to
            1..``global_batch``: the size the engines price the final step
            at, an estimate (the exact split needs every worker's stream).
    """

    steps: np.ndarray
    examples: np.ndarray
    last_examples: np.ndarray


def stream_lengths(num_examples, num_workers: int, policy: str, num_files=None, workers=None) -> np.ndarray:
    """Examples in the input streams of ``workers`` (worker indices, an int
    array broadcast against the rows; default every worker as a column),
    shape (workers, rows of the flattened ``num_examples``). ``DATA`` and
    ``OFF``: the whole dataset. ``FILE``: worker w reads files w, w + W, ...;
    the first ``n mod F`` files hold one example more (``np.array_split``)."""
    n = np.asarray(num_examples, dtype=np.int64).ravel()
    w = np.arange(num_workers, dtype=np.int64)[:, None] if workers is None else np.asarray(workers, dtype=np.int64)
    if policy != "FILE":
        return np.broadcast_to(n, np.broadcast(w, n).shape)
    f = np.asarray(num_files, dtype=np.int64).ravel()
    files = -(-(f - w) // num_workers)
    bigger = np.maximum(0, -(-(n % f - w) // num_workers))
    return files * (n // f) + bigger


def _equal_stream_ranges(n, f, num_workers: int, policy: str) -> np.ndarray:
    """Bounds (4, rows) of the at most three runs of workers ``[b0, b1)``,
    ``[b1, b2)``, ``[b2, b3)`` whose streams are equally long. Under ``FILE``
    worker w holds one file more when ``w < F mod W`` and one example more
    when ``w < (n mod F) mod W`` (:func:`stream_lengths`); otherwise all are
    equal."""
    if policy == "FILE":
        t1, t2 = f % num_workers, (n % f) % num_workers
    else:
        t1 = t2 = np.zeros_like(n)
    return np.stack([np.zeros_like(n), np.minimum(t1, t2), np.maximum(t1, t2), np.full_like(n, num_workers)])


def _slowest_candidates(bounds, batch, num_workers: int, replicas_per_worker: int) -> np.ndarray:
    """Per run of equal streams, the two workers that may need the most
    rebatched chunks for the same remainder (:func:`_chunks_for`), shape
    (6, rows). Worker w's chunks start at position ``s = w R`` of a cycle of
    ``N = W R`` whose first ``B mod N`` positions hold one example more.
    The first k chunks from s hold fewest examples, for every k, either at
    the largest s below ``B mod N`` (over those starts the count of larger
    chunks never grows with s) or at the smallest s at or above it (over
    those it never shrinks), so those two starts of each run bound them all."""
    cut = -(-(batch % (num_workers * replicas_per_worker)) // replicas_per_worker)  # first w with w R >= B mod N
    first, last = bounds[:-1], np.maximum(bounds[1:] - 1, bounds[:-1])
    return np.concatenate([np.clip(cut - 1, first, last), np.clip(cut, first, last)])


def _chunks_for(rest, batch, num_workers: int, replicas_per_worker: int, workers) -> np.ndarray:
    """Fewest rebatched chunks that hold ``rest`` examples (``rest < batch``)
    for each of ``workers`` (worker indices broadcast against the rows).
    Worker w's chunk sizes cycle through TensorFlow's
    ``batch_sizes_for_worker`` (:func:`rebatch_sizes`): position
    ``(w R + j) mod N`` gets ``floor(B/N) + 1`` if it is below ``B mod N``,
    else ``floor(B/N)``. The first k chunks hold
    ``k floor(B/N) + C(wR + k) - C(wR)`` examples, with ``C(x) = (x // N)(B mod N)
    + min(x mod N, B mod N)`` counting the larger chunks; the fewest k is
    found by bisection over 0..N."""
    n_rep = num_workers * replicas_per_worker
    floor, big = batch // n_rep, batch % n_rep
    start = np.asarray(workers, dtype=np.int64) * replicas_per_worker

    def held(k):
        x0, x1 = start, start + k
        return k * floor + (x1 // n_rep) * big + np.minimum(x1 % n_rep, big) - (x0 // n_rep) * big - np.minimum(x0 % n_rep, big)

    lo = np.zeros(np.broadcast(rest, start).shape, dtype=np.int64)
    hi = np.full_like(lo, n_rep)
    for _ in range(int(n_rep).bit_length() + 1):
        mid = (lo + hi) // 2
        enough = held(mid) >= rest
        hi = np.where(enough, mid, hi)
        lo = np.where(enough, lo, mid + 1)
    return hi


def epoch(num_examples, global_batch, num_workers: int = 1, replicas_per_worker: int = 1, drop_remainder=False,
          policy: str = "DATA", num_files=None) -> Epoch:
    """Steps, examples and final-step size of one epoch, in closed form and
    vectorised over ``num_examples``, ``global_batch``, ``drop_remainder``
    and ``num_files`` (arrays broadcast together; the worker layout and the
    policy are scalars). The same rules as :func:`step_assignments`:
    ``DATA`` cuts the dataset into global batches; under ``FILE``/``OFF``
    each worker re-cuts its own stream into rebatched chunks and a step
    takes ``replicas_per_worker`` of them from every worker, until the
    longest stream is done. The work per row does not grow with the
    number of workers: their streams come in at most three lengths, and
    two workers of each length decide the step count
    (:func:`_slowest_candidates`).

    ``steps`` is 0 (and ``last_examples`` 0) where every stream is shorter
    than one global batch and ``drop_remainder`` drops it.
    """
    shape = np.broadcast(np.asarray(num_examples), np.asarray(global_batch), np.asarray(drop_remainder),
                         np.asarray(1 if num_files is None else num_files)).shape
    rows = np.stack([np.broadcast_to(np.asarray(x, dtype=np.int64), shape).ravel()
                     for x in (num_examples, global_batch, 1 if num_files is None else num_files, drop_remainder)])
    # A sweep repeats each (n, batch, files, drop) many times over its other fields: solve each once.
    codes = [np.unique(column, return_inverse=True) for column in rows]
    key = np.ravel_multi_index([inverse.ravel() for _, inverse in codes], [len(values) for values, _ in codes])
    _, first, row_of = np.unique(key, return_index=True, return_inverse=True)
    n, b, f, drop = rows[0, first], rows[1, first], rows[2, first], rows[3, first].astype(bool)
    if policy == "DATA":
        steps = np.where(drop, n // b, -(-n // b))
        examples = np.where(drop, n - n % b, n)
    else:
        def used(workers):
            length = stream_lengths(n, num_workers, policy, f, workers)
            return np.where(drop, length - length % b, length)

        bounds = _equal_stream_ranges(n, f, num_workers, policy)
        examples = ((bounds[1:] - bounds[:-1]) * used(bounds[:-1])).sum(axis=0)
        workers = _slowest_candidates(bounds, b, num_workers, replicas_per_worker)
        stream = used(workers)
        full = stream // b
        rest = stream - full * b
        chunks = np.where(rest > 0, _chunks_for(rest, b, num_workers, replicas_per_worker, workers), 0)
        steps = (full * num_workers + -(-chunks // replicas_per_worker)).max(axis=0)
    last = np.where(steps > 0, np.clip(examples - (steps - 1) * b, 1, b), 0)
    row_of = row_of.ravel()
    return Epoch(steps=steps[row_of].reshape(shape), examples=examples[row_of].reshape(shape),
                 last_examples=last[row_of].reshape(shape))


def examples_read_per_worker(
    num_examples: int, num_workers: int, policy: str = "DATA", num_files: int | None = None
) -> list[int]:
    """Examples each worker's input pipeline reads and preprocesses per epoch.

    Under ``DATA`` and ``OFF`` every worker runs the whole pipeline on every
    example (``DATA`` discards the others' share only after preprocessing);
    under ``FILE`` each worker reads only its files. This is the input cost
    the timing engine charges to each host.
    """
    num_examples = _check_positive_int("num_examples", num_examples)
    num_workers = _check_positive_int("num_workers", num_workers)
    _check_policy(policy)
    if policy != "FILE":
        return [num_examples] * num_workers
    _validate(num_examples, 1, num_workers, 1, policy, num_files)
    return [len(s) for s in _worker_streams(num_examples, num_workers, policy, num_files)]
