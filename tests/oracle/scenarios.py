"""Seeded random scenarios inside the oracle's scope (see the package docstring)."""

from __future__ import annotations

import numpy as np

from distsim.scenario import Scenario
from distsim.scenario.presets import SCHEMA_VERSION


def _log_uniform(rng: np.random.Generator, low: float, high: float) -> float:
    return float(np.exp(rng.uniform(np.log(low), np.log(high))))


def _link(rng: np.random.Generator, name: str, low_Bps: float, high_Bps: float, full_duplex: bool = False) -> dict:
    return {"name": name, "bandwidth_Bps": _log_uniform(rng, low_Bps, high_Bps),
            "latency_s": _log_uniform(rng, 1e-7, 1e-3),
            "request_s": _log_uniform(rng, 1e-6, 1e-3) if rng.random() < 0.5 else 0.0,
            "payload_fraction": float(rng.choice([1.0, 0.956])),
            "stack_bandwidth_Bps": _log_uniform(rng, 1e8, 1e10) if rng.random() < 0.3 else None,
            "full_duplex": full_duplex}


def _parts(rng: np.random.Generator, steps: int) -> tuple[dict, dict, dict]:
    """A random GPU device, workload and global batch."""
    device = {"name": "oracle_gpu", "kind": "gpu", "peak_flops": _log_uniform(rng, 1e12, 1e14),
              "efficiency": float(rng.uniform(0.2, 0.6)), "memory_bandwidth_Bps": _log_uniform(rng, 2e11, 2e12),
              "memory_bytes": 1e15, "step_overhead_s": _log_uniform(rng, 1e-5, 1e-2),
              "replica_dispatch_s": _log_uniform(rng, 1e-6, 2e-3) if rng.random() < 0.6 else 0.0,
              "kernel_launch_s": _log_uniform(rng, 1e-6, 3e-5) if rng.random() < 0.5 else 0.0}
    global_batch = int(rng.choice([32, 64, 128, 256, 512]))
    workload = {"name": "oracle_work", "num_params": int(_log_uniform(rng, 1e4, 1e8)),
                "flops_per_sample": _log_uniform(rng, 1e6, 3e10),
                "num_examples": global_batch * (steps + 3), "num_gradient_tensors": 16,
                "input_s_per_sample": _log_uniform(rng, 1e-7, 1e-3) if rng.random() < 0.7 else 0.0,
                "input_bytes_per_sample": int(rng.choice([0, 784, 150_528]))}
    return device, workload, {"global_batch": global_batch}


def _training(rng: np.random.Generator, batch: dict, steps: int, **extra) -> dict:
    return {**batch, "steps": steps, "prefetch": [None, True, False][int(rng.integers(3))],
            "input_threads": int(rng.choice([1, 1, 4, 16])), "num_buckets": int(rng.choice([1, 1, 2, 4, 8])),
            "optimizer_bytes_per_param": int(rng.choice([12, 20, 28])), "metric_values": int(rng.integers(0, 5)),
            "shard_policy": str(rng.choice(["DATA", "OFF"])), **extra}


def _scenario(device: dict, workload: dict, links: dict, cluster: dict, strategy: dict, training: dict) -> Scenario:
    return Scenario.from_dict({"schema_version": SCHEMA_VERSION, "name": "oracle",
                               "cluster": {"device": device, **links, **cluster}, "workload": workload,
                               "strategy": strategy, "training": training})


