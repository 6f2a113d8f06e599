"""Hand-derived bounds on published cells (issue 24, data/reference/README.md).

Each bound is computed here from the published numbers, the tables' link
figures and the workload presets' variable sizes, without the engine; the
engine's predictions are then checked against it.
"""

import json
import math
from pathlib import Path

import numpy as np
import pytest

from distsim.published.reference import compare, load_cluster_tables

REPO = Path(__file__).resolve().parents[1]
PRESETS = json.loads((REPO / "distsim/scenario/presets/workloads.json").read_text())["presets"]
TABLES = {t.id: t for t in load_cluster_tables()}
P2 = TABLES["cscs_p2_xlarge"]
#: p2.xlarge's sourced rate, bytes per second (the table's inter_link, 1.25 Gbit/s).
P2_LINK_BPS = P2.setup["cluster"]["inter_link"]["bandwidth_Bps"]
#: InceptionV3's largest variable, the 2048 x 1000 classifier, float32 bytes.
CLASSIFIER_BYTES = 4 * max(PRESETS["inception_v3_299"]["tensor_params"]["value"])
BATCH = P2.setup["batch_per_replica"]


#: Seconds of the 1-GPU cell that are not compute, at most: the 4 ms step overhead, the 95 MB gradient to the CPU
#: and back over PCIe (16 ms at 12 GB/s) and its SGD apply on the CPU (3 x 95 MB, under 60 ms at 5 GB/s).
NOT_COMPUTE_S = 0.1
#: The backward pass after the classifier's forward: 2/3 of compute (backward = twice the forward's FLOPs, the
#: preset's 3 x forward convention), compute at least the 1-GPU step less NOT_COMPUTE_S.
BACKWARD_S = 2 / 3 * (BATCH / P2.published["InceptionV3"][0] - NOT_COMPUTE_S)


def turns_bound_s(gpus: int, link_Bps: float) -> float:
    """Shortest synchronous step, whatever the schedule, when one PS task holds
    the classifier whole (tf_cnn_benchmarks' parameter_server mode places a
    variable whole, greedily by bytes): after the step-end barrier its host
    sends the classifier to the ``gpus - 1`` other workers, so the last of
    them has it no earlier than ``(gpus - 1) x bytes / B``, and that worker
    then runs its whole backward pass. Workers served earlier may push while
    others still pull (the *turns* rhythm), so the pushes add nothing here."""
    return (gpus - 1) * CLASSIFIER_BYTES / link_Bps + BACKWARD_S


def lockstep_traffic_s(gpus: int, link_Bps: float) -> float:
    """The classifier's traffic when every pull shares the task's NIC and ends
    together (the *lockstep* rhythm) and every push follows: the pulls, then
    the pushes, each ``(gpus - 1) x bytes / B``."""
    return 2 * (gpus - 1) * CLASSIFIER_BYTES / link_Bps


def gpus_of(label: str) -> int:
    return int(label.split()[0])


def test_classifier_is_the_8_mb_variable():
    # 2048 features x 1000 classes (Keras; tf_cnn_benchmarks has 1001: 0.1 % more).
    assert CLASSIFIER_BYTES == 4 * 2048 * 1000
    assert P2_LINK_BPS == 1.25e9 / 8


def test_p2_xlarge_predictions_are_the_lockstep_rhythm():
    # The engine pulls every variable after the last push, with every worker's pull sharing the task's NIC: its
    # step holds at least the lockstep traffic, which at 32-128 GPUs is longer than the turns bound.
    _, cells = compare(P2)
    for cell in cells:
        n = gpus_of(cell.column)
        if n == 1:
            continue
        predicted_step = n * BATCH / cell.predicted
        assert predicted_step >= lockstep_traffic_s(n, P2_LINK_BPS), (cell.column, predicted_step)
        assert predicted_step >= turns_bound_s(n, P2_LINK_BPS), (cell.column, predicted_step)


@pytest.mark.parametrize("gpus", [32, 64, 128])
def test_published_p2_xlarge_cells_beat_every_schedule_at_the_sourced_link(gpus):
    # Shorter than any schedule allows at 1.25 Gbit/s (by 16 %, 11 % and 5 %), and far shorter than the
    # lockstep traffic alone: the link figure is contradicted, and the engine's lockstep rhythm is most of the miss.
    published = P2.published["InceptionV3"][[gpus_of(c.label) for c in P2.columns].index(gpus)]
    step = gpus * BATCH / published
    assert step < turns_bound_s(gpus, P2_LINK_BPS) < lockstep_traffic_s(gpus, P2_LINK_BPS) + BACKWARD_S


