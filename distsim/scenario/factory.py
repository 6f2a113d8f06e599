"""``make_scenario``: a scenario from preset names in one call."""

from __future__ import annotations

from typing import Any

from distsim.scenario.presets import SCHEMA_VERSION
from distsim.scenario.scenario import Scenario


def make_scenario(
    device: str | dict = "gtx_1080_ti",
    workload: str | dict = "mnist_mlp",
    strategy: str = "mirrored",
    num_workers: int = 1,
    devices_per_worker: int = 1,
    *,
    intra_link: str | dict | None = None,
    inter_link: str | dict | None = None,
    physical_cores: float | None = None,
    host_input_speed: float = 1.0,
    straggler_cores: float | None = None,
    algorithm: str | None = None,
    mode: str | None = None,
    num_ps: int = 1,
    ps_cluster: str = "processes",
    topology: str | dict | None = None,
    protocol: str | None = None,
    inter_algorithm: str = "ring",
    ps_local_sum: bool = False,
    ps_placement: str = "own_hosts",
    name: str = "",
    **training: Any,
) -> Scenario:
    """Build a scenario from preset names in one call, e.g.
    ``make_scenario("v100", "resnet50_224", "mirrored", devices_per_worker=8,
    global_batch=256)``. Extra keywords are :class:`~distsim.scenario.Training` fields."""
    cluster: dict[str, Any] = {
        "device": device,
        "num_workers": num_workers,
        "devices_per_worker": devices_per_worker,
        "physical_cores": physical_cores,
        "host_input_speed": host_input_speed,
        "straggler_cores": straggler_cores,
    }
    if intra_link is not None:
        cluster["intra_link"] = intra_link
    if inter_link is not None:
        cluster["inter_link"] = inter_link
    if topology is not None:
        cluster["topology"] = topology
    return Scenario.from_dict({
        "schema_version": SCHEMA_VERSION,
        "name": name,
        "cluster": cluster,
        "workload": workload,
        "strategy": {"name": strategy, "algorithm": algorithm, "mode": mode, "num_ps": num_ps, "ps_cluster": ps_cluster,
                     "protocol": protocol, "inter_algorithm": inter_algorithm, "ps_local_sum": ps_local_sum,
                     "ps_placement": ps_placement},
        "training": training,
    })
