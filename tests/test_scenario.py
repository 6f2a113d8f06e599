"""Scenario: JSON round trip, presets with sources, user presets, and
rejection of invalid scenarios with the field path in the message."""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from distsim.scenario import (
    PRESET_FILES,
    SCHEMA_VERSION,
    Scenario,
    load_preset,
    make_scenario,
    preset_names,
    write_user_preset,
)

REQUIRED_DEVICES = {
    "this_machine_core", "gtx_1080_ti", "k80", "p100", "v100", "a100", "h100", "h200",
    "tpu_v2_core", "tpu_v3_core", "tpu_v4_core",
}
REQUIRED_LINKS = {
    "pcie3_x16", "pcie4_x16", "pcie5_x16", "nvlink1", "nvlink2", "nvlink3", "nvlink4", "ethernet_10g",
    "ethernet_25g", "ethernet_100g", "infiniband_hdr", "infiniband_ndr", "tpu_ici", "localhost_grpc",
}
REQUIRED_WORKLOADS = {"mnist_mlp", "mnist_small_cnn", "mobilenet_v2_224", "resnet50_224"}


@pytest.mark.parametrize("kind, required", [("device", REQUIRED_DEVICES), ("link", REQUIRED_LINKS),
                                            ("workload", REQUIRED_WORKLOADS)])
def test_presets_exist_and_every_number_has_a_source(kind, required):
    assert required <= set(preset_names(kind))
    for name in preset_names(kind):
        values, sources = load_preset(kind, name)
        for key, value in values.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                assert sources.get(key), f"{kind} {name}.{key} has no source note"


@settings(max_examples=30, deadline=None)
@given(
    device=st.sampled_from(sorted(REQUIRED_DEVICES - {"tpu_v2_core", "tpu_v3_core", "tpu_v4_core"})),
    workload=st.sampled_from(sorted(REQUIRED_WORKLOADS)),
    workers=st.integers(1, 4),
    devices=st.integers(1, 8),
    batch=st.integers(64, 4096),
    buckets=st.integers(1, 4),  # the MNIST models have 4 gradient tensors
    prefetch=st.sampled_from([None, True, False]),
    policy=st.sampled_from(["DATA", "OFF"]),
)
def test_json_round_trip(device, workload, workers, devices, batch, buckets, prefetch, policy):
    s = make_scenario(device, workload, "multi_worker_mirrored", workers, devices, global_batch=batch,
                      num_buckets=buckets, prefetch=prefetch, shard_policy=policy, name="rt")
    text = json.dumps(s.to_dict())
    back = Scenario.from_dict(json.loads(text))
    assert back == s
    assert back.cluster.device.sources == s.cluster.device.sources  # provenance survives too
    assert json.loads(text)["schema_version"] == SCHEMA_VERSION


def test_save_and_load(tmp_path):
    s = make_scenario("v100", "resnet50_224", "mirrored", devices_per_worker=8, global_batch=256)
    assert Scenario.load(s.save(tmp_path / "s.json")) == s


def test_preset_with_override_records_the_override():
    s = Scenario.from_dict({
        "schema_version": 1,
        "cluster": {"device": {"preset": "k80", "efficiency": 0.5}},
        "workload": "mnist_mlp",
        "strategy": {"name": "one_device"},
    })
    assert s.cluster.device.efficiency == 0.5
    assert s.cluster.device.sources["efficiency"] == "scenario override"
    assert s.cluster.intra_link.name == "pcie3_x16"  # default for a GPU


def test_user_presets_extend_builtin(tmp_path, monkeypatch):
    monkeypatch.setenv("DISTSIM_PRESET_DIR", str(tmp_path))
    values = dict(kind="cpu", peak_flops=5e10, efficiency=0.3, memory_bandwidth_Bps=1e10,
                  memory_bytes=8e9, step_overhead_s=0.003)
    sources = {k: "measured by test" for k in values if k != "kind"}
    path = write_user_preset("device", "this_machine", values, sources)
    assert path == tmp_path / PRESET_FILES["device"]
    s = make_scenario("this_machine", "mnist_mlp", "mirrored", devices_per_worker=4, physical_cores=2)
    assert s.cluster.device.peak_flops == 5e10
    assert s.cluster.device.sources["peak_flops"] == "measured by test"
    assert "gtx_1080_ti" in preset_names("device")


