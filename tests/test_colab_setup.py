"""The setup cell as Colab runs it, and what it installs there.

The Colab runtime is stood in for by a fresh virtual environment of the base
Python (its own numpy, no distsim, no TensorFlow) with a ``google.colab``
module imported first, as Colab does, and a stand-in ``pip`` that records
what it was asked to install and answers with the exit status the test sets.
The clone is real: ``git clone`` of this repository.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FAKE_PIP = ("import json, os, sys\n"
            "with open(os.environ['FAKE_PIP_LOG'], 'a') as f:\n"
            "    f.write(json.dumps(sys.argv[1:]) + '\\n')\n"
            "sys.exit(int(os.environ.get('FAKE_PIP_EXIT', '0')))\n")


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


nbtool = _load("nbtool", ROOT / "scripts" / "nbtool.py")
colab_runtime = _load("colab_runtime", ROOT / "notebooks" / "colab_runtime.py")
PINS = colab_runtime.workbook_pins()


@pytest.fixture(scope="module")
def colab(tmp_path_factory) -> Path:
    """A stand-in Colab: a fresh venv, ``google.colab`` and ``pip`` stand-ins on its path."""
    home = tmp_path_factory.mktemp("colab")
    subprocess.run([sys._base_executable, "-m", "venv", "--without-pip", "--system-site-packages",
                    str(home / "venv")], check=True, timeout=120)
    (home / "fakes" / "google" / "colab").mkdir(parents=True)
    (home / "fakes" / "google" / "__init__.py").write_text("")
    (home / "fakes" / "google" / "colab" / "__init__.py").write_text("")
    (home / "fakes" / "pip").mkdir()
    (home / "fakes" / "pip" / "__init__.py").write_text("")
    (home / "fakes" / "pip" / "__main__.py").write_text(FAKE_PIP)
    return home


IMPORT_DISTSIM = "\nimport distsim\nprint('distsim from', distsim.__file__)\n"


def _run_setup_cell(colab: Path, workbook: Path, url: str, pip_exit: int = 0, then: str = IMPORT_DISTSIM):
    log = colab / f"pip-{workbook.parent.name}.log"
    code = "import google.colab\n" + nbtool.setup_cell_source(url) + then
    env = {"PATH": os.environ["PATH"], "HOME": str(colab), "PYTHONPATH": str(colab / "fakes"),
           "DISTSIM_WORKBOOK_DIR": str(workbook), "FAKE_PIP_LOG": str(log), "FAKE_PIP_EXIT": str(pip_exit)}
    done = subprocess.run([str(colab / "venv" / "bin" / "python"), "-c", code], cwd=colab, env=env,
                          capture_output=True, text=True, timeout=300)
    asked = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return done, asked


def test_the_setup_cell_clones_the_workbook_installs_the_pins_and_imports_distsim(colab):
    workbook = colab / "content" / "distsim-workbook"
    done, asked = _run_setup_cell(colab, workbook, str(ROOT))
    assert done.returncode == 0, done.stderr[-2000:]
    assert (workbook / "notebooks" / "colab_runtime.py").exists()
    assert f"distsim from {workbook}" in done.stdout
    assert [args[2] for args in asked] == [f"tensorflow=={PINS['tensorflow']}", f"tf-keras=={PINS['tf-keras']}",
                                            f"ipywidgets=={PINS['ipywidgets']}"]
    assert f"installed tensorflow=={PINS['tensorflow']}" in done.stdout


def test_a_clone_that_fails_says_what_to_do_in_one_line_without_a_traceback(colab):
    done, asked = _run_setup_cell(colab, colab / "nowhere" / "distsim-workbook", str(colab / "no-such-repository"),
                                  then="")
    said = [line for line in done.stdout.splitlines() if "Could not clone" in line]
    assert len(said) == 1 and "DISTSIM_REPO_URL" in said[0], done.stdout
    assert done.returncode == 0 and "Traceback" not in done.stderr and asked == []


def test_a_failed_install_is_one_line_and_the_cell_goes_on(colab):
    workbook = colab / "content-failing" / "distsim-workbook"
    done, asked = _run_setup_cell(colab, workbook, str(ROOT), pip_exit=1)
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"could not install tensorflow=={PINS['tensorflow']} (pip failed)" in done.stdout
    assert f"distsim from {workbook}" in done.stdout


def test_a_tpu_notebook_on_a_tpu_machine_asks_for_the_tpu_build_and_falls_back_to_the_plain_one(monkeypatch):
    monkeypatch.setattr(colab_runtime, "has_tpu", lambda: True)
    monkeypatch.setattr(colab_runtime, "installed_version", lambda *names: None)
    needed = colab_runtime.missing_packages(tpu=True)
    assert needed[0] == [f"tensorflow-tpu=={PINS['tensorflow']}", "-f", colab_runtime.LIBTPU_INDEX]
    assert colab_runtime.missing_packages(tpu=False)[0] == [f"tensorflow=={PINS['tensorflow']}"]
    asked = []
    monkeypatch.setattr(colab_runtime, "_pip", lambda args: asked.append(args[0]) or int("tpu" in args[0]))
    lines = colab_runtime.install_missing(tpu=True)
    assert asked[:2] == [f"tensorflow-tpu=={PINS['tensorflow']}", f"tensorflow=={PINS['tensorflow']}"]
    assert "the TPU section uses the simulator's TPU" in lines[0]


@pytest.mark.parametrize("tensorflow, keras, widgets, wanted", [
    ("2.21.0", "2.21.0", "8.1.9", []),
    ("2.19.0", None, "8.1.9", [["tf-keras~=2.19.0"]]),
    ("2.19.0", "2.18.1", "7.7.1", [["tf-keras~=2.19.0"], [f"ipywidgets=={PINS['ipywidgets']}"]]),
])
def test_an_installed_tensorflow_gets_the_tf_keras_of_its_own_minor_version(monkeypatch, tensorflow, keras, widgets,
                                                                              wanted):
    versions = {"tensorflow": tensorflow, "tf-keras": keras, "ipywidgets": widgets}
    monkeypatch.setattr(colab_runtime, "installed_version", lambda *names: versions.get(names[0]))
    assert colab_runtime.missing_packages(tpu=False) == wanted


def test_every_notebook_but_the_tpu_one_installs_the_plain_build():
    for path in sorted((ROOT / "notebooks").glob("[0-9]*.ipynb")):
        setup = next(c for c in json.loads(path.read_text())["cells"] if "IN_COLAB =" in "".join(c["source"]))
        assert ("install_missing(tpu=True)" in "".join(setup["source"])) == path.name.startswith("07_"), path.name