def test_published_32_gpu_cell_implies_at_least_1_76_gbit():
    published = P2.published["InceptionV3"][[gpus_of(c.label) for c in P2.columns].index(32)]
    step = 32 * BATCH / published
    implied_bits_per_s = 8 * 31 * CLASSIFIER_BYTES / (step - BACKWARD_S)
    # The figure quoted in cscs_2017.json's assumptions (rounded down at the second decimal).
    assert 1.76e9 <= implied_bits_per_s < 1.77e9


def implied_nccl_busbw_Bps(workload: str, batch: int, one_gpu: float, gpus: int, published: float) -> float:
    """The ring bus bandwidth at which the per-tensor all-reduces, each started
    when its gradient is ready (the preset's ``tensor_ready``) and run one
    after another, end ``published`` step - 1-GPU step after the backward
    pass (2/3 of the 1-GPU step): bisection in log space."""
    w = PRESETS[workload]
    params = w["tensor_params"]["value"][::-1]
    ready = w["tensor_ready"]["value"][::-1]
    step1 = batch / one_gpu
    backward = step1 * 2 / 3
    extra = gpus * batch / published - step1

    def exposed(busbw):
        end = 0.0
        for n, r in zip(params, ready):
            end = max(end, r * backward) + 2 * (gpus - 1) / gpus * 4 * n / busbw
        return end - backward

    lo, hi = 1e8, 1e12
    for _ in range(100):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if exposed(mid) > extra else (lo, mid)
    return lo


def test_dgx1_replicated_cells_imply_one_low_bus_bandwidth():
    # AlexNet (247 MB, 16 tensors) and VGG16 (553 MB, 32 tensors) under NCCL replicated: if bytes are the cause,
    # one bandwidth fits six cells, two models (the README's cause (a)); the DGX-1 preset's rings run at 18 GB/s
    # per NVLink lane.
    table = TABLES["tf_dgx1_p100"]
    implied = []
    for row, workload, batch in (("AlexNet", "alexnet_227", 512), ("VGG16", "vgg16_224", 64)):
        values = table.published[row]
        implied += [implied_nccl_busbw_Bps(workload, batch, values[0], g, v) for g, v in zip((2, 4, 8), values[1:])]
    assert 1.8e9 < min(implied) and max(implied) < 3.0e9, np.round(np.array(implied) / 1e9, 2)


def test_dgx1_replicated_misses_are_not_kernel_launches():
    # RULES.md rules 16-18: 4 launches per tensor for each of the other L - 1 replicas at 5 us, overlapped with
    # compute. At 8 GPUs AlexNet's 16 tensors take 2.2 ms of host time against 171 ms of compute per step,
    # and the published step is 58 ms longer than the 1-GPU step: launches cannot expose it.
    values = TABLES["tf_dgx1_p100"].published["AlexNet"]
    launches = 7 * 4 * 16 * 5e-6
    compute = 512 / values[0]
    missing = 8 * 512 / values[3] - compute
    assert launches < compute and launches < 0.05 * missing


def test_dgx1_replicated_misses_do_not_follow_the_tensor_count():
    # VGG16 has twice AlexNet's gradient tensors (32 against 16), so per-tensor launches would miss twice the time;
    # at 4 and 8 GPUs the two miss the same time within 3 %.
    table = TABLES["tf_dgx1_p100"]
    assert len(PRESETS["vgg16_224"]["tensor_params"]["value"]) == 2 * len(PRESETS["alexnet_227"]["tensor_params"]["value"])

    def missing_s(row, batch, gpus_index, gpus):
        values = table.published[row]
        return gpus * batch / values[gpus_index] - batch / values[0]

    for index, gpus in ((2, 4), (3, 8)):
        alexnet, vgg = missing_s("AlexNet", 512, index, gpus), missing_s("VGG16", 64, index, gpus)
        assert abs(vgg / alexnet - 1) < 0.03, (gpus, alexnet, vgg)
