"""Hardware and workload presets: the built-in files and the user's own.

Built-in presets live in ``distsim/scenario/presets/*.json`` (installed with
the package), where every number carries its source. Files with the same
layout in :func:`user_preset_dir` (``$DISTSIM_PRESET_DIR``, default
``~/.config/distsim/presets``) add to and override them;
``distsim.real.calibrate()`` writes the measured "this machine" device and
links there with :func:`write_user_preset`.

In scenario JSON a device, link or workload is given as a preset name
(``"gtx_1080_ti"``), a preset with overrides (``{"preset": "k80",
"efficiency": 0.4}``) or inline with every field spelled out;
:func:`component_from` builds any of the three. A workload preset's
per-tensor data (``tensor_params``, ``tensor_ready``) describes the preset's
own model: overriding its size (``num_params`` or ``num_gradient_tensors``)
without giving new per-tensor data makes it another model, whose tensors are
not known, so that data is left out.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.resources
import os
from pathlib import Path
from typing import Any

from distsim.scenario.components import Device, Link, Topology, Workload
from distsim.validation import InputError, check_keys, parse_json, write_json

SCHEMA_VERSION = 1

#: Preset kinds, the file each lives in and the component it builds.
PRESET_FILES: dict[str, str] = {"device": "devices.json", "link": "links.json", "workload": "workloads.json",
                                "topology": "topologies.json"}
COMPONENTS: dict[str, type] = {"device": Device, "link": Link, "workload": Workload, "topology": Topology}
PRESET_DIR_ENV = "DISTSIM_PRESET_DIR"
#: A workload preset's entry of Training knobs that belong to its dataset and pipeline (not Workload fields).
TRAINING_DEFAULTS = "training_defaults"


def _check_kind(kind: str) -> None:
    if kind not in PRESET_FILES:
        raise InputError("preset kind", kind, f"one of {tuple(PRESET_FILES)}")


def user_preset_dir() -> Path:
    """Where user presets live: ``$DISTSIM_PRESET_DIR`` or ``~/.config/distsim/presets``."""
    env = os.environ.get(PRESET_DIR_ENV)
    return Path(env) if env else Path.home() / ".config" / "distsim" / "presets"


def _read_preset_file(text: str, where: str, kind: str) -> dict:
    data = parse_json(text, f"preset file {where}", "preset file")
    if not isinstance(data, dict) or data.get("schema_version") != SCHEMA_VERSION or data.get("kind") != kind \
            or not isinstance(data.get("presets"), dict):
        raise InputError(f"preset file {where}", None,
                         f"an object with schema_version={SCHEMA_VERSION}, kind={kind!r} and a 'presets' object",
                         problem="not a preset file")
    for name, entry in data["presets"].items():
        if not isinstance(entry, dict):
            raise InputError(f"preset file {where}: presets.{name}", entry, "an object of fields")
    return data["presets"]


@functools.lru_cache(maxsize=None)
def _builtin_presets(kind: str) -> dict:
    filename = PRESET_FILES[kind]
    text = (importlib.resources.files("distsim.scenario") / "presets" / filename).read_text()
    return _read_preset_file(text, f"distsim/scenario/presets/{filename}", kind)


@functools.lru_cache(maxsize=64)
def _user_presets(path: str, mtime_ns: int, kind: str) -> dict:
    """A user preset file, re-read whenever it changes (``mtime_ns``)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"preset file {path}", None, "a readable UTF-8 preset file",
                         problem=f"cannot read it ({type(exc).__name__})") from None
    return _read_preset_file(text, path, kind)


def _all_presets(kind: str) -> dict[str, dict]:
    _check_kind(kind)
    presets = dict(_builtin_presets(kind))
    user = user_preset_dir() / PRESET_FILES[kind]
    if user.is_file():
        presets.update(_user_presets(str(user), user.stat().st_mtime_ns, kind))
    return presets


def preset_names(kind: str) -> list[str]:
    """Names of the ``kind`` presets (``device``, ``link``, ``workload``)."""
    return sorted(_all_presets(kind))


def load_preset(kind: str, name: str) -> tuple[dict, dict]:
    """(values, sources) of one preset; :class:`InputError` for an unknown name."""
    presets = _all_presets(kind)
    if not isinstance(name, str) or name not in presets:
        raise InputError(f"{kind} preset", name, f"one of {sorted(presets)}")
    values, sources = {}, {}
    for key, entry in presets[name].items():
        if key == TRAINING_DEFAULTS:
            continue
        if isinstance(entry, dict) and "value" in entry:
            values[key] = entry["value"]
            sources[key] = str(entry.get("source", ""))
        else:
            values[key] = entry
    return values, sources


