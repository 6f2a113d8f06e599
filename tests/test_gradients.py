"""mechanics.gradients: which tensors travel together and when, against hand derivations."""

import numpy as np
import pytest

from distsim.mechanics.gradients import (
    fusion_groups,
    pack_bounds,
    serial_chain,
    serial_chain_end,
    static_groups,
    tensor_stream,
)
from distsim.scenario import Training, Workload
from distsim.validation import InputError

#: A made-up 4-layer model: tensors in creation order (first layer first).
TOY = Workload(name="toy", num_params=1000, flops_per_sample=1.0, num_examples=100, num_gradient_tensors=4,
               tensor_params=(100, 10, 800, 90), tensor_ready=(1.0, 0.9, 0.5, 0.2))


def test_the_stream_runs_last_layer_first():
    stream = tensor_stream(TOY)
    np.testing.assert_allclose(stream.share, [0.09, 0.8, 0.01, 0.1])
    np.testing.assert_allclose(stream.ready, [0.2, 0.5, 0.9, 1.0])


def test_without_tensor_data_the_stream_is_equal_tensors_ready_evenly():
    w = Workload(name="w", num_params=8, flops_per_sample=1.0, num_examples=10, num_gradient_tensors=4)
    stream = tensor_stream(w)
    np.testing.assert_allclose(stream.share, [0.25] * 4)
    np.testing.assert_allclose(stream.ready, [0.25, 0.5, 0.75, 1.0])


def test_tf_packs_close_once_they_hold_more_than_bytes_per_pack():
    # group_by_size: a new pack starts when the current one holds > bytes_per_pack.
    # Sizes 90, 800, 10, 100 with 100 bytes per pack: [90, 800] (90 <= 100 so 800 joins), [10, 100].
    assert pack_bounds(np.array([90.0, 800, 10, 100]), 100).tolist() == [0, 2]
    # With 50 bytes: 90 > 50 closes the first pack at once: [90], [800], [10, 100].
    assert pack_bounds(np.array([90.0, 800, 10, 100]), 50).tolist() == [0, 1, 2]
    assert pack_bounds(np.array([90.0, 800, 10, 100]), 0).tolist() == [0]  # 0: one pack
    groups = static_groups(tensor_stream(TOY), Training(grouping="pack", bytes_per_pack=100), 1000.0)
    np.testing.assert_allclose(groups.share, [0.89, 0.11])
    np.testing.assert_allclose(groups.ready, [0.5, 1.0])  # a pack starts when its last tensor is ready


def test_per_tensor_and_bucket_groups():
    groups = static_groups(tensor_stream(TOY), Training(grouping="per_tensor"), 1000.0)
    np.testing.assert_allclose(groups.share, [0.09, 0.8, 0.01, 0.1])
    groups = static_groups(tensor_stream(TOY), Training(num_buckets=4), 1000.0)
    np.testing.assert_allclose(groups.share, [0.25] * 4)
    np.testing.assert_allclose(groups.ready, [0.25, 0.5, 0.75, 1.0])


def test_horovod_fuses_the_tensors_of_one_cycle_up_to_the_threshold():
    # Ready at 1, 4, 6, 9 ms with a 5 ms cycle: ticks at 5, 5, 10, 10 ms.
    ready = np.array([0.001, 0.004, 0.006, 0.009])
    share = np.array([0.1, 0.2, 0.3, 0.4])
    launch, fused = fusion_groups(ready, share, 1000.0, 0.005, 10_000)
    np.testing.assert_allclose(launch, [0.005, 0.010])
    np.testing.assert_allclose(fused, [0.3, 0.7])
    # A 500-byte buffer: 300 + 400 bytes do not fit together in the second cycle.
    launch, fused = fusion_groups(ready, share, 1000.0, 0.005, 500)
    np.testing.assert_allclose(launch, [0.005, 0.010, 0.010])
    np.testing.assert_allclose(fused, [0.3, 0.3, 0.4])
    # Threshold 0 disables fusion: every tensor alone, still on the cycle's tick.
    launch, fused = fusion_groups(ready, share, 1000.0, 0.005, 0)
    np.testing.assert_allclose(fused, share)


def test_serial_chain_waits_for_launch_and_for_the_previous_collective():
    start, end = serial_chain(np.array([0.0, 1.0, 10.0]), np.array([2.0, 3.0, 1.0]))
    # By hand: [0, 2], then max(1, 2) = 2 -> 5, then max(10, 5) = 10 -> 11.
    np.testing.assert_allclose(start, [0.0, 2.0, 10.0])
    np.testing.assert_allclose(end, [2.0, 5.0, 11.0])
    assert serial_chain_end([0.0, 1.0, 10.0], [2.0, 3.0, 1.0]) == pytest.approx(11.0)


def test_tensor_data_must_add_up():
    with pytest.raises(InputError, match="Workload.num_params"):
        Workload(name="w", num_params=999, flops_per_sample=1.0, num_examples=10, num_gradient_tensors=2,
                 tensor_params=(500, 500), tensor_ready=(1.0, 0.5))
    with pytest.raises(InputError, match="Workload.tensor_ready"):
        Workload(name="w", num_params=1000, flops_per_sample=1.0, num_examples=10, num_gradient_tensors=2,
                 tensor_params=(500, 500), tensor_ready=(0.5, 1.0))
    with pytest.raises(InputError, match="Training.num_buckets"):
        Training(num_buckets=4, grouping="per_tensor")
    with pytest.raises(InputError, match="Training.bytes_per_pack"):
        Training(bytes_per_pack=1000)
