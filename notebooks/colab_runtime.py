"""What a fresh Colab runtime lacks, installed by the notebooks' setup cell.

* TensorFlow, pinned to the workbook's version (``requirements.txt``): Colab's
  TPU runtimes come without it. A notebook that uses the TPU (its setup cell
  says ``tpu=True``) installs TensorFlow's TPU build (``tensorflow-tpu``,
  which brings ``libtpu``) on a machine with TPU chips; every other notebook
  installs the plain build. If the TPU build cannot be installed, the plain
  one is, and the notebook's TPU section uses the simulator's TPU.
* ``tf_keras`` matching that TensorFlow (``TF_USE_LEGACY_KERAS=1`` makes
  ``tf.keras`` that package).
* ``ipywidgets`` 8, which the workbook's widgets are written for.

A failed install never raises: :func:`install_missing` returns one line per
package saying what happened and what the notebook does instead.

Written against TensorFlow's and Colab's documentation; the Colab and TPU
branches cannot run on the workbook's own CPU machine and were reviewed, not
run (``tests/test_colab_setup.py`` runs the setup cell with a stand-in
``google.colab`` and a stand-in pip).
"""

from __future__ import annotations

import glob
import importlib.metadata
import re
import subprocess
import sys
from pathlib import Path

#: Where TensorFlow's TPU builds find their libtpu (tensorflow.org/install/pip, "TPU").
LIBTPU_INDEX = "https://storage.googleapis.com/libtpu-tf-releases/index.html"

#: Distributions that provide the ``tensorflow`` module.
TENSORFLOW_DISTRIBUTIONS = ("tensorflow", "tensorflow-tpu", "tensorflow-cpu")

REQUIREMENTS = Path(__file__).resolve().parents[1] / "requirements.txt"


def workbook_pins(requirements: Path = REQUIREMENTS) -> dict[str, str]:
    """The ``name==version`` pins of the workbook's ``requirements.txt``, by lower-case name."""
    pins = re.findall(r"^([A-Za-z0-9_.-]+)==([^\s#]+)", requirements.read_text(), flags=re.M)
    return {name.lower().replace("_", "-"): version for name, version in pins}


def has_tpu() -> bool:
    """Whether TPU chips are attached to this machine (a TPU VM: /dev/accel*, or /dev/vfio on v5e and later)."""
    return bool(glob.glob("/dev/accel*") or glob.glob("/dev/vfio/[0-9]*"))


def installed_version(*distributions: str) -> str | None:
    """The version of the first of ``distributions`` that is installed, else None."""
    for name in distributions:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    return None


def _minor(version: str) -> str:
    return ".".join(version.split(".")[:2])


def missing_packages(*, tpu: bool, pins: dict[str, str] | None = None) -> list[list[str]]:
    """The ``pip install`` argument lists this runtime needs, in order (empty: nothing to do)."""
    pins = workbook_pins() if pins is None else pins
    needed = []
    tensorflow = installed_version(*TENSORFLOW_DISTRIBUTIONS)
    if tensorflow is None:
        tensorflow = pins["tensorflow"]
        if tpu and has_tpu():
            needed.append([f"tensorflow-tpu=={tensorflow}", "-f", LIBTPU_INDEX])
        else:
            needed.append([f"tensorflow=={tensorflow}"])
    keras = installed_version("tf-keras")
    if keras is None or _minor(keras) != _minor(tensorflow):
        same = tensorflow == pins["tensorflow"]
        needed.append([f"tf-keras=={pins['tf-keras']}" if same else f"tf-keras~={_minor(tensorflow)}.0"])
    if (installed_version("ipywidgets") or "0").split(".")[0] != "8":
        needed.append([f"ipywidgets=={pins['ipywidgets']}"])
    return needed


def _pip(args: list[str]) -> int:
    return subprocess.run([sys.executable, "-m", "pip", "install", "-q", *args], capture_output=True).returncode


def install_missing(*, tpu: bool = False) -> list[str]:
    """Install what :func:`missing_packages` lists; one line per package on what happened. Never raises."""
    lines = []
    for args in missing_packages(tpu=tpu):
        if _pip(args) == 0:
            lines.append(f"installed {args[0]}")
        elif args[0].startswith("tensorflow-tpu"):
            plain = args[0].replace("tensorflow-tpu", "tensorflow")
            done = "installed" if _pip([plain]) == 0 else "could not install either:"
            lines.append(f"could not install {args[0]}; {done} {plain}: the TPU section uses the simulator's TPU")
        else:
            lines.append(f"could not install {args[0]} (pip failed): later cells that need it will say so")
    return lines
