"""Bad input, at every public entry point, gets the one clear error.

Each case feeds one invalid input and asserts that it raises
:class:`distsim.InputError` (a ``ValueError``) whose message is one line,
names the field (or argument, or option) and says what is allowed, within a
time budget: no traceback from deep inside, no hang, no silent "fix". At the
command lines the same holds for the printed line (``error: ...``, exit code
2). No case is skipped: a value JSON cannot hold is simply not generated for
the JSON route.

The cases are generated, per field or argument, from a list of value classes
(:func:`bad_values`): the wrong type, None, NaN, +-inf, 0, a negative, a tiny
1e-300 where the field needs a positive quantity, a huge 1e300 or 10**40, a
bool where a number is wanted, an empty or over-long string. They cover:

* every field of a scenario (through ``Scenario.replace``, scenario JSON and
  ``make_scenario``'s keywords) and every value class each field refuses;
* every argument of the functions ``distsim`` exports (``predict``,
  ``rhythm_range_s``, ``sweep``, ``compare``, the numerics, the result
  types), of ``distsim.real``'s RunPlan, Task/launch, TF_CONFIG and network
  lab, and of ``mnist_subset``/``load_mnist``;
* every file entry point with paths that are not usable (wrong type, empty,
  100,000 characters, a directory, a missing folder) and files that are not
  usable (JSON nested 100,000 deep, a 5,000-digit integer, not UTF-8);
* both command lines, in-process through their parsers (a handful run as a
  subprocess to check the real exit code and stderr).

The hand-written cases at the end are the inputs the issues that shaped this
suite found giving wrong numbers or tracebacks, and the cross-field rules.
``pytest -s -k count`` prints the number of cases.
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

import distsim
from distsim import (
    Curve,
    Event,
    InputError,
    Result,
    Scenario,
    Staleness,
    Summary,
    Trace,
    compare,
    large_batch_experiment,
    loss_scaling_lab,
    make_model,
    make_scenario,
    predict,
    rhythm_range_s,
    sweep,
    train_async,
    train_backup_sync,
    train_scenario,
    train_sync,
)
from distsim.cli import main as cli_main
from distsim.datasets import load_mnist, mnist_subset
from distsim.real import RunPlan, Task, build_tf_config, lab_scenario, launch, validate_tf_config
from distsim.real import __main__ as real_cli
from distsim.scenario import write_user_preset
from distsim.validation import Boolean, Integer, Number, OneOf, Optional, Sequence, StringMap, Text

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "scenarios" / "this_machine_mirrored_4_logical_cpus_mnist.json"

#: Seconds any one bad input may take to be refused. Refusing is a few checks;
#: a case that takes longer is simulating or training something it should have refused.
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
    """Run ``call``; it must raise a one-line InputError that names ``path``
    and says what is allowed."""
    with budget(), pytest.raises(InputError) as info:
        call()
    message = str(info.value)
    assert "\n" not in message, message
    allowed = message.rpartition("; allowed: ")[2]
    assert "; allowed: " in message and allowed.strip(), message
    assert path in message, f"{path!r} not in {message!r}"
    return info.value


def _id(*parts) -> str:
    return " ".join(str(p) for p in parts)[:70]


# ---------------------------------------------------------------- value classes

TINY, HUGE = 1e-300, 1e300
LONG_TEXT = "x" * 100_001


def bad_values(rule) -> list:
    """Values ``rule`` must refuse, by class: wrong type, None, NaN, +-inf,
    below its bound (0, negative, tiny), above it (huge), a bool for a number,
    an empty or over-long string; derived from the rule's own bounds."""
    if isinstance(rule, Optional):
        return [v for v in bad_values(rule.rule) if v is not None]
    common = [None, [1], {"a": 1}, ""]
    if isinstance(rule, Integer):
        out = common + ["3", 2.5, 1.0, True, float("nan"), float("inf"), np.float64(2.0)]
        if rule.low is not None:
            out += [rule.low - 1, np.int64(rule.low - 1), -(10 ** 40)]
        out += [rule.high + 1, 10 ** 40] if rule.high is not None else []
        return out
    if isinstance(rule, Number):
        out = common + ["1.0", True, False, float("nan"), float("inf"), -float("inf"), np.float64("nan"), -HUGE]
        if rule.low is not None:
            out += [rule.low if rule.low_open else rule.low - 1e-9 - abs(rule.low) * 1e-9]
            if rule.low > 0 or rule.low_open:
                out += [TINY, 0.0, -TINY]
        if rule.high is not None:
            out += [rule.high * 2 + 1, HUGE]
        return out
    if isinstance(rule, OneOf):
        return common + ["no such choice", 3, str(rule.choices[0]).upper() + "_X", True, LONG_TEXT]
    if isinstance(rule, Boolean):
        return common + [0, 1, "true", "yes", np.int64(1)]
    if isinstance(rule, Text):
        return [None, 3, ["x"], b"bytes", "x" * (rule.max_chars + 1)]
    if isinstance(rule, StringMap):
        return [3, "sources", [1, 2], {1: "x"}, None]
    if isinstance(rule, Sequence):
        return [3, "x", {"a": 1}, [None], [float("nan")]]
    return []


def json_safe(value) -> bool:
    """Whether ``value`` survives a JSON round trip as itself (NaN and inf do, as Python writes them)."""
    if isinstance(value, (np.generic, bytes)):
        return False
    try:
        json.dumps(value, allow_nan=True)
    except (TypeError, ValueError):
        return False
    return not (isinstance(value, dict) and any(not isinstance(k, str) for k in value))


def ruled_fields(cls, prefix: str):
    """(path, rule) of every field of dataclass ``cls`` that declares a rule of its own value."""
    for f in dataclasses.fields(cls):
        rule = f.metadata.get("distsim_rule")
        if rule is not None and type(rule).__name__ != "InstanceOf" and not (
                isinstance(rule, Optional) and type(rule.rule).__name__ == "InstanceOf"):
            yield f"{prefix}.{f.name}", rule


# ---------------------------------------------------------------- scenario fields


BASE = make_scenario("gtx_1080_ti", "mnist_mlp", "multi_worker_mirrored", 2, 2, global_batch=256)
PS = make_scenario("gtx_1080_ti", "mnist_mlp", "parameter_server", 2, 1, global_batch=256)
SCENARIO_FIELDS = []
for _path, _part in (("cluster", BASE.cluster), ("cluster.device", BASE.cluster.device),
                     ("cluster.intra_link", BASE.cluster.intra_link), ("cluster.inter_link", BASE.cluster.inter_link),
                     ("workload", BASE.workload), ("strategy", BASE.strategy), ("training", BASE.training),
                     ("", BASE)):
    SCENARIO_FIELDS += [(p.lstrip("."), r) for p, r in ruled_fields(type(_part), _path) if not p.endswith(".sources")]
