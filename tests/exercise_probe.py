"""Runs one exercise's checker on answers in a fresh process (TensorFlow with 4 logical CPUs).

    python tests/exercise_probe.py 08_ex4 notebooks/solutions/08_ex4.py tests/exercise_answers/08_ex4_wrong.py ...

An exercise is named by its solution file's stem, ``<notebook>_ex<N>`` (``08_ex4``: notebook 08, Exercise 4).

Prints one JSON object: answer file -> the checker's verdict. Each answer file is loaded as the notebook's
exercise cell would be, with `tf` and the notebook's constants defined.
"""

from __future__ import annotations

import json
import runpy
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "notebooks"))

from distsim.real import configure_tensorflow  # noqa: E402

configure_tensorflow(num_cpus=4, describe=False)
import exercises  # noqa: E402
import tensorflow as tf  # noqa: E402

CPUS = [d.name for d in tf.config.list_logical_devices("CPU")]
#: exercise -> the function its cell defines
NAMES = {"02_ex4": "weighted_replica_loss", "04_ex1": "train_mnist", "04_ex3": "warmup_schedule",
         "05_ex1": "dataset_fn", "05_ex2": "three_worker_configs", "05b_ex3": "train_worker",
         "06_ex2": "coordinator_loop", "06_ex3": "make_partitioner", "07_ex1": "central_step",
         "08_ex4": "my_dataset_fn", "09_ex4": "resumable_fit", "09_ex5": "export_and_reload"}


def checker(exercise: str):
    """The exercise's checker as its cell calls it, given the learner's function."""
    if exercise == "07_ex1":
        return lambda fn: exercises.check_central_step(fn, CPUS)
    # These build their own strategies, or launch processes.
    if exercise in ("05_ex1", "05_ex2", "05b_ex3", "06_ex2", "06_ex3", "09_ex4", "09_ex5"):
        return {"05_ex2": exercises.check_three_workers, "05_ex1": exercises.check_sharded_input,
                "05b_ex3": exercises.check_multi_worker_fit, "06_ex2": exercises.check_coordinator_loop,
                "06_ex3": exercises.check_partitioner,
                "09_ex4": exercises.check_resumable, "09_ex5": exercises.check_saved_model}[exercise]
    strategy = tf.distribute.MirroredStrategy(CPUS)
    check = {"02_ex4": exercises.check_weighted_loss, "04_ex1": exercises.check_train_mnist,
             "04_ex3": exercises.check_warmup_schedule, "08_ex4": exercises.check_dataset_fn}[exercise]
    return lambda fn: check(fn, strategy)


def main(exercise: str, answers: list[str]) -> None:
    check = checker(exercise)
    cell_globals = {"tf": tf, "SMALL_EPOCHS": exercises.RESUME_EPOCHS, "SMALL_STEPS": exercises.RESUME_STEPS}
    verdicts = {a: check(runpy.run_path(a, init_globals=cell_globals)[NAMES[exercise]]) for a in answers}
    print(json.dumps(verdicts))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
