"""The description layer: one experiment as a validated, serialisable :class:`Scenario`.

* :mod:`~distsim.scenario.components`: device, link, cluster, workload, strategy, training;
* :mod:`~distsim.scenario.rules`: the rules that tie their fields together;
* :mod:`~distsim.scenario.limits`: the sizes a prediction can handle;
* :mod:`~distsim.scenario.presets`: the hardware and workload preset files;
* :mod:`~distsim.scenario.paths`: changing one field by its dotted path;
* :mod:`~distsim.scenario.scenario`: the scenario and its JSON form;
* :mod:`~distsim.scenario.factory`: :func:`make_scenario`.
"""

from distsim.scenario.components import (
    ALGORITHMS,
    COMPUTE_DISTRIBUTIONS,
    DEVICE_KINDS,
    GROUPINGS,
    INTER_ALGORITHMS,
    MODES,
    PROTOCOLS,
    PS_PLACEMENTS,
    PS_CLUSTERS,
    SHARD_POLICIES,
    STRATEGIES,
    Cluster,
    Device,
    Link,
    Strategy,
    Topology,
    Training,
    Workload,
    message_Bps,
)
from distsim.scenario.factory import make_scenario
from distsim.scenario.presets import (
    PRESET_DIR_ENV,
    PRESET_FILES,
    SCHEMA_VERSION,
    load_preset,
    preset_names,
    user_preset_dir,
    write_user_preset,
)
from distsim.scenario.scenario import COMPONENT_PATHS, DEFAULT_LINKS, Scenario, require_scenario

__all__ = [
    "ALGORITHMS",
    "COMPONENT_PATHS",
    "COMPUTE_DISTRIBUTIONS",
    "DEFAULT_LINKS",
    "DEVICE_KINDS",
    "GROUPINGS",
    "INTER_ALGORITHMS",
    "MODES",
    "PROTOCOLS",
    "PS_PLACEMENTS",
    "PRESET_DIR_ENV",
    "PRESET_FILES",
    "PS_CLUSTERS",
    "SCHEMA_VERSION",
    "SHARD_POLICIES",
    "STRATEGIES",
    "Cluster",
    "Device",
    "Link",
    "Scenario",
    "Strategy",
    "Topology",
    "Training",
    "Workload",
    "message_Bps",
    "load_preset",
    "make_scenario",
    "preset_names",
    "require_scenario",
    "user_preset_dir",
    "write_user_preset",
]