SCENARIO_CASES = [(path, value) for path, rule in SCENARIO_FIELDS for value in bad_values(rule)]
JSON_CASES = [(path, value) for path, value in SCENARIO_CASES if json_safe(value)]
#: make_scenario's own keywords (the cluster's and strategy's fields) and the Training fields it passes on.
_FACTORY_KEYWORDS = {"cluster.physical_cores", "cluster.host_input_speed", "cluster.straggler_cores",
                     "cluster.num_workers", "cluster.devices_per_worker"}
FACTORY_CASES = [(path, value) for path, value in SCENARIO_CASES
                 if path.startswith(("training.", "strategy.")) or path in _FACTORY_KEYWORDS]


def _in_json(path: str, value):
    """The base scenario's JSON with one field set to ``value``."""
    data = BASE.to_dict()
    *parents, name = path.split(".")
    node = data
    for p in parents:
        node = node[p]
    node[name] = value
    return data


@pytest.mark.parametrize("path, value", SCENARIO_CASES, ids=[_id(p, repr(v)) for p, v in SCENARIO_CASES])
def test_scenario_replace_refuses(path, value):
    refused(lambda: BASE.replace(path, value), path)


@pytest.mark.parametrize("path, value", JSON_CASES, ids=[_id(p, repr(v)) for p, v in JSON_CASES])
def test_scenario_json_refuses(path, value):
    data = _in_json(path, value)
    refused(lambda: Scenario.from_dict(json.loads(json.dumps(data))), path)


@pytest.mark.parametrize("path, value", FACTORY_CASES, ids=[_id(p, repr(v)) for p, v in FACTORY_CASES])
def test_make_scenario_refuses(path, value):
    name = "strategy" if path == "strategy.name" else path.split(".")[1]
    kwargs = {"strategy": "multi_worker_mirrored", "num_workers": 2, "devices_per_worker": 2, "global_batch": 256,
              name: value}
    refused(lambda: make_scenario("gtx_1080_ti", "mnist_mlp", **kwargs), path)


TOPOLOGY_CASES = [(f"cluster.topology.{p.split('.')[-1]}", v)
                  for p, r in ruled_fields(distsim.scenario.Topology, "t") if not p.endswith(".sources")
                  for v in bad_values(r) if json_safe(v)]


@pytest.mark.parametrize("path, value", TOPOLOGY_CASES, ids=[_id(p, repr(v)) for p, v in TOPOLOGY_CASES])
def test_topology_fields_refuse(path, value):
    name = path.rpartition(".")[2]
    refused(lambda: make_scenario("v100", devices_per_worker=8, global_batch=256,
                                  topology={"preset": "dgx1_v100", name: value}), path)


def _bad_grids():
    """Sweep grids with one bad entry among good ones (fixed seed): values each numeric field refuses."""
    rng = np.random.default_rng(7)
    grids = []
    numeric = [(p, r) for p, r in SCENARIO_FIELDS if isinstance(r, (Integer, Number))
               or isinstance(r, Optional) and isinstance(r.rule, (Integer, Number))]
    for i in range(120):
        path, rule = numeric[int(rng.integers(len(numeric)))]
        bad = [v for v in bad_values(rule) if isinstance(v, (int, float)) and not isinstance(v, bool)]
        good = BASE.value_at(path)
        grids.append((path, [good, bad[int(rng.integers(len(bad)))]] if good is not None else [bad[0]]))
    return grids


SWEEP_CASES = _bad_grids()


@pytest.mark.parametrize("path, values", SWEEP_CASES, ids=[_id(p, repr(v)) for p, v in SWEEP_CASES])
def test_sweep_refuses_a_bad_grid_value(path, values):
    refused(lambda: sweep(BASE, {path: values}), path)


#: Grids whose every value is valid alone, but some row breaks a Training or Workload cross-field rule.
SWEEP_ROW_CASES = [
    (make_scenario(workload="resnet50_224", grouping="pack", global_batch=64), {"training.num_buckets": [1, 2]},
     "training.num_buckets"),
    (make_scenario(workload="resnet50_224", global_batch=64), {"workload.num_params": [25_557_032, 1_000_000]},
     "workload.num_params"),
    (make_scenario(workload="resnet50_224", global_batch=64),
     {"training.grouping": ["buckets", "pack"], "training.num_buckets": [1, 4]}, "training.num_buckets"),
    (make_scenario(devices_per_worker=4, drop_remainder=True, global_batch=64), {"training.global_batch": [64, 3]},
     "training.global_batch"),
]


@pytest.mark.parametrize("scenario, over, path", SWEEP_ROW_CASES, ids=[p for _, _, p in SWEEP_ROW_CASES])
def test_sweep_rows_obey_the_cross_field_rules(scenario, over, path):
    refused(lambda: sweep(scenario, over), path)


# ---------------------------------------------------------------- function arguments

#: Value classes of an argument, by what it should be.
COUNT = [None, "3", 2.5, True, float("nan"), float("inf"), 0, -1, 10 ** 40, [1], ""]
OPTIONAL_COUNT = [v for v in COUNT if v is not None]
INDEX = [None, "0", 1.5, True, -1, 10 ** 40, [0]]
SEED = [None, "0", 1.5, True, -1, [0]]
POSITIVE = [None, "1", True, float("nan"), float("inf"), -float("inf"), 0, -1.0, [1], ""]
NON_NEGATIVE = [None, "0", True, float("nan"), float("inf"), -float("inf"), -1.0, -TINY, [0]]
BOOL = [None, 0, 1, "true", [True]]
CHOICE = [None, 3, "no such choice", "", [1], True, LONG_TEXT]
SCENARIO = [None, {}, "scenario.json", 3, [BASE], BASE.to_dict()]
MODEL = [None, "mlp", 3, {"name": "mlp"}]
DTYPE = ["banana", np.int8, int, None, 3, [np.float32], "float8"]

RNG = np.random.default_rng(5)
X = RNG.random((64, 28, 28)).astype(np.float32)
Y = RNG.integers(0, 10, 64)
SOFTMAX = make_model("softmax_regression")
ARRAYS_X = [None, "x", 3, np.zeros((0, 28, 28), np.float32), np.full((64, 28, 28), np.nan, np.float32),
            np.zeros((64, 5), np.float32), X[:10]]
ARRAYS_Y = [None, "y", np.full(64, 10), np.full(64, -1), np.zeros(64) + 0.5, Y[:10]]


def _result(step_time_s: float = 0.1) -> Result:
    return Result("predicted", "mirrored", 2, 64, Summary(step_time_s, 640.0))


