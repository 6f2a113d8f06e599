"""Every exercise checker (notebooks/exercises.py) against the solution, an idiomatic variant and wrong answers.

The solution (notebooks/solutions/) and the idiomatic variant (tests/exercise_answers/*_idiomatic.py) must get
"Right"; each wrong answer must get "Not yet" with a hint that names its actual mistake. The checkers run real
TensorFlow, one fresh process per exercise (tests/exercise_probe.py), so this process never imports it.
"""

from __future__ import annotations

import ast
import functools
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.tf

ROOT = Path(__file__).resolve().parents[1]
ANSWERS = ROOT / "tests" / "exercise_answers"

#: exercise -> (solution file, {wrong answer file: words its hint must contain}). An exercise is named by its
#: solution file's stem, `<notebook>_ex<N>` (`08_ex4`: notebook 08, Exercise 4), here and in exercise_probe.py.
CASES = {
    "02_ex4": ("02_ex4.py", {"02_ex4_wrong.py": "points another way", "02_ex4_wrong2.py": "4.00 times as long",
                             "02_ex4_wrong3.py": "points the opposite way"}),
    "04_ex1": ("04_ex1.py", {"04_ex1_wrong.py": "fit ran 2 epochs", "04_ex1_wrong2.py": "each of the 4 replicas got 8"}),
    "05_ex2": ("05_ex2.py", {"05_ex2_wrong.py": "worker0 is claimed 3 times"}),
    "05b_ex3": ("05b_ex3.py", {"05b_ex3_wrong.py": "each worker trained under MirroredStrategy with 1 replica(s)"}),
    "06_ex2": ("06_ex2.py", {"06_ex2_wrong.py": "Call coordinator.join() before you return", "06_ex2_wrong2.py": "plain Python function",
                             "06_ex2_wrong3.py": "did not read a per-worker dataset",
                             "06_ex2_wrong4.py": "Call the function that applies the gradients through strategy.run"}),
    "06_ex3": ("06_ex3.py", {"06_ex3_wrong.py": "holds 200,704 bytes, over the 131,072 asked",
                             "06_ex3_wrong2.py": "ModuleNotFoundError: No module named 'tensorflow.distribute",
                             "06_ex3_wrong3.py": "would do"}),
    "07_ex1": ("07_ex1.py", {"07_ex1_wrong.py": "divide by the global batch"}),
    "08_ex4": ("08_ex4.py", {"08_ex4_wrong.py": "Does shuffling happen before the epochs are repeated",
                             "08_ex4_wrong2.py": "give each input pipeline its own shard"}),
    "09_ex4": ("09_ex4.py", {"09_ex4_wrong.py": "started again at epoch 0"}),
}

# ---- 09, Exercise 5: a SavedModel written by the chief, loaded with and without strategy.scope() ----
CASES["09_ex5"] = ("09_ex5.py", {"09_ex5_wrong.py": "Load it again inside `with strategy.scope():`",
                                 "09_ex5_wrong2.py": "wrote into export_dir, which the chief writes",
                                 "09_ex5_wrong3.py": "left ['worker_copy'] next to export_dir"})


# ---- 04, Exercise 3: a learning-rate warm-up scaled by the replica count ----
CASES["04_ex3"] = ("04_ex3.py", {"04_ex3_wrong.py": "not multiplied by strategy.num_replicas_in_sync (4 here)",
                                 "04_ex3_wrong2.py": "off by one: your rate at step k is the one due at step k + 1",
                                 "04_ex3_wrong3.py": "cannot be traced into a graph (OperatorNotAllowedInGraphError)",
                                 "04_ex3_wrong4.py": "no warm-up: step 0 already has the full rate 0.4"})


@functools.cache
def verdicts(exercise: str) -> dict[str, str]:
    """The checker's verdict on every answer of `exercise`, by file name, from one fresh TensorFlow process."""
    solution, wrong = CASES[exercise]
    files = [ROOT / "notebooks" / "solutions" / solution, ANSWERS / f"{solution[:-3]}_idiomatic.py"]
    files += [ANSWERS / name for name in wrong]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "3"}
    done = subprocess.run([sys.executable, str(ROOT / "tests" / "exercise_probe.py"), exercise, *map(str, files)],
                          capture_output=True, text=True, env=env, timeout=600, cwd=ROOT / "notebooks")
    assert done.returncode == 0, done.stderr[-2000:]
    return {Path(k).name: v for k, v in json.loads(done.stdout.strip().splitlines()[-1]).items()}


#: Their checkers launch a cluster of 2 to 4 TensorFlow processes for each answer that passes validation.
LAUNCHING = ("05_ex2", "05b_ex3", "06_ex2")


def by_cost(exercise: str):
    return pytest.param(exercise, marks=[pytest.mark.slow] * (exercise in LAUNCHING))


@pytest.mark.parametrize("exercise", [by_cost(ex) for ex in sorted(CASES)])
def test_the_solution_and_an_idiomatic_variant_are_right(exercise):
    solution = CASES[exercise][0]
    got = verdicts(exercise)
    assert got[solution].startswith("Right:"), got[solution]
    assert got[f"{solution[:-3]}_idiomatic.py"].startswith("Right:"), got


@pytest.mark.parametrize("exercise, wrong, hint", [
    pytest.param(ex, w, h, marks=[pytest.mark.slow] * (ex in LAUNCHING)) for ex, (_, ws) in CASES.items()
    for w, h in ws.items()])
def test_a_wrong_answer_gets_a_hint_naming_its_mistake(exercise, wrong, hint):
    got = verdicts(exercise)[wrong]
    assert got.startswith("Not yet:") and hint in got, got


# ---- notebook 05, Exercise 1: a dataset_fn on a real two-process cluster (each answer launches one) -------------
CASES["05_ex1"] = ("05_ex1.py", {"05_ex1_wrong.py": "the workers read the same examples (32 of the 32 each read",
                                 "05_ex1_wrong2.py": "per-replica batch 16 ≠ 8"})


@pytest.mark.slow
def test_05_dataset_fn_solution_and_tutorial_variant_are_right():
    got = verdicts("05_ex1")
    assert got["05_ex1.py"].startswith("Right:"), got
    assert got["05_ex1_idiomatic.py"].startswith("Right:"), got


@pytest.mark.slow
@pytest.mark.parametrize("wrong", ["05_ex1_wrong.py", "05_ex1_wrong2.py"])
def test_05_dataset_fn_wrong_answer_gets_its_hint(wrong):
    got = verdicts("05_ex1")[wrong]
    hint = CASES["05_ex1"][1][wrong]
    assert got.startswith("Not yet:") and hint in got, got


# ---- every exercise: one name, its solution file's stem, in CASES and in the probe --------------------------------
def test_every_exercise_is_named_by_its_solution_file():
    # exercise_probe.py imports TensorFlow, which this process never does: read its NAMES without running it.
    probe = ast.parse((ROOT / "tests" / "exercise_probe.py").read_text())
    names = next(ast.literal_eval(node.value) for node in probe.body
                 if isinstance(node, ast.Assign) and [t.id for t in node.targets] == ["NAMES"])
    assert set(names) == set(CASES)
    for exercise, (solution, wrong) in CASES.items():
        assert re.fullmatch(r"\d\d[a-z]?_ex\d+", exercise) and solution == f"{exercise}.py", exercise
        assert (ROOT / "notebooks" / "solutions" / solution).is_file(), solution
        assert all(name.startswith(f"{exercise}_wrong") for name in wrong), wrong
