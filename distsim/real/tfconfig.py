"""TF_CONFIG: build one for every task of a cluster, and validate it.

``TF_CONFIG`` is the JSON environment variable through which every
``tf.distribute`` multi-worker task learns the cluster and its own role::

    {"cluster": {"worker": ["host0:12345", "host1:12345"]},
     "task": {"type": "worker", "index": 0}}

TensorFlow itself accepts many malformed configs and then fails late (a hang
waiting for a peer that can never exist, or an error deep inside gRPC). This
module checks a config up front and says what is wrong, which value and what
is allowed. It imports nothing from TensorFlow.
"""

from __future__ import annotations

import ipaddress
import numbers
import socket
from typing import Any, Mapping

from distsim.validation import InputError, Integer, parse_host_port, parse_json

#: Jobs a ``cluster`` may hold (TF 2.21's ``multi_worker_util._validate_cluster_spec``).
CLUSTER_JOBS: tuple[str, ...] = ("chief", "worker", "ps", "evaluator")

#: Task types a ``task`` may name.
TASK_TYPES: tuple[str, ...] = ("chief", "worker", "ps", "evaluator")

#: Top-level keys TensorFlow reads from TF_CONFIG.
TOP_LEVEL_KEYS: tuple[str, ...] = ("cluster", "task", "rpc_layer", "environment")

#: ``rpc_layer`` values: the server protocols TF's ``server_lib`` documents.
RPC_LAYERS: tuple[str, ...] = ("grpc", "grpc+verbs")

#: ``environment`` values: ``ClusterResolver.environment`` is "google" inside
#: Google and "" elsewhere.
ENVIRONMENTS: tuple[str, ...] = ("", "google")

#: Host names accepted in localhost mode.
LOCAL_HOSTS: tuple[str, ...] = ("localhost", "127.0.0.1", "::1", "[::1]")


class TFConfigError(InputError):
    """A TF_CONFIG that TensorFlow cannot run correctly."""


def is_local_host(host: str) -> bool:
    """Whether ``host`` names this machine's loopback interface."""
    if host.lower() in LOCAL_HOSTS:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _check_address(job: str, i: int, address: Any, localhost_only: bool) -> tuple[str, int]:
    path = f"TF_CONFIG.cluster.{job}[{i}]"
    try:
        host, port = parse_host_port(path, address)
    except InputError as exc:
        raise TFConfigError(exc.path, exc.value, exc.allowed) from None
    if localhost_only and not is_local_host(host):
        raise TFConfigError(path, address, f"an address on this machine, hosts {LOCAL_HOSTS} (for a real "
                            "multi-machine cluster, run 'python -m distsim.real worker' on each machine instead)")
    return ("loopback" if is_local_host(host) else host), port


def _check_cluster(cluster: object, localhost_only: bool) -> dict[str, list[str]]:
    if not isinstance(cluster, Mapping) or not cluster:
        raise TFConfigError("TF_CONFIG.cluster", cluster,
                            f"a non-empty object of job name {CLUSTER_JOBS} -> list of 'host:port' addresses")
    seen: dict[tuple[str, int], str] = {}
    for job, addresses in cluster.items():
        if job not in CLUSTER_JOBS:
            raise TFConfigError("TF_CONFIG.cluster", job, f"job names from {CLUSTER_JOBS}")
        if isinstance(addresses, str) or not isinstance(addresses, (list, tuple)) or not addresses:
            raise TFConfigError(f"TF_CONFIG.cluster.{job}", addresses, "a non-empty list of 'host:port' strings")
        for i, address in enumerate(addresses):
            key = _check_address(job, i, address, localhost_only)
            if key in seen:
                raise TFConfigError(f"TF_CONFIG.cluster.{job}[{i}]", address,
                                    f"an address no other task uses (it is already {seen[key]}'s; hosts compare "
                                    "case-insensitively and every loopback name is the same host)")
            seen[key] = f"{job}[{i}]"
    for job in ("chief", "evaluator"):
        if len(cluster.get(job, [])) > 1:
            raise TFConfigError(f"TF_CONFIG.cluster.{job}", cluster[job], f"at most 1 {job} task")
    if "ps" in cluster and not cluster.get("worker"):
        raise TFConfigError("TF_CONFIG.cluster", sorted(cluster), "a 'worker' job beside 'ps' (parameter servers need workers)")
    return {job: list(addresses) for job, addresses in cluster.items()}


def _check_task(task: Any, cluster: dict[str, list[str]]) -> dict:
    if not isinstance(task, Mapping) or set(task) != {"type", "index"}:
        raise TFConfigError("TF_CONFIG.task", task, "{'type': <task type>, 'index': <int>}")
    task_type, index = task["type"], task["index"]
    if task_type not in TASK_TYPES:
        raise TFConfigError("TF_CONFIG.task.type", task_type, f"one of {TASK_TYPES}")
    if isinstance(index, bool) or not isinstance(index, numbers.Integral):
        raise TFConfigError("TF_CONFIG.task.index", index, "an integer (Python or NumPy)")
    index = int(index)  # np.int64(0) is index 0; the JSON TensorFlow reads needs a Python int
    # TF lets an evaluator run beside the cluster; every other task must be one of its jobs.
    if task_type == "evaluator" and "evaluator" not in cluster:
        if index != 0:
            raise TFConfigError("TF_CONFIG.task.index", index, "0 (there is one evaluator)")
    elif task_type not in cluster:
        raise TFConfigError("TF_CONFIG.task.type", task_type, f"a job of the cluster: {sorted(cluster)}")
    elif not 0 <= index < len(cluster[task_type]):
        raise TFConfigError("TF_CONFIG.task.index", index,
                            f"0..{len(cluster[task_type]) - 1} (job {task_type!r} has {len(cluster[task_type])} tasks)")
    return {"type": task_type, "index": index}