SYNC = dict(model=SOFTMAX, x=X, y=Y, num_replicas=2, global_batch=16, max_steps=2)
ASYNC = dict(model=SOFTMAX, x=X, y=Y, num_workers=2, batch_size=8, num_updates=4)
BACKUP = dict(model=SOFTMAX, x=X, y=Y, num_workers=3, num_backup=1, batch_size=8, num_steps=2)
LOSS_LAB = dict(model=SOFTMAX, x=X, y=Y, num_replicas=2, global_batch=16, steps=2)
LARGE_BATCH = dict(batch_sizes=(32, 64), epochs=1, num_train=128, num_test=64)
COMPARE = dict(predicted=[_result()], measured=[_result(0.12)])

#: (entry point, base keyword arguments, argument, its value classes, the path the error names).
ARGUMENTS = [
    ("predict", {"scenario": BASE}, "scenario", SCENARIO, "scenario"),
    ("rhythm_range_s", {"scenario": PS}, "scenario", SCENARIO, "scenario"),
    ("sweep", {"scenario": BASE, "over": {"training.global_batch": [256]}}, "scenario", SCENARIO, "scenario"),
    ("sweep", {"scenario": BASE, "over": {"training.global_batch": [256]}}, "over",
     [None, {}, [], "training.global_batch", {"training.global_batch": 256}, {"training.global_batch": []},
      {"training.global_batch": "256"}, {5: [1]}], "over"),
    ("train_scenario", {"scenario": BASE}, "scenario", SCENARIO, "scenario"),
    ("train_scenario", {"scenario": BASE}, "learning_rate", POSITIVE, "learning_rate"),
    ("train_scenario", {"scenario": BASE}, "max_steps", OPTIONAL_COUNT, "max_steps"),
    ("train_scenario", {"scenario": BASE}, "dtype", DTYPE, "dtype"),
    ("compare", COMPARE, "predicted", [None, 3, "x", [], [None], [3], {"a": _result()}], "predicted"),
    ("compare", COMPARE, "measured", [None, 3, "x", [], [None], [[]], [_result(), _result()]], "measured"),
    ("compare", COMPARE, "labels", [3, "x", [], ["a", "b"], [3]], "labels"),
    ("compare", COMPARE, "baseline", [v for v in INDEX if v is not None] + [1], "baseline"),
    ("make_model", {"name": "mlp"}, "name", CHOICE, "model"),
    ("make_model", {"name": "mlp"}, "hidden", COUNT, "hidden"),
    ("make_model", {"name": "mlp"}, "l2", NON_NEGATIVE, "l2"),
    ("make_model", {"name": "mlp"}, "colour", [1], "colour"),
    *[("train_sync", SYNC, arg, values, arg) for arg, values in (
        ("model", MODEL), ("x", ARRAYS_X), ("y", ARRAYS_Y), ("num_replicas", COUNT), ("global_batch", COUNT),
        ("learning_rate", POSITIVE), ("epochs", COUNT), ("max_steps", OPTIONAL_COUNT), ("algorithm", CHOICE),
        ("num_workers", COUNT), ("policy", CHOICE), ("drop_remainder", BOOL), ("shuffle", BOOL), ("seed", SEED),
        ("dtype", DTYPE), ("eval_every", OPTIONAL_COUNT), ("step_time_s", [v for v in POSITIVE if v is not None]),
        ("strategy", [3, [1], LONG_TEXT]))],
    *[("train_async", ASYNC, arg, values, arg) for arg, values in (
        ("model", MODEL), ("x", ARRAYS_X), ("y", ARRAYS_Y), ("num_workers", COUNT), ("batch_size", COUNT),
        ("num_updates", COUNT), ("learning_rate", POSITIVE), ("compute_mean_s", POSITIVE),
        ("distribution", CHOICE), ("sigma", [None, "1", float("nan"), -1.0, float("inf"), 1e300]),
        ("push_s", NON_NEGATIVE), ("pull_s", NON_NEGATIVE), ("ps_service_s", NON_NEGATIVE),
        ("staleness_aware", BOOL), ("max_staleness", [v for v in INDEX if v is not None]), ("bound_policy", CHOICE),
        ("shuffle", BOOL), ("seed", SEED), ("dtype", DTYPE), ("eval_every", OPTIONAL_COUNT), ("log", [3, "log"]))],
    *[("train_backup_sync", BACKUP, arg, values, arg) for arg, values in (
        ("model", MODEL), ("x", ARRAYS_X), ("num_workers", COUNT), ("num_backup", INDEX), ("batch_size", COUNT),
        ("num_steps", COUNT), ("learning_rate", POSITIVE), ("compute_mean_s", POSITIVE), ("distribution", CHOICE),
        ("comm_s", NON_NEGATIVE), ("shuffle", BOOL), ("seed", SEED), ("dtype", DTYPE))],
    *[("loss_scaling_lab", LOSS_LAB, arg, values, arg) for arg, values in (
        ("model", MODEL), ("x", ARRAYS_X), ("y", ARRAYS_Y), ("num_replicas", COUNT), ("global_batch", COUNT),
        ("learning_rate", POSITIVE), ("steps", COUNT), ("mistakes", [None, (), "x", ("no such mistake",)]),
        ("algorithm", CHOICE), ("shuffle", BOOL), ("seed", SEED), ("dtype", DTYPE))],
    *[("large_batch_experiment", LARGE_BATCH, arg, values, arg) for arg, values in (
        ("model_name", CHOICE), ("batch_sizes", [None, (), "x", (0,), (32.5,), (10 ** 40,)]), ("epochs", COUNT),
        ("base_lr", POSITIVE), ("base_batch", COUNT), ("warmup_epochs", NON_NEGATIVE),
        ("variants", [None, (), "x", ("no such variant",)]), ("num_train", OPTIONAL_COUNT),
        ("num_test", OPTIONAL_COUNT), ("num_replicas", COUNT), ("seed", SEED), ("dtype", DTYPE))],
    *[("mnist_subset", {"n_train": 10, "n_test": 10}, arg, values, arg) for arg, values in (
        ("n_train", OPTIONAL_COUNT), ("n_test", OPTIONAL_COUNT), ("dtype", DTYPE), ("flatten", BOOL))],
    *[("Summary", {"step_time_s": 0.1, "throughput_samples_per_s": 10.0}, arg, values, arg) for arg, values in (
        # None and NaN are "not known" (a training run without a time axis, the dashboard's empty table).
        ("step_time_s", [v for v in POSITIVE if v is not None and v == v]),
        ("throughput_samples_per_s", [v for v in POSITIVE if v is not None and v == v]),
        ("speedup", ["1", float("inf"), [1], True]), ("epoch_time_s", ["1", -float("inf"), [1]]))],
    *[("Event", {"device": "gpu0", "kind": "compute", "start_s": 0.0, "end_s": 1.0, "step": 0}, arg, values, arg)
      for arg, values in (("device", [None, 3]), ("kind", CHOICE), ("start_s", [None, "0", float("nan"), 2.0]),
                          ("end_s", [None, "1", float("inf"), -1.0]), ("step", [None, -1, 1.5, "0"]),
                          ("label", [None, 3]))],
    *[("Result", {"source": "predicted", "strategy": "mirrored", "num_replicas": 2, "global_batch": 64,
                  "summary": Summary(0.1, 640.0)}, arg, values, arg) for arg, values in (
        ("source", CHOICE), ("strategy", [None, 3, LONG_TEXT]), ("num_replicas", COUNT), ("global_batch", COUNT),
        ("summary", [None, {}, 3]), ("trace", [3, {}]), ("curve", [3, {}]), ("meta", [3, [1], {1: "x"}]))],
    *[("Curve", {"step": np.arange(3), "time_s": np.zeros(3), "loss": np.ones(3), "accuracy": np.ones(3)},
       arg, values, arg) for arg, values in (("step", [None, "x", np.arange(4)]), ("loss", [None, np.ones(2)]))],
    *[("Staleness", {"staleness": np.arange(3), "worker": np.zeros(3, int)}, arg, values, arg)
      for arg, values in (("staleness", [None, "x", np.arange(4)]), ("worker", [None, np.zeros(2, int)]))],
]
ENTRY = {"predict": predict, "rhythm_range_s": rhythm_range_s, "sweep": sweep, "train_scenario": train_scenario,
         "compare": compare, "train_sync": train_sync, "train_async": train_async,
         "train_backup_sync": train_backup_sync, "loss_scaling_lab": loss_scaling_lab,
         "large_batch_experiment": large_batch_experiment, "mnist_subset": mnist_subset, "Summary": Summary,
         "Event": Event, "Result": Result, "Curve": Curve, "Staleness": Staleness}
