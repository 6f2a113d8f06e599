"""TF_CONFIG builder and validator (pure Python, no TensorFlow)."""

import json
import socket

import pytest

from distsim.real.tfconfig import (
    TFConfigError,
    build_tf_configs,
    free_ports,
    is_chief,
    localhost_cluster,
    task_name,
    validate_tf_config,
)

TWO_WORKERS = {"worker": ["localhost:20001", "localhost:20002"]}


def _cfg(cluster, task_type="worker", index=0):
    return {"cluster": cluster, "task": {"type": task_type, "index": index}}


def test_valid_config_round_trips_from_json_string():
    text = json.dumps(_cfg(TWO_WORKERS, "worker", 1))
    cfg = validate_tf_config(text, localhost_only=True)
    assert cfg["task"] == {"type": "worker", "index": 1}
    assert cfg["cluster"] == TWO_WORKERS
    assert task_name(cfg) == "worker1"
    assert not is_chief(cfg)


@pytest.mark.parametrize(
    "config, fragment",
    [
        ({"task": {"type": "worker", "index": 0}}, r"TF_CONFIG\.cluster=None; allowed: the whole cluster"),
        (_cfg(TWO_WORKERS, "worker", 2), r"TF_CONFIG\.task\.index=2; allowed: 0\.\.1"),
        (_cfg(TWO_WORKERS, "worker", -1), r"TF_CONFIG\.task\.index=-1; allowed: 0\.\.1"),
        (_cfg({"worker": ["localhost:20001", "localhost:20001"]}), r"cluster\.worker\[1\]=.*already worker\[0\]'s"),
        # 127.0.0.1 and localhost are the same interface: still a duplicate.
        (_cfg({"worker": ["localhost:20001"], "ps": ["127.0.0.1:20001"]}), r"cluster\.ps\[0\]=.*already worker\[0\]'s"),
        # Host names compare case-insensitively.
        (_cfg({"worker": ["LOCALHOST:20001", "localhost:20001"]}), "already worker"),
        (_cfg({"worker": ["localhost:20001"], "evaluator": ["localhost:20008", "localhost:20009"]}),
         r"cluster\.evaluator=.*at most 1 evaluator"),
        (_cfg({"worker": ["localhost:20001", "10.0.0.7:20002"]}), "an address on this machine"),
        (_cfg(TWO_WORKERS, "ps", 0), r"TF_CONFIG\.task\.type='ps'; allowed: a job of the cluster"),
        (_cfg(TWO_WORKERS, "boss", 0), r"task\.type='boss'; allowed: one of"),
        (_cfg({"trainer": ["localhost:1"]}), r"TF_CONFIG\.cluster='trainer'; allowed: job names"),
        (_cfg({"worker": "localhost:20001"}), "non-empty list"),
        (_cfg({"worker": ["localhost"]}), "host:port"),
        (_cfg({"worker": ["localhost:99999"]}), "port 1..65535"),
        (_cfg({"worker": ["localhost:0"]}), "port 1..65535"),
        (_cfg({"worker": ["localhost:1_000"]}), r"worker\[0\]='localhost:1_000'"),
        (_cfg({"worker": ["localhost:+80"]}), r"worker\[0\]='localhost:\+80'"),
        (_cfg({"worker": ["my host:80"]}), r"worker\[0\]='my host:80'"),
        (_cfg({"worker": ["http://x:80"]}), r"worker\[0\]='http://x:80'"),
        (_cfg({"worker": ["-bad-:80"]}), "host:port"),
        (_cfg({"worker": ["300.1.1.1:80"]}), "host:port"),
        (_cfg({"worker": ["[::zz]:80"]}), "host:port"),
        (_cfg({"chief": ["localhost:1", "localhost:2"], "worker": ["localhost:3"]}), "at most 1 chief"),
        (_cfg({"ps": ["localhost:1"]}, "ps", 0), "a 'worker' job beside 'ps'"),
        ({"cluster": TWO_WORKERS}, r"TF_CONFIG\.task=None"),
        ({**_cfg(TWO_WORKERS), "extra": 1}, r"TF_CONFIG\.extra=1; allowed: no such key"),
        ({**_cfg(TWO_WORKERS), "rpc_layer": 5}, r"TF_CONFIG\.rpc_layer=5; allowed: one of \('grpc'"),
        ({**_cfg(TWO_WORKERS), "environment": "mars"}, r"TF_CONFIG\.environment='mars'"),
        ("{not json", "not valid JSON"),
        ("[1, 2]", "TF_CONFIG=\\[1, 2\\]; allowed: a JSON object"),
    ],
)
def test_malformed_configs_are_rejected_with_a_clear_message(config, fragment):
    with pytest.raises(TFConfigError, match=fragment):
        validate_tf_config(config, localhost_only=True)