def test_write_user_preset_validates(tmp_path):
    with pytest.raises(ValueError, match="peak_flops=-1"):
        write_user_preset("device", "bad", dict(kind="cpu", peak_flops=-1.0, efficiency=0.3,
                                                memory_bandwidth_Bps=1e10, memory_bytes=1e9,
                                                step_overhead_s=0.0), {}, directory=tmp_path)


def test_replace_by_path():
    s = make_scenario("gtx_1080_ti", "mobilenet_v2_224", "mirrored", devices_per_worker=4)
    t = s.replace("cluster.intra_link", "nvlink2").replace("training.global_batch", 256)
    assert t.cluster.intra_link.name == "nvlink2" and t.training.global_batch == 256
    assert s.training.global_batch == 64  # original untouched


def test_replace_accepts_numpy_scalars_as_plain_numbers():
    s = make_scenario("gtx_1080_ti", "mobilenet_v2_224", "mirrored", devices_per_worker=4)
    t = s.replace("training.global_batch", np.int64(128)).replace("cluster.inter_link.bandwidth_Bps", np.float64(2e9))
    assert type(t.training.global_batch) is int and t.training.global_batch == 128
    assert type(t.cluster.inter_link.bandwidth_Bps) is float
    assert Scenario.from_dict(json.loads(json.dumps(t.to_dict()))) == t
    with pytest.raises(ValueError, match=r"training\.global_batch=0"):
        s.replace("training.global_batch", np.int64(0))


@pytest.mark.parametrize(
    "build, match",
    [
        (lambda: make_scenario("gtx_9999"), r"cluster\.device\.preset='gtx_9999'; allowed: one of \[.*'gtx_1080_ti'"),
        (lambda: make_scenario(devices_per_worker=0), r"cluster\.devices_per_worker=0; allowed: an integer >= 1"),
        (lambda: make_scenario(num_workers=0, strategy="multi_worker_mirrored"), r"cluster\.num_workers=0"),
        (lambda: make_scenario(devices_per_worker=4, global_batch=3, drop_remainder=True),
         r"training\.global_batch=3; allowed: >= 4 replicas when drop_remainder"),
        (lambda: make_scenario(inter_link={"preset": "ethernet_10g", "bandwidth_Bps": -1.0}),
         r"cluster\.inter_link\.bandwidth_Bps=-1\.0; allowed: a finite number >= 1 and <= 1e\+16 \(bytes/s\)"),
        (lambda: make_scenario(algorithm="butterfly"), r"strategy\.algorithm='butterfly'; allowed: one of \('ring'"),
        (lambda: make_scenario(strategy="one_device", devices_per_worker=2), r"strategy\.name='one_device'"),
        (lambda: make_scenario(strategy="mirrored", num_workers=2), r"cluster\.num_workers=2"),
        (lambda: make_scenario(strategy="tpu"), r"cluster\.device\.kind='gpu'"),
        (lambda: make_scenario(mode="async"), r"strategy\.mode='async'"),
        (lambda: make_scenario(shard_policy="FILE", strategy="multi_worker_mirrored", num_workers=2, num_files=1),
         r"training\.num_files=1"),
        (lambda: make_scenario(workload={"preset": "mnist_mlp", "num_params": 0}), r"workload\.num_params=0"),
        (lambda: make_scenario(workload={"preset": "mnist_mlp", "colour": 1}), r"workload\.colour=1; allowed: no such field here"),
        (lambda: make_scenario(physical_cores=2), r"cluster\.physical_cores=2"),
        (lambda: make_scenario(compute_distribution="cauchy"), r"training\.compute_distribution='cauchy'"),
        (lambda: make_scenario(workload="mnist_mlp", num_buckets=5), r"training\.num_buckets=5; allowed: <= workload"),
        (lambda: Scenario.from_dict({"cluster": {"device": "k80"}, "workload": "mnist_mlp"}),
         r"scenario\.schema_version=None; allowed: a value \(this field is required\)"),
        (lambda: Scenario.from_dict({"schema_version": 1, "workload": "mnist_mlp"}), r"scenario\.cluster=None; allowed: a value"),
    ],
)
def test_invalid_scenarios_name_path_value_and_allowed(build, match):
    with pytest.raises(ValueError, match=match):
        build()


def test_missing_and_malformed_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="no scenario file at this path"):
        Scenario.load(tmp_path / "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        Scenario.load(bad)