ARGUMENT_CASES = [(entry, base, arg, value, path) for entry, base, arg, values, path in ARGUMENTS for value in values]


def _call(entry: str, base: dict, arg: str, value):
    if entry == "make_model":
        kwargs = {**base, arg: value}
        return make_model(kwargs.pop("name"), **kwargs)
    return ENTRY[entry](**{**base, arg: value})


@pytest.mark.parametrize("entry, base, arg, value, path", ARGUMENT_CASES,
                         ids=[_id(e, a, repr(v)) for e, _, a, v, _ in ARGUMENT_CASES])
def test_public_functions_refuse_bad_arguments(entry, base, arg, value, path):
    refused(lambda: _call(entry, base, arg, value), path)


# ---------------------------------------------------------------- distsim.real: plan, tasks, TF_CONFIG, lab

PLAN_FIELDS = list(ruled_fields(RunPlan, "RunPlan"))
PLAN_CASES = [(path, value) for path, rule in PLAN_FIELDS for value in bad_values(rule)]
PLAN_JSON_CASES = [(path, value) for path, value in PLAN_CASES if json_safe(value)]
PLAN_BASE = dict(strategy="multi_worker_mirrored", num_workers=2)


@pytest.mark.parametrize("path, value", PLAN_CASES, ids=[_id(p, repr(v)) for p, v in PLAN_CASES])
def test_run_plan_refuses(path, value):
    refused(lambda: RunPlan(**{**PLAN_BASE, path.split(".")[1]: value}), path)


@pytest.mark.parametrize("path, value", PLAN_JSON_CASES, ids=[_id(p, repr(v)) for p, v in PLAN_JSON_CASES])
def test_run_plan_json_refuses(path, value):
    data = json.loads(json.dumps({**RunPlan(**PLAN_BASE).to_dict(), path.split(".")[1]: value}))
    refused(lambda: RunPlan.from_dict(data), path)


TASK_FIELDS = list(ruled_fields(Task, "Task")) + [("Task.argv", None)]
TASK_CASES = [(path, value) for path, rule in TASK_FIELDS
              for value in (bad_values(rule) if rule else [None, [], "true", [3], ["a\0b"], ("true",)])]
TASK_CASES += [("Task.name", v) for v in ("", " ", "a/b", ".", "..")]
TASK_CASES += [("Task.env.", {"": "x"}), ("Task.env.A=B", {"A=B": "x"}), ("Task.env.A", {"A": "x\0y"}),
               ("Task.env.A", {"A": 3}), ("Task.ready_pattern", "(unclosed")]


@pytest.mark.parametrize("path, value", TASK_CASES, ids=[_id(p, repr(v)) for p, v in TASK_CASES])
def test_task_refuses(path, value):
    name = path.split(".")[1]
    refused(lambda: Task(**{"name": "w0", "argv": ["true"], name: value}), path)


LAUNCH_CASES = ([("tasks", v) for v in (None, 3, "task", [], [None], [3])]
                + [("log_dir", v) for v in (None, 5, "", LONG_TEXT, 2.5)]
                + [(arg, v) for arg in ("timeout_s", "ready_timeout_s")
                   for v in (None, "1", 0, -1.0, TINY, float("nan"), float("inf"), HUGE, True)])


@pytest.mark.parametrize("arg, value", LAUNCH_CASES, ids=[_id(a, repr(v)) for a, v in LAUNCH_CASES])
def test_launch_refuses_before_starting_anything(tmp_path, arg, value):
    kwargs = {"tasks": [Task("a", ["true"], ready_pattern=None)], "log_dir": tmp_path, "timeout_s": 30.0,
              arg: value}
    refused(lambda: launch(**kwargs), arg)
    assert not any(tmp_path.iterdir())  # no log file: nothing was started


def _bad_addresses():
    """Host:port strings that are not addresses (fixed seed)."""
    rng = np.random.default_rng(13)
    junk = [" ", "_", "/", "@", "#", "?", "%", "..", "\t", "*", "!", "\n", "\0"]
    # Index the list: rng.choice would make NumPy strings, which drop a trailing NUL.
    out = [f"host{junk[int(rng.integers(len(junk)))]}x:{int(rng.integers(1, 65536))}" for _ in range(20)]
    out += [f"host:{p}" for p in ("0", "65536", "1_000", "+80", "-1", "8o", "", " 80", "99999999999", "80\n",
                                  "80 ", "٨٠")]
    out += ["host", ":80", "http://host:80", "[::1:80", "[12345::]:80", "999.1.1.1:80", "a" * 64 + ":80",
            "-host:80", "host-:80", "my host:80", "localhost:2222\n", "\nlocalhost:2222", "localhost\n:2222",
            "a" * 300 + ".com:80", 3, None, ["localhost:1"], b"localhost:1"]
    return out


