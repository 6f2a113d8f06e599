"""What a fresh Colab runtime lacks, installed by the notebooks' setup cell.

* Colab's TPU runtimes come without TensorFlow: install TensorFlow's TPU build
  (``tensorflow-tpu``, which brings the ``libtpu`` runtime) before anything
  imports it.
* Every runtime needs ``tf_keras`` matching the installed TensorFlow
  (``TF_USE_LEGACY_KERAS=1`` makes ``tf.keras`` that package).

Written against TensorFlow's and Colab's documentation; the Colab and TPU
branches cannot run on the workbook's own CPU machine and were reviewed, not run.
"""

from __future__ import annotations

import glob
import importlib.metadata
import importlib.util
import subprocess
import sys

#: Where TensorFlow's TPU builds find their libtpu (tensorflow.org/install/pip, "TPU").
LIBTPU_INDEX = "https://storage.googleapis.com/libtpu-tf-releases/index.html"

#: Distributions that provide the ``tensorflow`` module.
TENSORFLOW_DISTRIBUTIONS = ("tensorflow", "tensorflow-tpu", "tensorflow-cpu")


def has_tpu() -> bool:
    """Whether TPU chips are attached to this machine (a TPU VM: /dev/accel*, or /dev/vfio on v5e and later)."""
    return bool(glob.glob("/dev/accel*") or glob.glob("/dev/vfio/[0-9]*"))


def tensorflow_version() -> str:
    """The installed TensorFlow's version, whichever distribution provides it."""
    for name in TENSORFLOW_DISTRIBUTIONS:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    raise ModuleNotFoundError(f"none of {TENSORFLOW_DISTRIBUTIONS} is installed")


def missing_packages() -> list[list[str]]:
    """The ``pip install`` argument lists this runtime needs, in order (empty: nothing to do)."""
    if importlib.util.find_spec("tensorflow") is None:
        tensorflow = ["tensorflow-tpu", "-f", LIBTPU_INDEX] if has_tpu() else ["tensorflow"]
        return [tensorflow, ["tf-keras"]]  # tf_keras follows once the TensorFlow version is known
    if importlib.util.find_spec("tf_keras") is None:
        return [["tf-keras"]]
    return []


def install_missing() -> list[str]:
    """Install what :func:`missing_packages` lists; returns the pip commands it ran."""
    ran = []
    for args in missing_packages():
        if args == ["tf-keras"]:
            minor = ".".join(tensorflow_version().split(".")[:2])
            args = [f"tf-keras~={minor}.0"]
        command = [sys.executable, "-m", "pip", "install", "-q", *args]
        subprocess.run(command, check=True)
        ran.append(" ".join(command[2:]))
    return ran