def test_remote_addresses_are_fine_outside_localhost_mode():
    cluster = {"worker": ["10.0.0.6:2222", "10.0.0.7:2222"]}
    cfg = validate_tf_config(_cfg(cluster, "worker", 1))
    assert cfg["cluster"] == cluster
    # Same port on different hosts is not a duplicate.


def test_evaluator_task_outside_the_cluster_is_allowed():
    cfg = validate_tf_config(_cfg(TWO_WORKERS, "evaluator", 0))
    assert task_name(cfg) == "evaluator0" and not is_chief(cfg)


def test_one_evaluator_inside_the_cluster_is_allowed_as_in_tensorflow():
    # TF 2.21's multi_worker_util._validate_cluster_spec: "There must be at most one 'evaluator' job".
    cluster = {**TWO_WORKERS, "evaluator": ["localhost:20009"]}
    cfg = validate_tf_config(_cfg(cluster, "evaluator", 0), localhost_only=True)
    assert cfg["cluster"]["evaluator"] == ["localhost:20009"]
    assert [task_name(c) for c in build_tf_configs(cluster)] == ["worker0", "worker1", "evaluator0"]


def test_remote_host_names_compare_case_insensitively():
    with pytest.raises(TFConfigError, match=r"worker\[1\]='node-a:2222'; allowed: an address no other task uses"):
        validate_tf_config(_cfg({"worker": ["Node-A:2222", "node-a:2222"]}))


def test_well_formed_addresses_are_accepted():
    cluster = {"worker": ["node-1.example.com:2222", "10.0.0.7:2222", "[fe80::1]:2222", "Node-2:65535"]}
    assert validate_tf_config(_cfg(cluster))["cluster"] == cluster


def test_chief_rule():
    assert is_chief(validate_tf_config(_cfg(TWO_WORKERS, "worker", 0)))
    with_chief = {"chief": ["localhost:20000"], **TWO_WORKERS}
    assert not is_chief(validate_tf_config(_cfg(with_chief, "worker", 0)))
    assert is_chief(validate_tf_config(_cfg(with_chief, "chief", 0)))


def test_localhost_cluster_builds_a_config_for_every_task_on_distinct_free_ports():
    cluster = localhost_cluster(3, num_ps=2, chief=True)
    configs = build_tf_configs(cluster, localhost_only=True)
    assert [task_name(c) for c in configs] == ["chief0", "worker0", "worker1", "worker2", "ps0", "ps1"]
    ports = [int(a.rsplit(":", 1)[1]) for addrs in cluster.values() for a in addrs]
    assert len(set(ports)) == 6
    # The ports were free: binding one of them now works.
    with socket.socket() as s:
        s.bind(("127.0.0.1", ports[0]))


@pytest.mark.parametrize("kwargs", [{"num_workers": 0}, {"num_workers": 2, "num_ps": -1}, {"num_workers": True}])
def test_localhost_cluster_rejects_bad_sizes(kwargs):
    with pytest.raises(ValueError, match="num_"):
        localhost_cluster(**kwargs)


def test_free_ports_rejects_zero():
    with pytest.raises(ValueError, match="count=0"):
        free_ports(0)
