"""distsim installs like a library and keeps its layers.

* A non-editable ``pip install .`` into a fresh virtual environment works
  from any directory: the CLI, the presets, the published tables and
  ``load_mnist()`` come from the installed package, not from this checkout.
* The import-layer contract (``pyproject.toml``, ``[tool.importlinter]``)
  holds: no upward import, no cycle, no TensorFlow below ``distsim.real``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent

CHECK_INSTALLED = """
import json, sys
import distsim
from distsim.datasets import load_mnist
from distsim.published import load_tables
from distsim.scenario import preset_names
assert "site-packages" in distsim.__file__, distsim.__file__
mnist = load_mnist()
print(json.dumps({"file": distsim.__file__, "train": len(mnist.x_train), "tables": len(load_tables()),
                  "devices": len(preset_names("device")),
                  "tensorflow": "tensorflow" in sys.modules}))
"""


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """A fresh venv with a non-editable install of this checkout (numpy from the pip cache)."""
    root = tmp_path_factory.mktemp("install")
    env_dir = root / "venv"
    venv.create(env_dir, with_pip=True)
    build = root / "src"
    # Copy the sources so the build cannot write into the checkout (build/, *.egg-info).
    shutil.copytree(REPO, build, ignore=shutil.ignore_patterns(".venv", ".git", "data", "notebooks", "tests",
                                                                "artifacts", "*.egg-info", "build", "__pycache__"))
    pip = subprocess.run([env_dir / "bin" / "python", "-m", "pip", "install", "--quiet", str(build)],
                         capture_output=True, text=True, timeout=600)
    assert pip.returncode == 0, pip.stderr[-2000:]
    return env_dir / "bin" / "python", root


def test_installed_package_works_from_any_directory(installed):
    python, root = installed
    elsewhere = root / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "DISTSIM_MNIST")}
    run = subprocess.run([python, "-c", CHECK_INSTALLED], cwd=elsewhere, capture_output=True, text=True,
                         timeout=120, env=env)
    assert run.returncode == 0, run.stderr
    assert '"train": 60000' in run.stdout and '"tensorflow": false' in run.stdout, run.stdout
    predict = subprocess.run([python, "-m", "distsim", "predict", str(REPO / "examples" / "scenarios" /
                                                                     "seed_mirrored_4x1080ti_cats_b256.json")],
                             cwd=elsewhere, capture_output=True, text=True, timeout=120, env=env)
    assert predict.returncode == 0, predict.stderr
    assert "speedup, strong scaling" in predict.stdout


def test_import_contract_holds():
    run = subprocess.run([BIN / "lint-imports", "--no-cache"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:]
    assert "0 broken" in run.stdout
