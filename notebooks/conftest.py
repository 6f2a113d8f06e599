"""Report how long each notebook took under nbval, so CI logs show the budget, and keep TensorFlow's
start-up noise out of every cell."""

import os
from collections import defaultdict

import pytest

import nbval.kernel

from distsim.real.env import STARTUP_NOISE

_seconds = defaultdict(float)
_start_new_kernel = nbval.kernel.start_new_kernel


def _start_kernel_as_jupyter_does(*args, **kwargs):
    """nbval's kernel inherits ``PYTEST_CURRENT_TEST``, and ipykernel then stops forwarding what C
    libraries write to file descriptors 1 and 2. JupyterLab and Colab forward it (that is how
    TensorFlow's C++ log lines reach a learner's cell), so the kernel here starts without it."""
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
    return _start_new_kernel(*args, env=env, **kwargs)


nbval.kernel.start_new_kernel = _start_kernel_as_jupyter_does


def pytest_runtest_logreport(report):
    if ".ipynb::" not in report.nodeid:
        return
    _seconds[report.nodeid.split("::")[0]] += report.duration


def pytest_terminal_summary(terminalreporter):
    if not _seconds:
        return
    terminalreporter.section("seconds per notebook (all phases of its cells)")
    for name, seconds in sorted(_seconds.items()):
        terminalreporter.write_line(f"{seconds:7.1f}  {name}")
    terminalreporter.write_line(f"{sum(_seconds.values()):7.1f}  total")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    """Fail a cell whose output shows TensorFlow's C++ start-up noise (absl, oneDNN, cuInit...):
    the learner should see what the cell computed, not red boxes of library chatter."""
    result = yield
    texts = [out.get("text", "") for out in getattr(item, "test_outputs", None) or [] if out.get("name") == "stderr"]
    noise = [marker for marker in STARTUP_NOISE if any(marker in text for text in texts)]
    if noise:
        raise AssertionError(f"cell shows TensorFlow's start-up noise ({', '.join(noise)}); start TensorFlow with "
                             "distsim.real.configure_tensorflow() or start_tensorflow() before anything imports it")
    return result
