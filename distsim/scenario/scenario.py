"""The whole experiment as one small, validated, serialisable state.

A :class:`Scenario` is a cluster (workers x devices, links), a workload (model,
dataset, input pipeline), a strategy and the training knobs. It round-trips
through JSON with a schema version. Every invalid field, alone or in
combination, raises :class:`~distsim.validation.InputError` naming the field
path, the value and what is allowed, e.g.
``cluster.inter_link.bandwidth_Bps=-1.0; allowed: a finite number > 0 (bytes/s)``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from distsim.scenario import rules
from distsim.scenario.components import Cluster, Strategy, Training, Workload
from distsim.scenario.paths import replace_path, rule_at
from distsim.scenario.presets import SCHEMA_VERSION, component_from, training_defaults
from distsim.validation import InputError, InstanceOf, Text, check_fields, check_keys, checked, read_json, write_json

#: Links a cluster gets when the scenario names none, by device kind.
DEFAULT_LINKS: dict[str, tuple[str, str]] = {
    "cpu": ("shared_memory", "localhost_grpc"),
    "gpu": ("pcie3_x16", "ethernet_10g"),
    "tpu": ("tpu_ici", "tpu_ici"),
}

#: Paths whose value may be a preset name or a ``{"preset": ...}`` object, and the preset kind.
COMPONENT_PATHS: dict[str, str] = {
    "cluster.device": "device",
    "cluster.intra_link": "link",
    "cluster.inter_link": "link",
    "cluster.topology": "topology",
    "workload": "workload",
}

_PARTS: dict[str, type] = {"cluster": Cluster, "workload": Workload, "strategy": Strategy, "training": Training}


@dataclass(frozen=True)
class Scenario:
    """Cluster + workload + strategy + training knobs.

    The cross-field rules are in :mod:`distsim.scenario.rules`: the strategy
    fits the cluster's shape, a step fits in the dataset, FILE sharding has a
    file per worker, options a strategy would ignore are left unset, and the
    timeline stays within :mod:`distsim.scenario.limits`.
    """

    cluster: Cluster = checked(InstanceOf(Cluster))
    workload: Workload = checked(InstanceOf(Workload, "a workload preset name or an object of its fields"))
    strategy: Strategy = checked(InstanceOf(Strategy), default_factory=Strategy)
    training: Training = checked(InstanceOf(Training), default_factory=Training)
    name: str = checked(Text(200), default="")
    notes: str = checked(Text(), default="")

    def __post_init__(self) -> None:
        check_fields(self, "")
        rules.check_scenario(self.value_at)

    @property
    def num_replicas(self) -> int:
        return self.cluster.num_replicas

    def value_at(self, path: str) -> Any:
        """The value of the field at dotted ``path`` (``"training.global_batch"``)."""
        value: Any = self
        try:
            for part in path.split("."):
                value = getattr(value, part)
        except (AttributeError, TypeError):
            rule_at(self, path)  # names the first unknown part
            raise
        return value

    @property
    def per_replica_batch(self) -> int:
        """Largest per-replica batch of a full step (tf.distribute's ceil split)."""
        return -(-self.training.global_batch // self.num_replicas)

    # ------------------------------------------------------------------ JSON

    def to_dict(self) -> dict:
        """JSON-ready dict with every preset inlined and a schema version."""
        c = self.cluster
        return {
            "schema_version": SCHEMA_VERSION,
            "name": self.name,
            "notes": self.notes,
            "cluster": {
                "num_workers": c.num_workers,
                "devices_per_worker": c.devices_per_worker,
                "physical_cores": c.physical_cores,
                "host_input_speed": c.host_input_speed,
                "straggler_cores": c.straggler_cores,
                "device": dataclasses.asdict(c.device),
                "intra_link": dataclasses.asdict(c.intra_link),
                "inter_link": dataclasses.asdict(c.inter_link),
                "topology": None if c.topology is None else _lists(dataclasses.asdict(c.topology)),
            },
            "workload": _lists(dataclasses.asdict(self.workload)),
            "strategy": dataclasses.asdict(self.strategy),
            "training": dataclasses.asdict(self.training),
        }

    @classmethod
    def from_dict(cls, d: Any) -> "Scenario":
        """Build and validate a scenario from JSON data (presets resolved)."""
        d = check_keys("scenario", d, {"schema_version", "name", "notes", "cluster", "workload", "strategy",
                                       "training"}, required=("schema_version", "cluster", "workload"))
        if d["schema_version"] != SCHEMA_VERSION:
            raise InputError("schema_version", d["schema_version"], f"{SCHEMA_VERSION} (this distsim's scenario format)")
        cluster, training = _cluster_from(d["cluster"]), d.get("training", {})
        training = {**training_defaults(d["workload"], cluster.num_workers, training), **training} \
            if isinstance(training, dict) else training
        return cls(
            cluster=cluster,
            workload=component_from("workload", d["workload"], "workload"),
            strategy=_part_from(Strategy, d.get("strategy", {}), "strategy"),
            training=_part_from(Training, training, "training"),
            name=d.get("name", ""),
            notes=d.get("notes", ""),
        )

    def save(self, path: str | Path) -> Path:
        return write_json(path, self.to_dict(), indent=2)

    @classmethod
    def load(cls, path: str | Path) -> "Scenario":
        return cls.from_dict(read_json(path, "scenario file"))

    def replace(self, path: str, value: Any) -> "Scenario":
        """A copy with one field changed, by dotted path
        (``"cluster.devices_per_worker"``, ``"training.global_batch"``,
        ``"cluster.inter_link.bandwidth_Bps"``). Preset names (or
        ``{"preset": ...}`` objects) are accepted for ``cluster.device``,
        ``cluster.*_link`` and ``workload``; a NumPy scalar is stored as the
        Python number it holds."""
        if path in COMPONENT_PATHS and isinstance(value, (str, dict)):
            value = component_from(COMPONENT_PATHS[path], value, path)
        elif path in _PARTS and isinstance(value, dict):
            value = _cluster_from(value) if path == "cluster" else _part_from(_PARTS[path], value, path)
        return replace_path(self, path, value)


def require_scenario(value: Any, path: str = "scenario") -> Scenario:
    """``value`` if it is a :class:`Scenario`; an :class:`InputError` at
    ``path`` otherwise. Every public function that takes a scenario calls it
    first, so ``predict(None)`` says what it wanted instead of failing inside."""
    if not isinstance(value, Scenario):
        raise InputError(path, value, "a distsim.Scenario (make_scenario(...), Scenario.from_dict(...) or "
                         "Scenario.load(path))")
    return value


def _lists(d: dict) -> dict:
    """``d`` with its tuples as lists, as JSON reads them back."""
    return {k: _list(v) if isinstance(v, tuple) else v for k, v in d.items()}


def _list(value):
    return [_list(v) for v in value] if isinstance(value, tuple) else value


def _part_from(cls_: type, spec: Any, path: str):
    spec = check_keys(path, spec, {f.name for f in dataclasses.fields(cls_)})
    try:
        return cls_(**spec)
    except InputError as exc:
        raise exc.rebased(cls_.__name__, path) from None


def _cluster_from(spec: Any) -> Cluster:
    spec = check_keys("cluster", spec, {f.name for f in dataclasses.fields(Cluster)}, required=("device",))
    device = component_from("device", spec["device"], "cluster.device")
    intra_default, inter_default = DEFAULT_LINKS[device.kind]
    spec["device"] = device
    spec["intra_link"] = component_from("link", spec.get("intra_link", intra_default), "cluster.intra_link")
    spec["inter_link"] = component_from("link", spec.get("inter_link", inter_default), "cluster.inter_link")
    if spec.get("topology") is not None:
        spec["topology"] = component_from("topology", spec["topology"], "cluster.topology")
    return _part_from(Cluster, spec, "cluster")
