"""The training scripts a learner reads, and how a :class:`RunPlan` becomes their command line.

The TensorFlow code of every measured run lives in short scripts in the
repository's ``notebooks/scripts/`` folder, the files the notebooks show and a
learner copies to real machines:

* ``mnist_fit.py``: ``model.fit`` under any synchronous strategy, with
  ``BackupAndRestore`` and chief-only saving;
* ``mnist_ps.py``: ``ParameterServerStrategy`` with a ``ClusterCoordinator``
  loop (``schedule``/``join``/``fetch``, per-worker datasets) or ``model.fit``.

A worker process started by :func:`distsim.real.run` imports the script with
:func:`load_script` and calls its functions with :func:`script_args` of the
plan, adding only the measurement (a step timer, a staleness probe). Nothing
here imports TensorFlow; the scripts do, when loaded.
"""

from __future__ import annotations

import importlib
import json
import os
import shlex
import sys
from pathlib import Path
from types import ModuleType

from distsim.real.plan import RunPlan

#: Environment variable naming another folder of scripts (default: the repository's).
SCRIPTS_DIR_ENV = "DISTSIM_SCRIPTS_DIR"

#: The scripts, by the strategy family they train.
FIT_SCRIPT, PS_SCRIPT = "mnist_fit", "mnist_ps"


def scripts_dir() -> Path:
    """The folder holding the training scripts (``notebooks/scripts`` of this checkout)."""
    folder = Path(os.environ.get(SCRIPTS_DIR_ENV) or Path(__file__).resolve().parents[2] / "notebooks" / "scripts")
    if not (folder / f"{FIT_SCRIPT}.py").is_file():
        raise FileNotFoundError(
            f"{SCRIPTS_DIR_ENV}={str(folder)!r} holds no {FIT_SCRIPT}.py; distsim.real runs the training scripts "
            "of the repository's notebooks/scripts folder, so it needs a checkout of the repository "
            "(pip install -e .), or set the variable to a folder holding them"
        )
    return folder


def script_path(name: str) -> Path:
    """The file of script ``name`` (e.g. ``"mnist_fit"``), for showing or copying it."""
    path = scripts_dir() / f"{name}.py"
    if not path.is_file():
        known = sorted(p.stem for p in scripts_dir().glob("*.py"))
        raise FileNotFoundError(f"script={name!r}; allowed: {known}")
    return path


def load_script(name: str) -> ModuleType:
    """Import script ``name`` as a module (this imports TensorFlow, as the script does)."""
    folder = str(script_path(name).parent)
    if folder not in sys.path:  # the scripts import each other by name, as when run from their folder
        sys.path.insert(0, folder)
    return importlib.import_module(name)


def script_name(plan: RunPlan) -> str:
    return PS_SCRIPT if plan.strategy == "parameter_server" else FIT_SCRIPT


def script_args(plan: RunPlan, *, device: str = "cpu", backup_dir: str | Path | None = None,
                model_dir: str | Path | None = None) -> list[str]:
    """The script's command-line arguments for ``plan`` (``device``: the kind the worker resolved).

    Raises:
        ValueError: something the scripts cannot do (a model size they do not
            take, backup or model folders with a parameter server).
    """
    unknown = sorted(set(plan.model_kwargs) - {"hidden", "filters", "l2"})
    if unknown:
        raise ValueError(f"RunPlan.model_kwargs has {unknown}; the training scripts take 'hidden', 'filters', 'l2'")
    args = ["--batch", str(plan.per_replica_batch), "--steps", str(plan.steps_per_epoch),
            "--epochs", str(plan.epochs), "--model", plan.model,
            "--sizes", json.dumps(plan.model_kwargs, separators=(",", ":")), "--lr", repr(plan.learning_rate),
            "--seed", str(plan.seed), "--shuffle", str(plan.shuffle_buffer),
            "--steps-per-execution", str(plan.steps_per_execution)]
    if plan.n_train is not None:
        args += ["--examples", str(plan.n_train)]
    if plan.strategy == "parameter_server":
        if backup_dir is not None or model_dir is not None:
            raise ValueError("backup_dir and model_dir apply to synchronous strategies; got parameter_server")
        return ["--loop", plan.ps_loop, "--workers", str(plan.num_workers), "--ps", str(plan.num_ps), *args]
    args = ["--strategy", plan.strategy, *args, "--shard-policy", plan.shard_policy]
    if plan.strategy == "mirrored":
        args += ["--cross-device-op", plan.cross_device_op]
    if plan.strategy == "multi_worker_mirrored":  # NCCL between GPUs, RING (gRPC) between CPUs
        args += ["--communication", "nccl" if device == "gpu" else "ring"]
    if plan.prefetch:
        args.append("--prefetch")
    if backup_dir is not None:
        args += ["--backup-dir", str(backup_dir)]
    if model_dir is not None:
        args += ["--model-dir", str(model_dir)]
    return args


def script_command(plan: RunPlan, **options) -> str:
    """The shell command that runs ``plan``'s script by hand (one task of it, for a cluster)."""
    path = script_path(script_name(plan))
    return shlex.join(["python", str(path), *script_args(plan, **options)])