def validate_tf_config(config: str | Mapping[str, Any], *, localhost_only: bool = False) -> dict:
    """Check a TF_CONFIG (a JSON string or a dict) and return it as a dict.

    The rules are TensorFlow 2.21's (``multi_worker_util._validate_cluster_spec``
    and ``server_lib``) plus what TF leaves to fail late: strict ``host:port``
    addresses, no address used twice.

    Args:
        config: the TF_CONFIG value.
        localhost_only: also require every address to be on this machine.

    Raises:
        TFConfigError: malformed JSON, a missing ``cluster`` or ``task``, an
            unknown job or task type, a task index out of range, a malformed or
            duplicate address, more than one chief or evaluator, ``ps``
            without workers, an unknown ``rpc_layer`` or ``environment``, or
            (in localhost mode) a remote address.
    """
    if isinstance(config, (str, bytes)):
        try:
            text = config.decode("utf-8") if isinstance(config, bytes) else config
            config = parse_json(text, "TF_CONFIG", "JSON object")
        except UnicodeDecodeError:
            raise TFConfigError("TF_CONFIG", None, "a JSON object in UTF-8", problem="not UTF-8 text") from None
        except InputError as exc:
            raise TFConfigError(exc.path, exc.value, exc.allowed, problem=exc.problem) from None
    if not isinstance(config, Mapping):
        raise TFConfigError("TF_CONFIG", config, "a JSON object with 'cluster' and 'task'")
    for key in config:
        if key not in TOP_LEVEL_KEYS:
            raise TFConfigError(f"TF_CONFIG.{key}", config[key], f"no such key; the keys are {TOP_LEVEL_KEYS}")
    if "cluster" not in config:
        raise TFConfigError("TF_CONFIG.cluster", None, "the whole cluster (every task is given all of it)")
    cluster = _check_cluster(config["cluster"], localhost_only)
    out = {"cluster": cluster, "task": _check_task(config.get("task"), cluster)}
    for key, allowed in (("rpc_layer", RPC_LAYERS), ("environment", ENVIRONMENTS)):
        if key in config:
            if config[key] not in allowed or not isinstance(config[key], str):
                raise TFConfigError(f"TF_CONFIG.{key}", config[key], f"one of {allowed}")
            out[key] = config[key]
    return out


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """``count`` distinct TCP ports that were free on ``host`` a moment ago.

    The sockets are all open at once (so the ports differ) and closed before
    returning; a server must bind soon after. The launcher retries on the rare
    race where another process takes a port in between.
    """
    count = Integer(1, 65535)("count", count)
    socks = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(count)]
    try:
        for s in socks:
            s.bind((host, 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def localhost_cluster(num_workers: int, num_ps: int = 0, *, chief: bool = False) -> dict[str, list[str]]:
    """A cluster spec on free localhost ports.

    Args:
        num_workers: worker tasks (>= 1).
        num_ps: parameter-server tasks (>= 0).
        chief: add a separate ``chief`` task (the coordinator of
            ParameterServerStrategy, or an extra MultiWorkerMirrored worker).
    """
    num_workers = Integer(1, 10_000)("num_workers", num_workers)
    num_ps = Integer(0, 10_000)("num_ps", num_ps)
    ports = iter(free_ports(num_workers + num_ps + int(chief)))
    cluster: dict[str, list[str]] = {}
    if chief:
        cluster["chief"] = [f"localhost:{next(ports)}"]
    cluster["worker"] = [f"localhost:{next(ports)}" for _ in range(num_workers)]
    if num_ps:
        cluster["ps"] = [f"localhost:{next(ports)}" for _ in range(num_ps)]
    return cluster


def build_tf_config(cluster: Mapping[str, list[str]], task_type: str, index: int, *, localhost_only: bool = False) -> dict:
    """The validated TF_CONFIG dict for one task of ``cluster``."""
    return validate_tf_config(
        {"cluster": dict(cluster), "task": {"type": task_type, "index": index}}, localhost_only=localhost_only
    )


def build_tf_configs(cluster: Mapping[str, list[str]], *, localhost_only: bool = False) -> list[dict]:
    """One validated TF_CONFIG per task: chief, workers, ps, then the evaluator."""
    return [
        build_tf_config(cluster, job, i, localhost_only=localhost_only)
        for job in CLUSTER_JOBS
        for i in range(len(cluster.get(job, [])))
    ]


def task_name(config: Mapping[str, Any]) -> str:
    """``"worker1"``, ``"chief0"``, ... for a validated TF_CONFIG."""
    return f"{config['task']['type']}{config['task']['index']}"


def is_chief(config: Mapping[str, Any]) -> bool:
    """Whether this task writes the training's checkpoints and results: the
    ``chief``, or ``worker 0`` when the cluster has no chief, as in
    TensorFlow. An ``evaluator`` answers False here: it does not train.
    TensorFlow's ``multi_worker_util.is_chief`` answers True for it, "a chief
    job on its own" (TF 2.21 ``tensorflow/python/distribute/multi_worker_util.py``
    111-113, 138)."""
    task = config["task"]
    if task["type"] == "chief":
        return True
    return task["type"] == "worker" and task["index"] == 0 and "chief" not in config["cluster"]