@pytest.mark.parametrize("address", _bad_addresses(), ids=[repr(a)[:40] for a in _bad_addresses()])
def test_tf_config_refuses_malformed_addresses(address):
    config = {"cluster": {"worker": ["localhost:20001", address]}, "task": {"type": "worker", "index": 0}}
    refused(lambda: validate_tf_config(config), "TF_CONFIG.cluster.worker[1]")


def _cluster(task):
    return {"cluster": {"worker": ["localhost:1", "localhost:2"]}, "task": task}


TF_CONFIG_CASES = [
    ('{"cluster": ', "TF_CONFIG"),
    ("[]", "TF_CONFIG"),
    ("", "TF_CONFIG"),
    ("[" * 100_000 + "]" * 100_000, "TF_CONFIG"),
    ('{"cluster": {"worker": ["localhost:1"]}, "task": {"type": "worker", "index": ' + "9" * 5000 + "}}",
     "TF_CONFIG"),
    (b"\xff\xfe", "TF_CONFIG"),
    (None, "TF_CONFIG"),
    (3, "TF_CONFIG"),
    ({"cluster": {}, "task": {"type": "worker", "index": 0}}, "TF_CONFIG.cluster"),
    ({"cluster": {"worker": []}, "task": {"type": "worker", "index": 0}}, "TF_CONFIG.cluster.worker"),
    ({"cluster": {"worker": "localhost:1"}, "task": {"type": "worker", "index": 0}}, "TF_CONFIG.cluster.worker"),
    ({"cluster": {"gardener": ["localhost:1"]}, "task": {"type": "worker", "index": 0}}, "TF_CONFIG.cluster"),
    ({"cluster": {"ps": ["localhost:1"]}, "task": {"type": "ps", "index": 0}}, "TF_CONFIG.cluster"),
    ({"cluster": {"worker": ["localhost:1"], "chief": ["localhost:2", "localhost:3"]},
      "task": {"type": "worker", "index": 0}}, "TF_CONFIG.cluster.chief"),
    (_cluster({"type": "worker", "index": "0"}), "TF_CONFIG.task.index"),
    (_cluster({"type": "worker", "index": True}), "TF_CONFIG.task.index"),
    (_cluster({"type": "worker", "index": 0.0}), "TF_CONFIG.task.index"),
    (_cluster({"type": "worker", "index": np.float64(0)}), "TF_CONFIG.task.index"),
    (_cluster({"type": "worker", "index": -1}), "TF_CONFIG.task.index"),
    (_cluster({"type": "worker", "index": 2}), "TF_CONFIG.task.index"),
    (_cluster({"type": "worker", "index": np.int64(2)}), "TF_CONFIG.task.index"),
    (_cluster({"type": "worker", "index": 10 ** 40}), "TF_CONFIG.task.index"),
    (_cluster({"type": "worker"}), "TF_CONFIG.task"),
    (_cluster(None), "TF_CONFIG.task"),
    (_cluster({"type": "worker", "index": 0, "extra": 1}), "TF_CONFIG.task"),
    (_cluster({"type": "evaluator", "index": 1}), "TF_CONFIG.task.index"),
    (_cluster({"type": "ps", "index": 0}), "TF_CONFIG.task.type"),
    (_cluster({"type": 3, "index": 0}), "TF_CONFIG.task.type"),
    ({**_cluster({"type": "worker", "index": 0}), "rpc_layer": "http"}, "TF_CONFIG.rpc_layer"),
    ({**_cluster({"type": "worker", "index": 0}), "environment": "mars"}, "TF_CONFIG.environment"),
    ({**_cluster({"type": "worker", "index": 0}), "colour": "red"}, "TF_CONFIG.colour"),
    ({"cluster": {"worker": ["LOCALHOST:1", "localhost:1"]}, "task": {"type": "worker", "index": 0}},
     "TF_CONFIG.cluster.worker[1]"),
]


@pytest.mark.parametrize("config, path", TF_CONFIG_CASES, ids=[_id(path, repr(c)) for c, path in TF_CONFIG_CASES])
def test_tf_config_refuses(config, path):
    refused(lambda: validate_tf_config(config), path)


def test_tf_config_accepts_numpy_task_indexes():
    # np.int64(0) is index 0 (e.g. from np.arange over the tasks), stored as the int TensorFlow's JSON needs.
    config = validate_tf_config(_cluster({"type": "worker", "index": np.int64(1)}))
    assert config["task"]["index"] == 1 and type(config["task"]["index"]) is int
    assert build_tf_config({"worker": ["localhost:1"]}, "worker", np.int32(0))["task"]["index"] == 0


#: lab_scenario's arguments; a NIC rate under 8 bit/s is one htb cannot shape (tc passes the kernel whole
#: bytes per second, and sch_htb.c refuses a rate of 0), so 1e-300 Mbit/s must fail before any host exists.
LAB_CASES = ([("rate_mbit", v) for v in ("100", True, float("nan"), float("inf"), 0, -1.0, TINY, 7e-6, 1e6, [1])]
             + [("num_workers", v) for v in COUNT]
             + [("straggler_cores", v) for v in ("1", float("nan"), -1.0, TINY, HUGE)]
             + [("steps", v) for v in COUNT])


@pytest.mark.parametrize("arg, value", LAB_CASES, ids=[_id(a, repr(v)) for a, v in LAB_CASES])
def test_network_lab_scenario_refuses(arg, value):
    path = {"straggler_cores": "cluster.straggler_cores", "steps": "training.steps"}.get(arg, arg)
    refused(lambda: lab_scenario("parameter_server", **{"num_workers": 2, "rate_mbit": 100.0, arg: value}), path)


# ---------------------------------------------------------------- files

#: Paths no file entry point can use, by class; "{dir}" is an existing directory, "{missing}" a missing folder.
BAD_PATHS = [None, 5, 2.5, b"bytes.json", ["a.json"], "", "a" * 100_000, "{dir}", "{missing}/x.json",
             "{dir}/" + "a" * 300 + ".json", "a\0b.json"]
#: Files no reader can use: (name, bytes).
BAD_FILES = [("deep.json", b"[" * 100_000 + b"]" * 100_000), ("bigint.json", b'{"a": ' + b"9" * 5000 + b"}"),
             ("binary.json", b"\xff\xfe\x00"), ("empty.json", b""), ("broken.json", b"{not json"),
             ("list.json", b"[1, 2]"), ("nan.json", b"NaN")]


def _writers():
    result = predict(BASE)
    return {"Scenario.save": BASE.save, "Result.save": result.save, "RunPlan.save": RunPlan(**PLAN_BASE).save,
            "Trace.save_chrome_trace": result.trace.save_chrome_trace}


