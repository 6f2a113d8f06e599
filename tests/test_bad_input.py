"""Bad input, at every public entry point, gets the one clear error.

Each case feeds one invalid input and asserts that it raises
:class:`distsim.InputError` (a ``ValueError``) whose message is one line,
names the field path and says what is allowed, within a time budget: no
traceback from deep inside, no hang, no silent "fix". The cases come from two
sources:

* generated: for every field of a scenario and of a run plan, values that
  break the field's declared rule (wrong type, out of range, NaN, a bool for a
  number, ...), built from the rule's own bounds; plus random TF_CONFIG
  addresses and sweep grids;
* written by hand: the inputs the issue that introduced this suite found
  giving wrong numbers or tracebacks, and the cross-field rules.

The printed count (``pytest -s``) is the number of generated cases.
"""

from __future__ import annotations

import dataclasses
import json
import math
import signal
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

from distsim import InputError, Scenario, make_scenario, predict, sweep
from distsim.datasets import load_mnist, mnist_subset
from distsim.real import RunPlan, validate_tf_config
from distsim.scenario import write_user_preset
from distsim.validation import Boolean, Integer, Number, OneOf, Optional, StringMap, Text

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "scenarios" / "this_machine_mirrored_4_logical_cpus_mnist.json"

#: Seconds any one bad input may take to be refused. Refusing is a few checks;
#: a case that takes longer is simulating something it should have refused.
BUDGET_S = 5.0


@contextmanager
def budget(seconds: float = BUDGET_S):
    """Fail the case if it runs longer than ``seconds`` (SIGALRM)."""
    def expired(signum, frame):
        raise TimeoutError(f"bad input not refused within {seconds} s")
    old = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def refused(call, path: str) -> InputError:
    """Run ``call``; it must raise a one-line InputError that names ``path``."""
    with budget(), pytest.raises(InputError) as info:
        call()
    message = str(info.value)
    assert "\n" not in message, message
    assert "allowed:" in message, message
    assert path in message, f"{path!r} not in {message!r}"
    return info.value


# ---------------------------------------------------------------- generated


def bad_values(rule) -> list:
    """Values ``rule`` must refuse, derived from its declared bounds."""
    if isinstance(rule, Optional):
        return [v for v in bad_values(rule.rule) if v is not None]
    common = [None, [1], {"a": 1}]
    if isinstance(rule, Integer):
        out = common + ["3", 2.5, 1.0, True, float("nan"), float("inf")]
        if rule.low is not None:
            out += [rule.low - 1, np.int64(rule.low - 1)]
        if rule.high is not None:
            out += [rule.high + 1, 10 ** 40]
        return out
    if isinstance(rule, Number):
        out = common + ["1.0", True, float("nan"), float("inf"), -float("inf")]
        if rule.low is not None:
            out += [rule.low if rule.low_open else rule.low - 1e-9 - abs(rule.low) * 1e-9]
        if rule.high is not None:
            out += [rule.high * 2 + 1]
        return out
    if isinstance(rule, OneOf):
        return common + ["no such choice", 3, str(rule.choices[0]).upper() + "_X", ""]
    if isinstance(rule, Boolean):
        return common + [0, 1, "true", "yes"]
    if isinstance(rule, Text):
        return [None, 3, ["x"], "x" * (rule.max_chars + 1)]
    if isinstance(rule, StringMap):
        return [3, "sources", [1, 2], {1: "x"}]
    return []


def ruled_fields(cls, prefix: str):
    """(path, rule) of every field of dataclass ``cls`` that declares a rule."""
    for f in dataclasses.fields(cls):
        rule = f.metadata.get("distsim_rule")
        if rule is not None and not type(rule).__name__ == "InstanceOf":
            yield f"{prefix}.{f.name}", rule


BASE = make_scenario("gtx_1080_ti", "mnist_mlp", "multi_worker_mirrored", 2, 2, global_batch=256)
SCENARIO_FIELDS = []
for _path, _part in (("cluster", BASE.cluster), ("cluster.device", BASE.cluster.device),
                     ("cluster.intra_link", BASE.cluster.intra_link), ("cluster.inter_link", BASE.cluster.inter_link),
                     ("workload", BASE.workload), ("strategy", BASE.strategy), ("training", BASE.training)):
    SCENARIO_FIELDS += [(p, r) for p, r in ruled_fields(type(_part), _path) if not p.endswith(".sources")]
SCENARIO_CASES = [(path, value) for path, rule in SCENARIO_FIELDS for value in bad_values(rule)]


def _in_json(path: str, value):
    """The example scenario's JSON with one field set to ``value``."""
    data = BASE.to_dict()
    *parents, name = path.split(".")
    node = data
    for p in parents:
        node = node[p]
    node[name] = value
    return data