def sync_scenario(rng: np.random.Generator, steps: int = 8, even: bool = False, cpu: bool = False,
                  backup: bool = False, **training_extra) -> Scenario:
    """A random synchronous data-parallel scenario: all-reduce (ring, tree,
    halving-doubling, hierarchical) over 1-4 workers of 1-4 GPUs, a
    synchronous PS over 1-4 one-GPU workers, or central_storage on one
    worker of 1-4 GPUs. ``even``: the global batch is a
    multiple of the replicas (every replica gets the same batch). ``cpu``:
    CPU devices whose replicas share 0.5-4 physical cores per worker, the
    last worker sometimes with fewer (a CPU-quota straggler). ``backup``:
    1 to N - 1 backup workers (GPU devices, N > 1 replicas)."""
    device, workload, batch = _parts(rng, steps)
    links = {"intra_link": _link(rng, "oracle_intra", 1e9, 3e11), "inter_link": _link(rng, "oracle_inter", 1e7, 3e10)}
    kind = str(rng.choice(["ring", "ring", "tree", "halving_doubling", "hierarchical", "parameter_server",
                           "central_storage"]))
    workers, local = int(rng.integers(1, 5)), int(rng.integers(1, 5))
    if kind in ("tree", "halving_doubling"):
        # The oracle prices these on one node or one rank per node only.
        workers, local = (1, local) if rng.random() < 0.5 else (workers, 1)
        if kind == "halving_doubling":
            workers, local = (1, int(rng.choice([2, 4]))) if workers == 1 else (int(rng.choice([2, 4])), 1)
    if kind == "parameter_server":
        local = 1
        strategy = {"name": "parameter_server", "mode": "sync", "num_ps": int(rng.integers(1, 4))}
    elif kind == "central_storage":
        workers = 1
        strategy = {"name": "central_storage"}
        device["replica_variable_s"] = device["replica_dispatch_s"] * float(rng.choice([0.0, 0.4, 1.0]))
    else:
        name = "multi_worker_mirrored" if workers > 1 or rng.random() < 0.3 else "mirrored"
        strategy = {"name": name, "algorithm": None if kind == "ring" else kind}
        if kind == "ring":
            # TensorFlow's default for mirrored on GPUs is NCCL, whose pricing the oracle leaves out.
            strategy["protocol"] = "alpha_beta"
        if kind == "hierarchical":
            inter = str(rng.choice(["ring", "tree", "nccl_tree"] + (["halving_doubling"] if workers in (2, 4) else [])))
            strategy["inter_algorithm"] = inter
    cluster = {"num_workers": workers, "devices_per_worker": local}
    if cpu:
        # RULES.md rule 18: CPU kernels run inline, no launches.
        device.update(kind="cpu", peak_flops=_log_uniform(rng, 1e10, 1e11), kernel_launch_s=0.0)
        cluster["physical_cores"] = float(rng.choice([0.5, 2 / 3, 1.0, 2.0, 4.0]))
        if rng.random() < 0.4 and workers > 1:
            cluster["straggler_cores"] = cluster["physical_cores"] * float(rng.choice([0.25, 0.5, 1.0]))
    if backup and workers * local > 1 and not cpu:
        training_extra = {"backup_workers": int(rng.integers(1, workers * local)), "num_buckets": 1, **training_extra}
    if even:
        batch = {"global_batch": workers * local * int(rng.choice([8, 16, 32, 64, 128]))}
        workload["num_examples"] = batch["global_batch"] * (steps + 3)
    return _scenario(device, workload, links, cluster, strategy, _training(rng, batch, steps, **training_extra))


def async_scenario(rng: np.random.Generator, steps: int = 8, copy: bool = True, **training_extra) -> Scenario:
    """A random asynchronous PS scenario: 1-6 one-GPU workers, 1-3 shards,
    ``ps_cluster="processes"`` over a half-duplex link. ``copy=False``: no
    bytes to copy to the device (``input_bytes_per_sample=0``)."""
    device, workload, batch = _parts(rng, steps)
    if not copy:
        workload["input_bytes_per_sample"] = 0
    links = {"intra_link": _link(rng, "oracle_intra", 1e9, 3e11), "inter_link": _link(rng, "oracle_inter", 1e7, 3e10)}
    cluster = {"num_workers": int(rng.integers(1, 7)), "devices_per_worker": 1}
    strategy = {"name": "parameter_server", "num_ps": int(rng.integers(1, 4))}
    training = _training(rng, batch, steps, **training_extra)
    training["num_buckets"] = 1
    training["metric_values"] = 4
    return _scenario(device, workload, links, cluster, strategy, training)


def in_process_scenario(rng: np.random.Generator, steps: int = 8, **training_extra) -> Scenario:
    """A random asynchronous PS scenario on ``ps_cluster="in_process"``: 1-6
    one-device workers, 1-3 shards; in 3 of 4 CPU devices sharing 0.5-4
    physical cores per worker (the last worker sometimes with fewer), else GPUs."""
    s = async_scenario(rng, steps, **training_extra).to_dict()
    s["strategy"]["ps_cluster"] = "in_process"
    cluster = s["cluster"]
    if rng.random() < 0.75:
        cluster["device"].update(kind="cpu", peak_flops=_log_uniform(rng, 1e10, 1e11), kernel_launch_s=0.0)
        cluster["physical_cores"] = float(rng.choice([0.5, 2 / 3, 1.0, 2.0, 4.0]))
        if rng.random() < 0.4 and cluster["num_workers"] > 1:
            cluster["straggler_cores"] = cluster["physical_cores"] * float(rng.choice([0.25, 0.5, 1.0]))
    return Scenario.from_dict(s)