READERS = {"Scenario.load": Scenario.load, "Result.load": Result.load, "RunPlan.load": RunPlan.load,
           "load_mnist": lambda p: load_mnist(p, verify=False)}
WRITERS = ("Scenario.save", "Result.save", "RunPlan.save", "Trace.save_chrome_trace")
PATH_CASES = [(entry, path) for entry in (*READERS, *WRITERS) for path in BAD_PATHS
              if not (entry == "load_mnist" and path is None)]  # load_mnist(None) is the default file
FILE_CASES = [(entry, name, data) for entry in READERS if entry != "load_mnist" for name, data in BAD_FILES]


def _path(value, tmp_path):
    if isinstance(value, str):
        return value.replace("{dir}", str(tmp_path)).replace("{missing}", str(tmp_path / "no" / "such"))
    return value


@pytest.fixture(scope="module")
def writers():
    return _writers()


@pytest.mark.parametrize("entry, path", PATH_CASES, ids=[_id(e, repr(p)[:30]) for e, p in PATH_CASES])
def test_file_entry_points_refuse_unusable_paths(tmp_path, writers, entry, path):
    path = _path(path, tmp_path)
    shown = str(path)[:40] if isinstance(path, str) and path else ""
    call = (lambda: READERS[entry](path)) if entry in READERS else (lambda: writers[entry](path))
    error = refused(call, "")
    assert shown in str(error) or "path" in str(error) or "file" in str(error) or "folder" in str(error), str(error)


@pytest.mark.parametrize("entry, name, data", FILE_CASES, ids=[_id(e, n) for e, n, _ in FILE_CASES])
def test_file_readers_refuse_unusable_files(tmp_path, entry, name, data):
    (tmp_path / name).write_bytes(data)
    refused(lambda: READERS[entry](tmp_path / name), "")


# ---------------------------------------------------------------- the command lines, in process


def cli_refuses(main, argv, fragment: str, capsys) -> str:
    """Run a CLI's ``main(argv)`` in this process: exit code 2 (returned or
    from argparse's SystemExit), nothing on stdout, one ``error: ...`` line
    on stderr that contains ``fragment``."""
    with budget():
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code
    out, err = capsys.readouterr()
    assert code == 2, (code, out, err)
    assert out == "", out
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert fragment in lines[0], lines[0]
    return lines[0]


CLI_CASES = [
    (["predict", "{tmp}/absent.json"], "absent.json"),
    (["predict", "{tmp}"], "a directory"),
    (["predict", "{tmp}/bad.json"], "not valid JSON"),
    (["predict", "{tmp}/deep.json"], "nested more than"),
    (["predict", "{tmp}/bigint.json"], "4,300 digits"),
    (["predict", "a" * 100_000], "scenario file"),
    (["predict", ""], "scenario file"),
    (["predict", str(EXAMPLE), "--trace", ""], "--trace"),
    (["predict", str(EXAMPLE), "--trace", "{tmp}"], "--trace"),
    (["predict", str(EXAMPLE), "--trace", "{tmp}/no/such/trace.json"], "--trace"),
    (["predict", str(EXAMPLE), "--trace", "a" * 100_000], "--trace"),
    (["predict", str(EXAMPLE), "--trace"], "--trace"),
    (["predict", str(EXAMPLE), "--colour"], "unrecognized"),
    (["sweep", str(EXAMPLE), "--set", "cluster=1"], "cluster=1"),
    (["sweep", str(EXAMPLE), "--set", "cluster.physical_cores=null,-2"], "cluster.physical_cores=-2"),
    (["sweep", str(EXAMPLE), "--set", "training.global_batch"], "--set"),
    (["sweep", str(EXAMPLE), "--set", "=1"], "--set"),
    (["sweep", str(EXAMPLE), "--set", "training.global_batch="], "--set"),
    (["sweep", str(EXAMPLE), "--set", "training.global_batch=64", "--set", "training.global_batch=128"], "--set"),
    (["sweep", str(EXAMPLE), "--devices", "1,2", "--set", "cluster.devices_per_worker=4"], "--devices"),
    (["sweep", str(EXAMPLE), "--workers", "1", "--set", "cluster.num_workers=2"], "--workers"),
    (["sweep", str(EXAMPLE), "--set", "training.global_batch=nan"], "training.global_batch"),
    (["sweep", str(EXAMPLE), "--set", "training.global_batch=1e300"], "training.global_batch"),
    (["sweep", str(EXAMPLE), "--set", "cluster.device.peak_flops=1e-300"], "cluster.device.peak_flops"),
    (["sweep", str(EXAMPLE), "--set", "training.global_batch=" + "9" * 5000], "training.global_batch"),
    (["sweep", str(EXAMPLE), "--set", "training.nope=1"], "training.nope"),
    (["sweep", str(EXAMPLE), "--devices", "1,two"], "--devices"),
    (["sweep", str(EXAMPLE), "--devices", ""], "--devices"),
    (["sweep", str(EXAMPLE), "--devices", ","], "--devices"),
    (["sweep", str(EXAMPLE), "--devices", "1," * 6000], "--devices"),
    (["sweep", str(EXAMPLE), "--devices", "0"], "cluster.devices_per_worker"),
    (["sweep", str(EXAMPLE), "--devices", "100000"], "cluster.devices_per_worker"),
    (["sweep", str(EXAMPLE), "--workers", ""], "--workers"),
    (["sweep", str(EXAMPLE), "--workers", "2"], "cluster.num_workers"),
    (["sweep", str(EXAMPLE), "--workers", "-1"], "cluster.num_workers"),
    (["predic", str(EXAMPLE)], "invalid choice"),
    (["predict"], "required"),
    ([], "required"),
    (["info", "--colour"], "unrecognized"),
]


@pytest.mark.parametrize("argv, fragment", CLI_CASES, ids=[_id(*a)[:50] for a, _ in CLI_CASES])
def test_cli_refuses_in_one_line(tmp_path, capsys, argv, fragment):
    (tmp_path / "bad.json").write_text("{not json")
    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    (tmp_path / "bigint.json").write_text('{"schema_version": ' + "9" * 5000 + "}")
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    cli_refuses(cli_main, argv, fragment, capsys)


@pytest.fixture
def no_real_run(monkeypatch):
    """Make every way the real CLI could start TensorFlow or a process fail loudly: a bad value must be
    refused before any of them."""
    import distsim.real.experiment as experiment
    import distsim.real.netlab as netlab

    def reached(*args, **kwargs):
        raise AssertionError("a bad value reached the real run")
    import types

    calibrate = sys.modules["distsim.real.calibrate"]  # the package's attribute of that name is the function

    monkeypatch.setattr(experiment, "run", reached)
    monkeypatch.setattr(netlab, "run_point", reached)
    monkeypatch.setattr(netlab, "run", reached)
    monkeypatch.setattr(calibrate, "calibrate", reached)
    monkeypatch.setattr(real_cli, "die_with_parent", lambda: None)
    for name in ("runners", "microbench"):  # imported by the commands when they start work (and TensorFlow)
        monkeypatch.setitem(sys.modules, f"distsim.real.{name}",
                            types.SimpleNamespace(run_plan=reached, run_spec=reached))


