"""Process-wide TensorFlow setup that must happen before TensorFlow starts.

Three things are fixed for the life of a process the moment TensorFlow first
initialises, so they are set here, once, before anything else touches it:

* ``TF_USE_LEGACY_KERAS=1`` makes ``tf.keras`` the ``tf_keras`` package
  (Keras 2). Keras 3 cannot run ParameterServerStrategy, and its ``fit`` fails
  under MultiWorkerMirroredStrategy, so every real run here uses ``tf_keras``.
  The variable is read when TensorFlow is first imported.
* the number of logical CPU (or GPU) devices, which is how one machine
  pretends to have N replicas;
* ``GRPC_FAIL_FAST=use_caller``, so a gRPC call to a dead peer fails instead
  of retrying forever.

Notebooks call :func:`configure_tensorflow` in their first cell. Everything
else in ``distsim.real`` runs each experiment in a fresh subprocess, which
calls it with that experiment's device count.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import tempfile
from dataclasses import dataclass, field
from functools import lru_cache

from distsim.validation import InputError, Integer

#: GPU memory each logical GPU gets when one physical GPU is split, in MiB.
LOGICAL_GPU_MEMORY_MIB = 1024


@dataclass(frozen=True)
class TFEnvironment:
    """What TensorFlow sees in this process.

    Attributes:
        tf_version: ``tf.__version__``.
        keras_version: version of the Keras behind ``tf.keras``.
        legacy_keras: whether ``tf.keras`` is ``tf_keras`` (Keras 2).
        cpu_model: the CPU's model name.
        cpu_cores: physical cores the OS reports (``os.cpu_count()``).
        cpu_devices: logical CPU device names.
        gpu_devices: logical GPU device names (empty without GPUs).
        gpu_models: model names of the physical GPUs.
    """

    tf_version: str
    keras_version: str
    legacy_keras: bool
    cpu_model: str
    cpu_cores: int
    cpu_devices: tuple[str, ...]
    gpu_devices: tuple[str, ...] = ()
    gpu_models: tuple[str, ...] = field(default=())

    @property
    def device_summary(self) -> str:
        """One line: ``"2 x NVIDIA A100 (4 logical GPUs)"`` or ``"CPU: <model>, 2 cores"``."""
        if self.gpu_devices:
            models = ", ".join(sorted(set(self.gpu_models))) or "GPU"
            return f"{len(self.gpu_models)} x {models} ({len(self.gpu_devices)} logical GPUs)"
        return f"CPU: {self.cpu_model}, {self.cpu_cores} cores ({len(self.cpu_devices)} logical CPUs)"


@lru_cache(maxsize=1)
def cpu_model() -> str:
    """The CPU model name, from ``/proc/cpuinfo`` where there is one."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def prepare_environment(*, legacy_keras: bool = True) -> None:
    """Set the environment variables TensorFlow reads at import time.

    Raises:
        RuntimeError: TensorFlow is already imported with the other Keras;
            the choice cannot change without a new process (restart the kernel).
    """
    wanted = "1" if legacy_keras else "0"
    if "tensorflow" in sys.modules and os.environ.get("TF_USE_LEGACY_KERAS", "0") != wanted:
        raise RuntimeError(
            f"TensorFlow is already imported with TF_USE_LEGACY_KERAS={os.environ.get('TF_USE_LEGACY_KERAS')!r}; "
            f"legacy_keras={legacy_keras} needs {wanted!r} before the first import. Restart the kernel and call "
            "distsim.real.configure_tensorflow() before anything imports TensorFlow."
        )
    os.environ["TF_USE_LEGACY_KERAS"] = wanted
    os.environ.setdefault("GRPC_FAIL_FAST", "use_caller")


#: What TensorFlow's C++ start-up writes to stderr before its own log level applies (absl's
#: pre-initialisation notice, oneDNN, the CUDA stub, cuInit, the CPU-feature guard): noise for a learner.
STARTUP_NOISE = ("absl::InitializeLog", "oneDNN custom operations", "cudart_stub.cc", "cuInit",
                 "cpu_feature_guard.cc", "Unable to register cu")


def start_tensorflow(*, legacy_keras: bool = True):
    """Import TensorFlow and list its physical devices with stderr held back, and return the module.

    TensorFlow's C++ libraries log at load time and when they probe for GPUs,
    before ``TF_CPP_MIN_LOG_LEVEL`` is read (absl's messages "before
    InitializeLog" ignore it), so the setting alone cannot hide them. Their
    file descriptor 2 is pointed at a temporary file for those two steps. If
    the import fails, what it wrote is attached to the exception; otherwise it
    is dropped. Listing physical devices does not start the runtime, so
    logical devices can still be configured afterwards.
    """
    prepare_environment(legacy_keras=legacy_keras)
    if "tensorflow" in sys.modules:
        return sys.modules["tensorflow"]
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        try:
            import tensorflow as tf

            tf.config.list_physical_devices()
        except BaseException as error:
            os.dup2(saved, 2)
            held.seek(0)
            error.add_note("TensorFlow's start-up wrote:\n" + held.read().decode(errors="replace")[-3000:])
            raise
        finally:
            os.dup2(saved, 2)
            os.close(saved)
    return tf


