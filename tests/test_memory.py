"""The memory check against hand arithmetic on the preset numbers."""

import json
from importlib.resources import files

import pytest

from distsim import make_scenario, predict
from distsim.validation import InputError

PRESETS = files("distsim.scenario") / "presets"


def preset(kind: str, name: str) -> dict:
    entry = json.loads((PRESETS / f"{kind}.json").read_text())["presets"][name]
    return {k: (v["value"] if isinstance(v, dict) and "value" in v else v) for k, v in entry.items()}


def test_tpu_activations_count_at_bfloat16_width():
    # ResNet-50 at global batch 1024 on a TPU v2-8 (128 images per core) is the configuration Google's TPU
    # reference model trains; it must fit the core's 8 GB.
    scenario = make_scenario("tpu_v2_core", "resnet50_224", "tpu", devices_per_worker=8, intra_link="tpu_v2_ici",
                             inter_link="tpu_v2_ici", global_batch=1024)
    workload, device = preset("workloads", "resnet50_224"), preset("devices", "tpu_v2_core")
    weights = workload["num_params"] * workload["bytes_per_param"]
    slots = max(scenario.training.optimizer_bytes_per_param - 3 * workload["bytes_per_param"], 0) / 2
    by_hand = 2 * weights + workload["num_params"] * slots + 128 * workload["activation_bytes_per_sample"] * 2 / 4
    result = predict(scenario)
    assert result.summary.memory_bytes_per_replica == pytest.approx(by_hand, rel=1e-12)  # same sums, float rounding
    assert by_hand < device["memory_bytes"]


def test_the_same_batch_at_float32_width_does_not_fit():
    scenario = make_scenario({"preset": "tpu_v2_core", "activation_value_bytes": 4}, "resnet50_224", "tpu",
                             devices_per_worker=8, intra_link="tpu_v2_ici", inter_link="tpu_v2_ici", global_batch=1024)
    with pytest.raises(InputError, match=r"^cluster\.device\.memory_bytes=8000000000\.0; .* does not fit by "):
        predict(scenario)