NETLAB = ["netlab", "--strategy", "parameter_server", "--rate-mbit", "100"]
REAL_CLI_CASES = [
    *[(["netlab", "--strategy", "parameter_server", "--rate-mbit", v], "--rate-mbit")
      for v in ("1e-300", "0", "-5", "nan", "inf", "7e-6", "1e300")],
    (["netlab", "--strategy", "parameter_server", "--rate-mbit", "fast"], "--rate-mbit"),
    (["netlab", "--strategy", "parameter_server"], "--rate-mbit"),
    (["netlab", "--strategy", "ring_allreduce", "--rate-mbit", "100"], "--strategy"),
    *[(NETLAB + ["--workers", v], "--workers") for v in ("0", "-1", "17", "two")],
    *[(NETLAB + ["--steps", v], "--steps") for v in ("0", "2", "100000", "x")],
    *[(NETLAB + ["--straggler-cores", v], "--straggler-cores") for v in ("0", "-1", "nan", "1e-300", "inf")],
    *[(NETLAB + ["--timeout", v], "--timeout") for v in ("0", "-1", "nan", "inf", "1e300")],
    (NETLAB + ["--workload", "resnet50_224"], "--workload"),
    (NETLAB + ["--network", "wifi"], "--network"),
    *[(["run", "--strategy", "mirrored", *extra], path) for extra, path in (
        (["--workers", "0"], "RunPlan.num_workers"), (["--replicas", "-1"], "RunPlan.replicas_per_worker"),
        (["--batch", "0"], "RunPlan.per_replica_batch"), (["--steps", "0"], "RunPlan.steps_per_epoch"),
        (["--epochs", "0"], "RunPlan.epochs"), (["--seed", "-1"], "RunPlan.seed"), (["--ps", "1"], "RunPlan.num_ps"),
        (["--timeout", "nan"], "--timeout"), (["--timeout", "0"], "--timeout"), (["--out", ""], "--out"),
        (["--out", "{tmp}"], "--out"), (["--out", "{tmp}/no/such.json"], "--out"), (["--workers", "x"], "--workers"),
        (["--steps", "1"], "RunPlan.warmup_steps"))],
    (["run", "--strategy", "horovod"], "--strategy"),
    (["run"], "--strategy"),
    (["worker"], "--scenario"),
    (["worker", "--plan", "{tmp}/absent.json"], "absent.json"),
    (["worker", "--plan", "{tmp}"], "a directory"),
    (["worker", "--plan", "{tmp}/bad.json"], "not valid JSON"),
    (["worker", "--scenario", "{tmp}/deep.json"], "nested more than"),
    (["worker", "--plan", "{tmp}/plan.json", "--tf-config", ""], "TF_CONFIG"),
    (["worker", "--plan", "{tmp}/plan.json", "--tf-config", "[]"], "TF_CONFIG"),
    (["worker", "--plan", "{tmp}/plan.json", "--tf-config",
      '{"cluster": {"worker": ["localhost:1\\n"]}, "task": {"type": "worker", "index": 0}}'], "TF_CONFIG.cluster"),
    (["worker", "--plan", "{tmp}/plan.json", "--progress-every-s", "nan"], "--progress-every-s"),
    (["worker", "--plan", "{tmp}/plan.json", "--progress-every-s", "-1"], "--progress-every-s"),
    (["worker", "--plan", "{tmp}/plan.json", "--out", "{tmp}"], "--out"),
    (["calibrate", "--repeats", "0"], "--repeats"),
    (["calibrate", "--repeats", "1000000"], "--repeats"),
    (["calibrate", "--out", "{tmp}"], "--out"),
    (["microbench", "--spec", "{tmp}/absent.json"], "absent.json"),
    (["microbench", "--spec", "{tmp}/deep.json"], "nested more than"),
    (["tpu", "--colour"], "unrecognized"),
    (["teleport"], "invalid choice"),
]


@pytest.mark.parametrize("argv, fragment", REAL_CLI_CASES, ids=[_id(*a)[:50] for a, _ in REAL_CLI_CASES])
def test_real_cli_refuses_in_one_line(tmp_path, capsys, no_real_run, argv, fragment):
    (tmp_path / "bad.json").write_text("{not json")
    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    RunPlan(**PLAN_BASE).save(tmp_path / "plan.json")
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    cli_refuses(real_cli.main, argv, fragment, capsys)


#: A few cases as a real subprocess: the exit code and stderr a shell sees.
SUBPROCESS_CASES = [
    (["-m", "distsim", "predict", "{tmp}/bad.json"], "not valid JSON"),
    (["-m", "distsim", "sweep", str(EXAMPLE), "--devices", ""], "--devices"),
    (["-m", "distsim.real", "netlab", "--strategy", "parameter_server", "--rate-mbit", "1e-300"], "--rate-mbit"),
]


@pytest.mark.parametrize("argv, fragment", SUBPROCESS_CASES, ids=[_id(*a[2:4]) for a, _ in SUBPROCESS_CASES])
def test_cli_bad_input_is_one_line_and_exit_2(tmp_path, argv, fragment):
    (tmp_path / "bad.json").write_text("{not json")
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    run = subprocess.run([sys.executable, *argv], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert run.returncode == 2, run.stderr
    assert run.stdout == ""
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), run.stderr
    assert fragment in lines[0]


# ---------------------------------------------------------------- by hand


