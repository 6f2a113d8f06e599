"""Which gradient tensors travel together, and when each collective can start.

The backward pass produces gradients last layer first. How they reach the
wire is the framework's choice, :attr:`distsim.scenario.Training.grouping`:

* ``buckets``: ``num_buckets`` equal pieces of the gradient, piece k ready
  once (k+1)/K of the backward pass is done. The simulator's own
  idealisation; with K = 1 everything goes after the backward pass.
* ``per_tensor``: one collective per tensor, as soon as the tensor is ready.
  TF1 graph mode does this: the dataflow executor runs each tensor's
  all-reduce (tf_cnn_benchmarks' ``replicated``) or send to the parameter
  server once its input exists.
* ``pack``: TF2's ``CollectiveAllReduce`` (``cross_device_ops.py``) reverses
  the gradient list (last layer first) and cuts it with
  ``cross_device_utils.group_by_size``: a new pack starts once the current
  one holds *more* than ``bytes_per_pack`` bytes (``bytes_per_pack=0``: one
  pack). Each pack is one all-reduce inside the training ``tf.function``, so
  it can start when its last tensor is computed.
* ``fusion``: Horovod's Tensor Fusion (docs/tensor-fusion.rst): every cycle
  (``HOROVOD_CYCLE_TIME``) its background loop takes the tensors that are
  ready and copies them into fusion buffers of at most
  ``HOROVOD_FUSION_THRESHOLD`` bytes, one all-reduce per buffer. Defaults
  here are Horovod's before v0.21.0: 64 MiB and 5 ms (v0.21.0 changed them
  to 128 MiB and 1 ms). The cycle ticks are counted from the start of the
  step's backward pass on the last replica.

When a tensor is ready comes from :attr:`~distsim.scenario.Workload.tensor_ready`
(per-layer FLOPs of the real model); a workload without per-tensor data is
``num_gradient_tensors`` equal tensors ready evenly through the backward pass.
Collectives then run one at a time, in order (TF2 orders NCCL launches with
a token, Horovod's loop runs one buffer after another).

Sizes here are shares of the gradient (they sum to 1), so a sweep can
scale the model's size without regrouping.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from distsim.scenario import Training, Workload


@dataclass(frozen=True)
class TensorStream:
    """The gradient tensors in the order the backward pass makes them.

    Attributes:
        share: each tensor's share of the gradient bytes (sums to 1).
        ready: fraction of the backward pass done when it is ready
            (non-decreasing, the last one 1).
    """

    share: np.ndarray
    ready: np.ndarray


def tensor_stream(workload: Workload) -> TensorStream:
    """The workload's tensors, last layer first."""
    if workload.tensor_params:
        params = np.asarray(workload.tensor_params[::-1], dtype=float)
        return TensorStream(params / params.sum(), np.asarray(workload.tensor_ready[::-1], dtype=float))
    k = workload.num_gradient_tensors
    return TensorStream(np.full(k, 1.0 / k), np.arange(1, k + 1) / k)


@dataclass(frozen=True)
class Groups:
    """The collectives of one step, in launch order.

    Attributes:
        share: each collective's share of the gradient bytes.
        ready: fraction of the backward pass done when it may start.
    """

    share: np.ndarray
    ready: np.ndarray

    def __len__(self) -> int:
        return len(self.share)


def pack_bounds(sizes: np.ndarray, bytes_per_pack: float) -> np.ndarray:
    """Index of the first tensor of every pack: TF's ``group_by_size``."""
    if bytes_per_pack <= 0 or len(sizes) == 0:
        return np.zeros(1, dtype=np.int64)
    starts = [0]
    held = 0.0
    for i, size in enumerate(sizes):
        if held > bytes_per_pack:
            starts.append(i)
            held = 0.0
        held += size
    return np.asarray(starts, dtype=np.int64)