def physical_gpu_count() -> int:
    """Physical GPUs TensorFlow can see (listing them does not start its runtime)."""
    tf = start_tensorflow()
    return len(tf.config.list_physical_devices("GPU"))


def _set_logical(tf, physical, count: int, kind: str, memory_mib: int | None) -> None:
    config = tf.config.LogicalDeviceConfiguration(memory_limit=memory_mib)
    try:
        tf.config.set_logical_device_configuration(physical, [config] * count)
    except RuntimeError:
        have = len(tf.config.list_logical_devices(kind))
        if have != count:
            raise RuntimeError(
                f"TensorFlow already initialised {have} logical {kind} device(s) in this process; {count} "
                "were requested. Device counts are fixed at start-up: restart the kernel, or use "
                "distsim.real.run(), which runs each experiment in a fresh process."
            ) from None


def configure_tensorflow(
    *,
    num_cpus: int = 1,
    num_gpus: int = 0,
    legacy_keras: bool = True,
    deterministic: bool = False,
    describe: bool = True,
) -> TFEnvironment | None:
    """Import TensorFlow with ``num_cpus`` logical CPUs and ``num_gpus`` GPU replicas.

    Args:
        num_cpus: logical CPU devices to create on the one physical CPU (>= 1).
            They share the same cores, so they show how replicas behave, not a
            speedup.
        num_gpus: GPU devices wanted (0 = leave GPUs as they are). With at
            least that many physical GPUs they are used as they are; with
            fewer, the first GPU is split into ``num_gpus`` logical GPUs of
            :data:`LOGICAL_GPU_MEMORY_MIB` each.
        legacy_keras: use ``tf_keras`` for ``tf.keras`` (see module docs).
        deterministic: make TensorFlow's ops deterministic
            (``tf.config.experimental.enable_op_determinism``).
        describe: return a :class:`TFEnvironment`. Describing lists the
            devices, which starts TensorFlow's runtime; a process that will
            create a MultiWorkerMirroredStrategy must pass ``False`` and call
            :func:`describe_tensorflow` after creating it (collective ops
            can only be configured before the runtime starts).

    Returns:
        A :class:`TFEnvironment` describing the devices, or ``None``.

    Raises:
        InputError: a count out of range, or GPUs asked of a machine without one.
        RuntimeError: TensorFlow already started with a different setup.
    """
    num_cpus, num_gpus = Integer(1)("num_cpus", num_cpus), Integer(0)("num_gpus", num_gpus)
    tf = start_tensorflow(legacy_keras=legacy_keras)
    _set_logical(tf, tf.config.list_physical_devices("CPU")[0], num_cpus, "CPU", None)
    gpus = tf.config.list_physical_devices("GPU")
    if num_gpus and not gpus:
        raise InputError("num_gpus", num_gpus, "0 (this machine has no GPU)")
    if num_gpus > len(gpus):
        _set_logical(tf, gpus[0], num_gpus, "GPU", LOGICAL_GPU_MEMORY_MIB)
    if deterministic:
        tf.config.experimental.enable_op_determinism()
    return describe_tensorflow() if describe else None


def _local_device_filter():
    """Keeps this task's devices: in a cluster TensorFlow also lists the other tasks'."""
    try:
        task = json.loads(os.environ.get("TF_CONFIG", "{}")).get("task", {})
    except json.JSONDecodeError:
        task = {}
    if not task:
        return lambda name: True
    mine = f"/job:{task.get('type')}/replica:0/task:{task.get('index')}/"
    return lambda name: "/job:" not in name or name.startswith(mine)


def describe_tensorflow() -> TFEnvironment:
    """The :class:`TFEnvironment` of this (already configured) process."""
    import tensorflow as tf

    legacy = os.environ.get("TF_USE_LEGACY_KERAS") == "1"
    if legacy:
        import tf_keras

        keras_version = tf_keras.__version__
    else:
        import keras

        keras_version = keras.__version__
    gpu_models = []
    local = _local_device_filter()
    for gpu in tf.config.list_physical_devices("GPU"):
        details = tf.config.experimental.get_device_details(gpu)
        gpu_models.append(str(details.get("device_name", gpu.name)))
    return TFEnvironment(
        tf_version=tf.__version__,
        keras_version=keras_version,
        legacy_keras=legacy,
        cpu_model=cpu_model(),
        cpu_cores=os.cpu_count() or 1,
        cpu_devices=tuple(d.name for d in tf.config.list_logical_devices("CPU") if local(d.name)),
        gpu_devices=tuple(d.name for d in tf.config.list_logical_devices("GPU") if local(d.name)),
        gpu_models=tuple(gpu_models),
    )