@pytest.mark.parametrize("path, value", SCENARIO_CASES, ids=[f"{p}={v!r}"[:60] for p, v in SCENARIO_CASES])
def test_scenario_replace_refuses(path, value):
    refused(lambda: BASE.replace(path, value), path)


@pytest.mark.parametrize("path, value", SCENARIO_CASES, ids=[f"{p}={v!r}"[:60] for p, v in SCENARIO_CASES])
def test_scenario_json_refuses(path, value):
    try:
        data = _in_json(path, value)
        json.dumps(data, allow_nan=True)
    except TypeError:
        pytest.skip("not representable in JSON")  # e.g. a NumPy integer; replace() covers it
    refused(lambda: Scenario.from_dict(data), path)


PLAN_FIELDS = list(ruled_fields(RunPlan, "RunPlan"))
PLAN_CASES = [(path, value) for path, rule in PLAN_FIELDS for value in bad_values(rule)]


@pytest.mark.parametrize("path, value", PLAN_CASES, ids=[f"{p}={v!r}"[:60] for p, v in PLAN_CASES])
def test_run_plan_refuses(path, value):
    name = path.split(".")[1]
    base = RunPlan("multi_worker_mirrored", num_workers=2).to_dict()
    refused(lambda: RunPlan.from_dict({**base, name: value}), path)


def _bad_addresses():
    """Host:port strings that are not addresses (fixed seed)."""
    rng = np.random.default_rng(13)
    junk = [" ", "_", "/", "@", "#", "?", "%", "..", "\t", "*", "!"]
    out = [f"host{rng.choice(junk)}x:{int(rng.integers(1, 65536))}" for _ in range(20)]
    out += [f"host:{p}" for p in ("0", "65536", "1_000", "+80", "-1", "8o", "", " 80", "99999999999")]
    out += ["host", ":80", "http://host:80", "[::1:80", "[12345::]:80", "999.1.1.1:80", "a" * 64 + ":80",
            "-host:80", "host-:80", "my host:80"]
    return out


@pytest.mark.parametrize("address", _bad_addresses())
def test_tf_config_refuses_malformed_addresses(address):
    config = {"cluster": {"worker": ["localhost:20001", address]}, "task": {"type": "worker", "index": 0}}
    refused(lambda: validate_tf_config(config), "TF_CONFIG.cluster.worker[1]")


TF_CONFIG_CASES = [
    ('{"cluster": ', "TF_CONFIG"),
    ("[]", "TF_CONFIG"),
    ({"cluster": {}, "task": {"type": "worker", "index": 0}}, "TF_CONFIG.cluster"),
    ({"cluster": {"worker": []}, "task": {"type": "worker", "index": 0}}, "TF_CONFIG.cluster.worker"),
    ({"cluster": {"worker": ["localhost:1"]}, "task": {"type": "worker", "index": "0"}}, "TF_CONFIG.task.index"),
    ({"cluster": {"worker": ["localhost:1"]}, "task": {"type": "worker", "index": True}}, "TF_CONFIG.task.index"),
    ({"cluster": {"worker": ["localhost:1"]}, "task": {"type": "worker"}}, "TF_CONFIG.task"),
    ({"cluster": {"worker": ["localhost:1"]}, "task": {"type": "evaluator", "index": 1}}, "TF_CONFIG.task.index"),
    ({"cluster": {"worker": ["localhost:1"]}, "task": {"type": "worker", "index": 0}, "rpc_layer": "http"},
     "TF_CONFIG.rpc_layer"),
    ({"cluster": {"worker": ["LOCALHOST:1", "localhost:1"]}, "task": {"type": "worker", "index": 0}},
     "TF_CONFIG.cluster.worker[1]"),
]


@pytest.mark.parametrize("config, path", TF_CONFIG_CASES)
def test_tf_config_refuses(config, path):
    refused(lambda: validate_tf_config(config), path)


def _bad_grids():
    """Sweep grids with one bad entry (fixed seed): values each field refuses."""
    rng = np.random.default_rng(7)
    grids = []
    numeric = [(p, r) for p, r in SCENARIO_FIELDS if isinstance(r, (Integer, Number))]
    for i in range(60):
        path, rule = numeric[int(rng.integers(len(numeric)))]
        bad = [v for v in bad_values(rule) if isinstance(v, (int, float)) and not isinstance(v, bool)]
        good = BASE.value_at(path)
        grids.append((path, [good, bad[int(rng.integers(len(bad)))]] if good is not None else [bad[0]]))
    return grids


@pytest.mark.parametrize("path, values", _bad_grids())
def test_sweep_refuses_a_bad_grid_value(path, values):
    refused(lambda: sweep(BASE, {path: values}), path)


# ---------------------------------------------------------------- by hand