def static_groups(stream: TensorStream, training: Training, gradient_bytes: float) -> Groups:
    """The collectives of ``buckets``, ``per_tensor`` and ``pack`` grouping
    (``gradient_bytes`` sizes the packs)."""
    if training.grouping == "buckets":
        k = training.num_buckets
        return Groups(np.full(k, 1.0 / k), np.arange(1, k + 1) / k)
    if training.grouping == "per_tensor":
        return Groups(stream.share, stream.ready)
    if training.grouping == "pack":
        starts = pack_bounds(stream.share * gradient_bytes, training.bytes_per_pack)
        ends = np.append(starts[1:], len(stream.share)) - 1
        return Groups(np.add.reduceat(stream.share, starts), stream.ready[ends])
    raise ValueError(f"grouping={training.grouping!r} is decided per step (fusion_groups)")


def fusion_groups(ready_s: np.ndarray, share: np.ndarray, gradient_bytes: float, cycle_s: float,
                  threshold_bytes: float) -> tuple[np.ndarray, np.ndarray]:
    """Horovod's fusion for one step: ``(launch_s, share)`` of each buffer.

    ``ready_s``: when each tensor is ready, seconds after the first cycle
    tick. Tensor i joins the cycle that ends at the first tick at or after
    it; a cycle's tensors fill buffers in order, a new buffer starting when
    the next tensor would not fit (a tensor larger than the threshold
    travels alone; threshold 0: every tensor alone).

    This is Horovod's rule (horovod/horovod at 2626dc87):
    ``RunLoopOnce`` (``horovod/common/operations.cc``, lines 751-761) sleeps
    until one cycle after the last cycle's start, then negotiates the
    tensors every rank has ready; ``Controller::FuseResponses``
    (``controller.cc``, line 955) adds the next one to a buffer while
    ``tensor_size + new_tensor_size <= threshold``. (Horovod's loop runs
    freely across steps; counting the ticks from the backward pass fixes
    their phase.)

    The buffers depend on where the ready times fall between ticks, so a
    longer backward pass can merge tensors into fewer buffers and end the
    step sooner: a fused step is not monotone in compute (8 H100s, VGG16,
    a 1.4 ms cycle: 1.1667 x the FLOPs, 0.76699 s against 0.76763 s, one
    buffer fewer). It saves at most one collective's fixed cost per tick
    boundary lost (``tests/physical_invariants.py``, ``fusion_slack_s``).
    """
    tick = np.ceil(np.maximum(ready_s, 0.0) / cycle_s - 1e-9) * cycle_s
    sizes = (share * gradient_bytes).tolist()  # Python floats: the same float64 sums, without NumPy scalars
    ticks = tick.tolist()
    starts = [0]
    held = sizes[0] if len(sizes) else 0.0
    for i in range(1, len(sizes)):
        if ticks[i] != ticks[i - 1] or held + sizes[i] > threshold_bytes:
            starts.append(i)
            held = 0.0
        held += sizes[i]
    starts = np.asarray(starts, dtype=np.int64)
    return tick[starts], np.add.reduceat(share, starts)


def serial_chain(launch_s: np.ndarray, duration_s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start and end of collectives run one at a time in the given order,
    each no earlier than its launch time (1-D arrays)."""
    end = np.cumsum(duration_s) + np.maximum.accumulate(launch_s - np.concatenate([[0.0], np.cumsum(duration_s)[:-1]]))
    return end - duration_s, end


def serial_chain_end(launch_s, duration_s):
    """When the last of the collectives ends (arrays: first axis the
    collectives, the rest broadcast): ``max_g (launch_g + sum_{j >= g} d_j)``."""
    if isinstance(launch_s, np.ndarray) and isinstance(duration_s, np.ndarray) and len(duration_s):
        # The same sums in the same order as the loop below (a running sum from the last), in one call each.
        suffix = np.cumsum(duration_s[::-1], axis=0)[::-1]
        return np.max(launch_s + suffix, axis=0)
    suffix = 0.0
    end = -np.inf
    for g in range(len(duration_s) - 1, -1, -1):
        suffix = suffix + duration_s[g]
        end = np.maximum(end, launch_s[g] + suffix)
    return end