ISSUE_CASES = [
    # A topology preset describes one server: a DGX-1 holds 8 GPUs, not 16 or 1,024.
    (lambda: make_scenario("v100", topology="dgx1_v100", devices_per_worker=16, global_batch=256),
     "cluster.devices_per_worker"),
    (lambda: make_scenario("v100", topology="dgx1_v100", devices_per_worker=1024, global_batch=1024),
     "cluster.devices_per_worker"),
    (lambda: make_scenario("v100", topology="dgx2_nvswitch", devices_per_worker=32, global_batch=256),
     "cluster.devices_per_worker"),
    (lambda: BASE.replace("cluster.device", "v100").replace("cluster.topology", "dgx1_v100")
     .replace("cluster.devices_per_worker", 9), "cluster.devices_per_worker"),
    # Knobs the model would ignore.
    (lambda: make_scenario(strategy="parameter_server", mode="sync", num_workers=1, devices_per_worker=2,
                           num_ps=2, ps_placement="host_cpu"), "strategy.num_ps"),
    (lambda: make_scenario(fusion_threshold_bytes=2**20), "training.fusion_threshold_bytes"),
    (lambda: make_scenario(fusion_cycle_s=0.01), "training.fusion_cycle_s"),
    (lambda: make_scenario(grouping="pack", fusion_cycle_s=0.01), "training.fusion_cycle_s"),
    (lambda: make_scenario(compute_sigma=0.5), "training.compute_sigma"),
    (lambda: make_scenario(compute_distribution="exponential", compute_sigma=0.5), "training.compute_sigma"),
    (lambda: make_scenario(bytes_per_pack=1024), "training.bytes_per_pack"),
    (lambda: make_scenario(inter_algorithm="tree"), "strategy.inter_algorithm"),
    (lambda: make_scenario(ps_local_sum=True), "strategy.ps_local_sum"),
    # Tiny and huge floats that pass "> 0" would overflow in the model.
    (lambda: predict(BASE.replace("cluster.inter_link.bandwidth_Bps", TINY)), "cluster.inter_link.bandwidth_Bps"),
    (lambda: predict(BASE.replace("cluster.device.peak_flops", TINY)), "cluster.device.peak_flops"),
    (lambda: predict(BASE.replace("cluster.device.peak_flops", HUGE)), "cluster.device.peak_flops"),
    (lambda: predict(BASE.replace("cluster.device.efficiency", TINY)), "cluster.device.efficiency"),
    (lambda: predict(BASE.replace("cluster.inter_link.latency_s", HUGE)), "cluster.inter_link.latency_s"),
    (lambda: predict(BASE.replace("workload.flops_per_sample", HUGE)), "workload.flops_per_sample"),
    (lambda: rhythm_range_s(PS.replace("cluster.inter_link.bandwidth_Bps", TINY)), "cluster.inter_link.bandwidth_Bps"),
    (lambda: rhythm_range_s(BASE), "strategy.mode"),
    # A run plan that would fail, or silently do something else, inside the task.
    (lambda: RunPlan("mirrored", model_kwargs={"banana": 1}), "RunPlan.model_kwargs.banana"),
    (lambda: RunPlan("mirrored", model_kwargs={"filters": 8}), "RunPlan.model_kwargs.filters"),
    (lambda: RunPlan("mirrored", model="small_cnn", model_kwargs={"hidden": 128}), "RunPlan.model_kwargs.hidden"),
    (lambda: RunPlan("mirrored", model_kwargs={"hidden": 0}), "RunPlan.model_kwargs.hidden"),
    (lambda: RunPlan("mirrored", model_kwargs={"hidden": 10 ** 9}), "RunPlan.model_kwargs.hidden"),
    (lambda: RunPlan("mirrored", model_kwargs={"l2": -1.0}), "RunPlan.model_kwargs.l2"),
    (lambda: RunPlan("mirrored", steps_per_epoch=5, warmup_steps=10), "RunPlan.warmup_steps"),
    (lambda: RunPlan("mirrored", steps_per_epoch=5, warmup_steps=5), "RunPlan.warmup_steps"),
    (lambda: RunPlan("mirrored", steps_per_epoch=8, steps_per_execution=4, warmup_steps=2), "RunPlan.warmup_steps"),
    (lambda: RunPlan("parameter_server", num_workers=2, num_ps=1, steps_per_epoch=6, warmup_steps=3),
     "RunPlan.warmup_steps"),
    # mnist_subset's dtype: pixels / 255 need a float.
    (lambda: mnist_subset(10, 10, dtype="banana"), "dtype"),
    (lambda: mnist_subset(10, 10, dtype=np.int8), "dtype"),
    # Traces from JSON or from events.
    (lambda: Trace.from_dict(None), "trace"),
    (lambda: Trace.from_dict({"devices": 3}), "trace"),
    (lambda: Trace.from_events([None]), "events"),
    (lambda: Trace.from_events(3), "events"),
    # A sweep over a path that is not a field.
    (lambda: sweep(BASE, {"training.nope": [1]}), "training.nope"),
    (lambda: sweep(BASE, {"": [1]}), "path"),
    # Compare needs lists of results.
    (lambda: compare(None, None), "predicted"),
    (lambda: compare([_result()], None), "measured"),
]


@pytest.mark.parametrize("call, path", ISSUE_CASES, ids=[_id(i, p) for i, (_, p) in enumerate(ISSUE_CASES)])
def test_inputs_the_issue_found(call, path):
    refused(call, path)


def test_valid_neighbours_of_refused_inputs_still_work():
    # Each refusal above has a valid neighbour; refusing it would be a false alarm.
    assert make_scenario("v100", topology="dgx1_v100", devices_per_worker=8, global_batch=256)
    assert make_scenario(grouping="fusion", fusion_threshold_bytes=2**20, fusion_cycle_s=0.01)
    assert make_scenario(compute_distribution="lognormal", compute_sigma=0.5)
    assert RunPlan("mirrored", model="small_cnn").model_kwargs == {}
    assert RunPlan("mirrored").model_kwargs == {"hidden": 128}
    assert RunPlan("mirrored", steps_per_epoch=5, warmup_steps=4).warmup_steps == 4
    assert mnist_subset(4, 4, dtype="float64").x_train.dtype == np.float64
    assert lab_scenario("parameter_server", 2, 8e-6).cluster.inter_link.bandwidth_Bps == 1.0  # 8 bit/s: htb's least
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




def test_count_of_cases(capsys):
    counts = {
        "scenario fields (replace)": len(SCENARIO_CASES),
        "scenario fields (JSON)": len(JSON_CASES),
        "scenario fields (make_scenario)": len(FACTORY_CASES),
        "topology fields": len(TOPOLOGY_CASES),
        "sweep grids": len(SWEEP_CASES) + len(SWEEP_ROW_CASES),
        "function arguments": len(ARGUMENT_CASES),
        "run plan fields (constructor, JSON)": len(PLAN_CASES) + len(PLAN_JSON_CASES),
        "launcher tasks and launch": len(TASK_CASES) + len(LAUNCH_CASES),
        "TF_CONFIG": len(_bad_addresses()) + len(TF_CONFIG_CASES),
        "network lab": len(LAB_CASES),
        "file paths and files": len(PATH_CASES) + len(FILE_CASES),
        "python -m distsim (in process, subprocess)": len(CLI_CASES) + len(SUBPROCESS_CASES),
        "python -m distsim.real (in process)": len(REAL_CLI_CASES),
        "by hand": len(ISSUE_CASES) + len(CROSS_FIELD),
    }
    with capsys.disabled():
        print(f"\nbad inputs: {sum(counts.values())} {counts}")
    assert sum(counts.values()) >= 1000
