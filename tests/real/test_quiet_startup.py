"""TensorFlow's C++ start-up noise stays out of a notebook (issue: red boxes on every book page).

Each case runs in a fresh interpreter, as a kernel starts, with the setup cell's
``TF_CPP_MIN_LOG_LEVEL=2``. The plain import is the control: it shows that this
machine's TensorFlow does print the noise, so the quiet start is what removes it.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from distsim.real.env import STARTUP_NOISE

pytestmark = pytest.mark.tf

_ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "TF_USE_LEGACY_KERAS": "1"}


def _stderr_of(source: str) -> str:
    done = subprocess.run([sys.executable, "-c", source], env=_ENV, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stderr


def _noise(text: str) -> list[str]:
    return [marker for marker in STARTUP_NOISE if marker in text]


def test_a_plain_import_prints_the_noise_here():
    assert _noise(_stderr_of("import tensorflow as tf; tf.config.list_physical_devices(); tf.constant(1) + 1"))


def test_configure_tensorflow_starts_it_quietly_and_logical_devices_still_work():
    source = ("from distsim.real import configure_tensorflow\n"
              "env = configure_tensorflow(num_cpus=3)\n"
              "import tensorflow as tf\n"
              "assert len(tf.config.list_logical_devices('CPU')) == 3\n"
              "tf.distribute.MirroredStrategy().run(lambda: tf.constant(1.0))\n")
    assert _noise(_stderr_of(source)) == []


def test_a_failed_import_keeps_what_tensorflow_wrote():
    source = ("import sys, builtins\n"
              "real = builtins.__import__\n"
              "def broken(name, *a, **k):\n"
              "    if name == 'tensorflow':\n"
              "        sys.stderr.write('the loader said why\\n'); sys.stderr.flush()\n"
              "        raise ImportError('no tensorflow')\n"
              "    return real(name, *a, **k)\n"
              "builtins.__import__ = broken\n"
              "from distsim.real.env import start_tensorflow\n"
              "try:\n"
              "    start_tensorflow()\n"
              "except ImportError as e:\n"
              "    print('|'.join(e.__notes__))\n")
    done = subprocess.run([sys.executable, "-c", source], env=_ENV, capture_output=True, text=True, timeout=120)
    assert "the loader said why" in done.stdout, (done.stdout, done.stderr)
