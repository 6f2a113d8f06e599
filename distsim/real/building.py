"""Prepare a worker process for a plan's script, and describe what TensorFlow built.

This module imports TensorFlow (with ``tf_keras`` as ``tf.keras``; see
:mod:`distsim.real.env`). The training code itself is in the scripts of
``notebooks/scripts`` (:mod:`distsim.real.scripts`); what stays here is the
machine setup a launcher does before a script runs (logical devices, which
GPUs a localhost worker gets, deterministic ops) and the description of the
strategy that goes into a measured result's ``meta``.
"""

from __future__ import annotations

import datetime as _dt
import json
import shlex
import sys
from dataclasses import dataclass
from typing import Callable

from distsim.real.env import TFEnvironment, configure_tensorflow, prepare_environment

prepare_environment()
import tensorflow as tf  # noqa: E402  (must follow prepare_environment)

from distsim.real.plan import RunPlan  # noqa: E402
from distsim.real.scripts import script_command  # noqa: E402
from distsim.real.tfconfig import is_local_host  # noqa: E402
from distsim.validation import InputError  # noqa: E402

#: ``on_progress(done_steps, total_steps, loss)`` receives progress.
Progress = Callable[[int, int, float], None]


@dataclass(frozen=True)
class StrategyInfo:
    """A strategy the script built, and how it sums gradients (for ``Result.meta``)."""

    strategy: tf.distribute.Strategy
    cross_device_op: str
    devices: tuple[str, ...]


def resolve_device(plan: RunPlan) -> str:
    """``"gpu"``, ``"cpu"`` or ``"tpu"``: ``auto`` becomes GPU where TensorFlow sees one.

    ParameterServerStrategy's localhost cluster always runs on the CPU here.
    """
    if plan.strategy == "tpu":
        return "tpu"
    if plan.strategy == "parameter_server" or plan.device == "cpu":
        return "cpu"
    has_gpu = bool(tf.config.list_physical_devices("GPU"))
    if plan.device == "gpu" and not has_gpu:
        raise InputError("RunPlan.device", "gpu", "'cpu' or 'auto' (TensorFlow sees no GPU here)")
    return "gpu" if has_gpu else "cpu"


def configure_for_plan(plan: RunPlan, tf_config: dict | None = None) -> str:
    """Give this process the devices ``plan`` runs on (before TensorFlow starts); returns the device kind."""
    device = resolve_device(plan)
    local = plan.replicas_per_worker if plan.strategy in ("mirrored", "central_storage") else 1
    if plan.strategy == "multi_worker_mirrored" and device == "cpu" and plan.replicas_per_worker != 1:
        raise InputError("RunPlan.replicas_per_worker", plan.replicas_per_worker,
                         "1 with multi_worker_mirrored on CPU (it uses one CPU device per worker)")
    if device == "cpu" and plan.strategy != "tpu":  # the scripts take every GPU they see: show them none
        tf.config.set_visible_devices([], "GPU")
    if plan.strategy == "multi_worker_mirrored" and device == "gpu":
        _pick_worker_gpus(plan, tf_config)
        configure_tensorflow(num_cpus=1, deterministic=plan.deterministic, describe=False)
        return device
    configure_tensorflow(
        num_cpus=local if device == "cpu" else 1,
        num_gpus=local if device == "gpu" else 0,
        deterministic=plan.deterministic,
        describe=False,
    )
    return device


def _pick_worker_gpus(plan: RunPlan, tf_config: dict | None) -> None:
    """On one machine, give each worker process its own GPUs."""
    gpus = tf.config.list_physical_devices("GPU")
    cluster = (tf_config or {}).get("cluster", {})
    hosts = [a.rpartition(":")[0] for addrs in cluster.values() for a in addrs]
    if not tf_config or not all(is_local_host(h) for h in hosts):
        return  # one worker per machine: it uses that machine's GPUs
    index = tf_config["task"]["index"]
    need = plan.num_workers * plan.replicas_per_worker
    if len(gpus) < need:
        raise InputError("RunPlan.num_workers", plan.num_workers,
                         f"device='cpu', or at most {len(gpus)} GPUs in all: these localhost workers x "
                         f"{plan.replicas_per_worker} GPUs need {need}")
    k = plan.replicas_per_worker
    tf.config.set_visible_devices(gpus[index * k : (index + 1) * k], "GPU")


def describe_cross_device_op(strategy: tf.distribute.Strategy) -> str:
    """How ``strategy`` sums gradients, as TensorFlow built it, e.g. ``"CollectiveAllReduce (ring)"``.

    TensorFlow has no public accessor for the chosen op, so this reads the
    strategy's private attributes (checked against TensorFlow 2.21).
    """
    extended = strategy.extended
    if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return f"CollectiveAllReduce ({extended._communication_options.implementation.name.lower()})"
    if isinstance(strategy, tf.distribute.MirroredStrategy):
        ops = extended._cross_device_ops
        if type(ops).__name__ == "CollectiveAllReduce":
            return f"CollectiveAllReduce ({ops._options.implementation.name.lower()})"
        return type(ops).__name__
    if isinstance(strategy, tf.distribute.experimental.CentralStorageStrategy):
        return "central variables on /cpu:0 (reduce to one device)"
    if isinstance(strategy, tf.distribute.ParameterServerStrategy):
        return f"parameter servers: {extended._num_ps} (gRPC push/pull)"
    if isinstance(strategy, tf.distribute.TPUStrategy):
        return "TPU all-reduce over the interconnect"
    return "none (one replica)"


def strategy_info(strategy: tf.distribute.Strategy, plan: RunPlan) -> StrategyInfo:
    """The :class:`StrategyInfo` of a strategy a script built for ``plan``."""
    if plan.strategy == "parameter_server":
        devices = tuple(f"/job:worker/task:{i}" for i in range(plan.num_workers))
    elif plan.strategy == "default":  # no strategy: the device TensorFlow places ops on
        devices = tuple(d.name for d in tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("CPU"))[:1]
    else:
        devices = tuple(strategy.extended.worker_devices)
    return StrategyInfo(strategy, describe_cross_device_op(strategy), devices)


def run_meta(plan: RunPlan, env: TFEnvironment, info: StrategyInfo, task: str) -> dict[str, str]:
    """Provenance of a measured run: what ran, where, when, and the command that reruns it."""
    return {
        "strategy": plan.strategy,
        "strategy_class": type(info.strategy).__name__,
        "num_replicas": str(info.strategy.num_replicas_in_sync),
        "per_replica_batch": str(plan.per_replica_batch),
        "cross_device_op": info.cross_device_op,
        "devices": ", ".join(info.devices),
        "device": env.device_summary,
        "cpu_model": env.cpu_model,
        "gpu_models": ", ".join(env.gpu_models),
        "tf_version": env.tf_version,
        "keras_version": f"tf_keras {env.keras_version}" if env.legacy_keras else f"keras {env.keras_version}",
        "task": task,
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "command": shlex.join([sys.executable, *sys.argv]),
        "script_command": script_command(plan, device="gpu" if env.gpu_devices else "cpu"),
        "plan": json.dumps(plan.to_dict()),
        "warmup_steps": str(plan.warmup_steps),
    }


def epoch_meta(history: dict) -> dict[str, str]:
    """Keras' per-epoch loss and accuracy as JSON lists (``meta["epoch_loss"]``, ...)."""
    return {f"epoch_{key}": json.dumps([float(v) for v in history.get(key, [])]) for key in ("loss", "accuracy")}
