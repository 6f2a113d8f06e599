"""Every exercise checker (notebooks/exercises.py) against the solution, an idiomatic variant and wrong answers.

The solution (notebooks/solutions/) and the idiomatic variant (tests/exercise_answers/*_idiomatic.py) must get
"Right"; each wrong answer must get "Not yet" with a hint that names its actual mistake. The checkers run real
TensorFlow, one fresh process per notebook (tests/exercise_probe.py), so this process never imports it.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.tf

ROOT = Path(__file__).resolve().parents[1]
ANSWERS = ROOT / "tests" / "exercise_answers"

#: notebook -> (solution file, {wrong answer file: words its hint must contain})
CASES = {
    "02": ("02_ex4.py", {"02_ex4_wrong.py": "points another way", "02_ex4_wrong2.py": "4.00 times as long",
                        "02_ex4_wrong3.py": "points the opposite way"}),
    "04": ("04_ex1.py", {"04_ex1_wrong.py": "fit ran 2 epochs", "04_ex1_wrong2.py": "each of the 4 replicas got 8"}),
    "05": ("05_ex3.py", {"05_ex3_wrong.py": "worker0 is claimed 3 times"}),
    "05b": ("05b_ex3.py", {"05b_ex3_wrong.py": "each worker trained under MirroredStrategy with 1 replica(s)"}),
    "06": ("06_ex3.py", {"06_ex3_wrong.py": "the cluster has jobs {'chief': 1, 'worker': 3}"}),
    "06b": ("06b_ex2.py", {"06b_ex2_wrong.py": "holds 200,704 bytes, over the 131,072 asked",
                          "06b_ex2_wrong2.py": "ModuleNotFoundError: No module named 'tensorflow.distribute",
                          "06b_ex2_wrong3.py": "would do"}),
    "07": ("07_ex1.py", {"07_ex1_wrong.py": "divide by the global batch"}),
    "08": ("08_ex4.py", {"08_ex4_wrong.py": "Does shuffling happen before the epochs are repeated",
                        "08_ex4_wrong2.py": "give each input pipeline its own shard"}),
    "09": ("09_ex4.py", {"09_ex4_wrong.py": "started again at epoch 0"}),
}

# ---- 09, Exercise 5: a SavedModel written by the chief, loaded with and without strategy.scope() ----
CASES["09s"] = ("09_ex5.py", {"09_ex5_wrong.py": "Load it again inside `with strategy.scope():`",
                              "09_ex5_wrong2.py": "wrote into export_dir, which the chief writes",
                              "09_ex5_wrong3.py": "left ['worker_copy'] next to export_dir"})


# ---- 04, Exercise 3: a learning-rate warm-up scaled by the replica count ----
CASES["04_ex3"] = ("04_ex3.py", {"04_ex3_wrong.py": "not multiplied by strategy.num_replicas_in_sync (4 here)",
                                 "04_ex3_wrong2.py": "off by one: your rate at step k is the one due at step k + 1",
                                 "04_ex3_wrong3.py": "cannot be traced into a graph (OperatorNotAllowedInGraphError)",
                                 "04_ex3_wrong4.py": "no warm-up: step 0 already has the full rate 0.4"})


@functools.cache
def verdicts(notebook: str) -> dict[str, str]:
    """The checker's verdict on every answer of `notebook`, by file name, from one fresh TensorFlow process."""
    solution, wrong = CASES[notebook]
    files = [ROOT / "notebooks" / "solutions" / solution, ANSWERS / f"{solution[:-3]}_idiomatic.py"]
    files += [ANSWERS / name for name in wrong]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "3"}
    done = subprocess.run([sys.executable, str(ROOT / "tests" / "exercise_probe.py"), notebook, *map(str, files)],
                          capture_output=True, text=True, env=env, timeout=600, cwd=ROOT / "notebooks")
    assert done.returncode == 0, done.stderr[-2000:]
    return {Path(k).name: v for k, v in json.loads(done.stdout.strip().splitlines()[-1]).items()}


#: Their checkers launch a cluster of 2 to 4 TensorFlow processes for each answer that passes validation.
LAUNCHING = ("05", "05b", "06")


def by_cost(notebook: str):
    return pytest.param(notebook, marks=[pytest.mark.slow] * (notebook in LAUNCHING))


@pytest.mark.parametrize("notebook", [by_cost(nb) for nb in sorted(CASES)])
def test_the_solution_and_an_idiomatic_variant_are_right(notebook):
    solution = CASES[notebook][0]
    got = verdicts(notebook)
    assert got[solution].startswith("Right:"), got[solution]
    assert got[f"{solution[:-3]}_idiomatic.py"].startswith("Right:"), got


@pytest.mark.parametrize("notebook, wrong, hint", [
    pytest.param(nb, w, h, marks=[pytest.mark.slow] * (nb in LAUNCHING)) for nb, (_, ws) in CASES.items()
    for w, h in ws.items()])
def test_a_wrong_answer_gets_a_hint_naming_its_mistake(notebook, wrong, hint):
    got = verdicts(notebook)[wrong]
    assert got.startswith("Not yet:") and hint in got, got