def test_count_of_generated_cases(capsys):
    counts = {
        "scenario fields x (replace, JSON)": 2 * len(SCENARIO_CASES),
        "run plan fields": len(PLAN_CASES),
        "TF_CONFIG addresses": len(_bad_addresses()),
        "sweep grids": len(_bad_grids()),
    }
    with capsys.disabled():
        print(f"\ngenerated bad inputs: {sum(counts.values())} {counts}")
    assert sum(counts.values()) >= 500


CROSS_FIELD = [
    # A step cannot hold more examples than the dataset (predicted 90,909 examples/s before).
    (lambda: make_scenario("this_machine_core", "mnist_mlp", "mirrored", devices_per_worker=4, physical_cores=2,
                           global_batch=120000), "training.global_batch"),
    (lambda: make_scenario(strategy="one_device", devices_per_worker=2), "strategy.name"),
    (lambda: make_scenario(strategy="mirrored", num_workers=2), "cluster.num_workers"),
    (lambda: make_scenario(strategy="tpu"), "cluster.device.kind"),
    (lambda: make_scenario(physical_cores=2), "cluster.physical_cores"),
    (lambda: make_scenario(devices_per_worker=4, global_batch=3, drop_remainder=True), "training.global_batch"),
    (lambda: make_scenario(strategy="multi_worker_mirrored", num_workers=2, shard_policy="FILE", num_files=1),
     "training.num_files"),
    (lambda: make_scenario(shard_policy="FILE"), "training.num_files"),
    (lambda: make_scenario(num_files=4), "training.num_files"),
    (lambda: make_scenario(devices_per_worker=2, backup_workers=2), "training.backup_workers"),
    (lambda: make_scenario(devices_per_worker=4, backup_workers=1, num_buckets=2), "training.num_buckets"),
    (lambda: make_scenario(strategy="parameter_server", num_workers=2, backup_workers=1), "training.backup_workers"),
    (lambda: make_scenario(strategy="parameter_server", num_workers=2, algorithm="ring"), "strategy.algorithm"),
    (lambda: make_scenario(num_ps=3), "strategy.num_ps"),
    (lambda: make_scenario(ps_cluster="in_process"), "strategy.ps_cluster"),
    (lambda: make_scenario(mode="async"), "strategy.mode"),
    (lambda: make_scenario(workload="mnist_mlp", num_buckets=5), "training.num_buckets"),
    (lambda: make_scenario(device={"preset": "this_machine_core", "replica_dispatch_s": 1e-3,
                                   "replica_variable_s": 2e-3}), "cluster.device.replica_variable_s"),
    # Sizes that cannot be simulated in bounded time and memory.
    (lambda: make_scenario("v100", "resnet50_224", "multi_worker_mirrored", 100_000, 16), "cluster.devices_per_worker"),
    (lambda: make_scenario(devices_per_worker=40_000), "cluster.devices_per_worker"),
    (lambda: make_scenario(devices_per_worker=64, steps=9_000), "training.steps"),
    (lambda: make_scenario(steps=10**9), "training.steps"),
    (lambda: make_scenario(workload={"preset": "mnist_mlp", "num_params": 10**30}), "workload.num_params"),
    # Presets and components.
    (lambda: make_scenario("gtx_9999"), "cluster.device.preset"),
    (lambda: make_scenario(inter_link={"preset": "ethernet_10g", "colour": 1}), "cluster.inter_link.colour"),
    (lambda: make_scenario(inter_link=5), "cluster.inter_link"),
    (lambda: Scenario.from_dict({**BASE.to_dict(), "extra": 1}), "scenario.extra"),
    (lambda: Scenario.from_dict({**BASE.to_dict(), "schema_version": 2}), "schema_version"),
    (lambda: Scenario.from_dict([1, 2]), "scenario"),
    (lambda: BASE.replace("cluster", 1), "cluster"),
    (lambda: BASE.replace("cluster.colour", 1), "cluster.colour"),
    (lambda: BASE.replace("training.global_batch.x", 1), "training.global_batch.x"),
    (lambda: BASE.replace("", 1), "path"),
    # Memory: a 1e12-parameter model on one V100.
    (lambda: predict(make_scenario("v100", {"preset": "resnet50_224", "num_params": 10**12})),
     "cluster.device.memory_bytes"),
    # FILE sharding with drop_remainder and streams shorter than a batch: an epoch with no step.
    (lambda: predict(make_scenario(strategy="multi_worker_mirrored", num_workers=4, shard_policy="FILE", num_files=4,
                                   drop_remainder=True, global_batch=20_000)), "training.global_batch"),
]


@pytest.mark.parametrize("call, path", CROSS_FIELD, ids=[p for _, p in CROSS_FIELD])
def test_cross_field_and_size_rules(call, path):
    refused(call, path)