def write_user_preset(kind: str, name: str, values: dict, sources: dict,
                      directory: str | Path | None = None) -> Path:
    """Add or replace preset ``name`` in the user preset file of ``kind``.

    ``values`` holds the component's fields, ``sources`` a note per numeric
    field. The entry is validated by building the component first. Returns
    the file written.
    """
    _check_kind(kind)
    build(kind, {"name": name, **values}, kind)
    directory = Path(directory) if directory is not None else user_preset_dir()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / PRESET_FILES[kind]
    data = {"schema_version": SCHEMA_VERSION, "kind": kind, "presets": {}}
    if path.is_file():
        data["presets"] = _read_preset_file(path.read_text(), str(path), kind)
    data["presets"][name] = {key: {"value": value, "source": sources[key]} if key in sources else value
                             for key, value in values.items()}
    return write_json(path, data, indent=2, what="preset file")


def build(kind: str, values: dict, path: str):
    """The ``kind`` component from complete field values, errors at ``path``."""
    cls_ = COMPONENTS[kind]
    names = {f.name for f in dataclasses.fields(cls_)}
    check_keys(path, values, names)
    missing = sorted(f.name for f in dataclasses.fields(cls_) if f.name not in values and _required(f))
    if missing:
        raise InputError(f"{path}.{missing[0]}", None, f"a value (required; missing fields: {missing})")
    try:
        return cls_(**values)
    except InputError as exc:
        raise exc.rebased(cls_.__name__, path) from None


def component_from(kind: str, spec: Any, path: str):
    """A device, link or workload from a preset name, ``{"preset": name,
    <overrides>}`` or an inline object; errors name ``path``."""
    _check_kind(kind)
    if isinstance(spec, str):
        spec = {"preset": spec}
    if not isinstance(spec, dict):
        raise InputError(path, spec, f"a {kind} preset name, {{'preset': name, <overrides>}} or an object of fields")
    if "preset" not in spec:
        return build(kind, spec, path)
    try:
        values, sources = load_preset(kind, spec["preset"])
    except InputError as exc:
        raise exc.rebased(f"{kind} preset", f"{path}.preset") from None
    overrides = {k: v for k, v in spec.items() if k not in ("preset", "sources")}
    fields_ = {f.name for f in dataclasses.fields(COMPONENTS[kind])} - {"name", "sources"}
    check_keys(path, overrides, fields_)
    extra_sources = spec.get("sources", {})
    if not isinstance(extra_sources, dict):
        raise InputError(f"{path}.sources", extra_sources, "an object of field -> source text")
    sources = {**sources, **{k: "scenario override" for k in overrides}, **extra_sources}
    if kind == "workload" and {"num_params", "num_gradient_tensors"} & set(overrides) and "tensor_params" not in overrides:
        for key in ("tensor_params", "tensor_ready"):
            values.pop(key, None)
            sources.pop(key, None)
    return build(kind, {**values, **overrides, "name": spec["preset"], "sources": sources}, path)


def _required(f: dataclasses.Field) -> bool:
    return f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING


def training_defaults(workload: Any, num_workers: int, training: dict) -> dict:
    """The Training knobs a workload preset brings to a scenario that does not
    set them (``training``: the scenario's own knobs).

    A preset's ``training_defaults`` (ImageNet's: its 1,024 TFRecord files,
    AUTOTUNE-like ``input_threads``; sources in ``workloads.json``) fill the
    knobs ``training`` leaves out. Its files decide the sharding as
    TensorFlow's default ``AutoShardPolicy.AUTO`` does: FILE over those files
    when the scenario sets neither ``shard_policy`` nor ``num_files`` and has
    2 to ``num_files`` workers; AUTO falls back to DATA with fewer files than
    workers (TF 2.21 ``tensorflow/python/data/ops/options.py``,
    ``AutoShardPolicy``), and with one worker there is nothing to shard.
    Inline workloads, and ``Scenario.replace`` of a workload, bring none."""
    name = workload if isinstance(workload, str) else workload.get("preset") if isinstance(workload, dict) else None
    presets = _all_presets("workload")
    if not isinstance(name, str) or name not in presets or not isinstance(training, dict):
        return {}
    knobs = {k: v["value"] if isinstance(v, dict) and "value" in v else v
             for k, v in presets[name].get(TRAINING_DEFAULTS, {}).items()}
    files = knobs.pop("num_files", None)
    if files is not None and not {"shard_policy", "num_files"} & set(training) and 1 < num_workers <= files:
        knobs |= {"shard_policy": "FILE", "num_files": files}
    return {k: v for k, v in knobs.items() if k not in training}