def test_sweep_checks_every_grid_row_against_the_cross_field_rules():
    # Each value alone is valid; only the pairing (batch 3 on 4 replicas with drop_remainder) is not.
    base = make_scenario(devices_per_worker=4, drop_remainder=True, global_batch=64)
    refused(lambda: sweep(base, {"training.global_batch": [64, 3, 128]}), "training.global_batch")
    refused(lambda: sweep(base, {"training.global_batch": [64, 70_000]}), "training.global_batch")
    refused(lambda: sweep(make_scenario(), {"cluster.devices_per_worker": list(range(1, 5000))}),
            "cluster.devices_per_worker")
    refused(lambda: sweep(base, {"training.global_batch": list(range(64, 64 + 4000)),
                                 "cluster.device.efficiency": list(np.linspace(0.1, 1, 4000))}), "over[")
    refused(lambda: sweep(base, {}), "over")
    refused(lambda: sweep(base, {"training.global_batch": []}), "over['training.global_batch']")
    refused(lambda: sweep(base, {"training.nope": [1]}), "training.nope")


def test_presets_refuse_bad_files_and_values(tmp_path, monkeypatch):
    monkeypatch.setenv("DISTSIM_PRESET_DIR", str(tmp_path))
    refused(lambda: write_user_preset("device", "bad", {"kind": "cpu", "peak_flops": -1, "efficiency": 0.5,
                                                        "memory_bandwidth_Bps": 1e9, "memory_bytes": 1e9,
                                                        "step_overhead_s": 0}, {}), "device.peak_flops")
    refused(lambda: write_user_preset("gizmo", "x", {}, {}), "preset kind")
    (tmp_path / "devices.json").write_text("{not json")
    refused(lambda: make_scenario("gtx_1080_ti"), "preset file")
    (tmp_path / "devices.json").write_text(json.dumps({"schema_version": 1, "kind": "device", "presets": {"x": 3}}))
    refused(lambda: make_scenario("gtx_1080_ti"), "presets.x")


def test_scenario_files_refuse_clearly(tmp_path):
    refused(lambda: Scenario.load(tmp_path / "absent.json"), "absent.json")
    refused(lambda: Scenario.load(tmp_path), str(tmp_path))
    (tmp_path / "binary.json").write_bytes(b"\xff\xfe\x00")
    refused(lambda: Scenario.load(tmp_path / "binary.json"), "binary.json")
    (tmp_path / "nan.json").write_text(json.dumps(_in_json("training.compute_sigma", math.nan)))
    refused(lambda: Scenario.load(tmp_path / "nan.json"), "training.compute_sigma")


def test_data_loader_refuses_missing_and_corrupt_files(tmp_path):
    refused(lambda: load_mnist(tmp_path / "absent.npz"), "absent.npz")
    (tmp_path / "short.npz").write_bytes(b"PK\x03\x04 not really a zip")
    refused(lambda: load_mnist(tmp_path / "short.npz"), "short.npz")
    refused(lambda: load_mnist(tmp_path / "short.npz", verify=False), "short.npz")
    np.savez(tmp_path / "wrong.npz", x_train=np.zeros((2, 2)), y_train=np.zeros(2), x_test=np.zeros(1),
             y_test=np.zeros(1))
    refused(lambda: load_mnist(tmp_path / "wrong.npz", verify=False), "x_train")
    refused(lambda: mnist_subset(0), "n_train")
    refused(lambda: mnist_subset(10, 10_001), "n_test")


CLI_CASES = [
    (["predict", "{tmp}/absent.json"], "absent.json"),
    (["predict", "{tmp}"], "a directory"),
    (["predict", "{tmp}/bad.json"], "not valid JSON"),
    (["sweep", str(EXAMPLE), "--set", "cluster=1"], "cluster=1"),
    (["sweep", str(EXAMPLE), "--set", "cluster.physical_cores=null,-2"], "cluster.physical_cores=-2"),
    (["sweep", str(EXAMPLE), "--set", "training.global_batch"], "--set"),
    (["sweep", str(EXAMPLE), "--devices", "1,two"], "--devices"),
    (["sweep", str(EXAMPLE), "--devices", "100000"], "cluster.devices_per_worker"),
    (["predic", str(EXAMPLE)], "invalid choice"),
    (["predict"], "required"),
]


@pytest.mark.parametrize("argv, fragment", CLI_CASES, ids=[" ".join(a)[:50] for a, _ in CLI_CASES])
def test_cli_bad_input_is_one_line_and_exit_2(tmp_path, argv, fragment):
    (tmp_path / "bad.json").write_text("{not json")
    argv = [a.format(tmp=tmp_path) for a in argv]
    run = subprocess.run([sys.executable, "-m", "distsim", *argv], capture_output=True, text=True, timeout=60,
                         cwd=tmp_path)
    assert run.returncode == 2, run.stderr
    assert run.stdout == ""
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), run.stderr
    assert fragment in lines[0]
