"""Runs one notebook's exercise checker on answers in a fresh process (TensorFlow with 4 logical CPUs).

    python tests/exercise_probe.py 08 notebooks/solutions/08_ex4.py tests/exercise_answers/08_ex4_wrong.py ...

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
NAMES = {"02": "weighted_replica_loss", "04": "train_mnist", "05": "three_worker_configs", "05b": "train_worker", "06": "ps_cluster_configs",
         "06b": "make_partitioner", "07": "central_step", "08": "my_dataset_fn", "09": "resumable_fit",
         "09s": "export_and_reload", "04_ex3": "warmup_schedule"}


def checker(notebook: str):
    """The notebook's checker as its exercise cell calls it, given the learner's function."""
    if notebook == "07":
        return lambda fn: exercises.check_central_step(fn, CPUS)
    if notebook in ("05", "05b", "06", "06b", "09", "09s"):   # these build their own strategies, or launch processes
        return {"05": exercises.check_three_workers, "05b": exercises.check_multi_worker_fit, "06": exercises.check_ps_cluster,
                "06b": exercises.check_partitioner,
                "09": exercises.check_resumable, "09s": exercises.check_saved_model}[notebook]
    strategy = tf.distribute.MirroredStrategy(CPUS)
    check = {"02": exercises.check_weighted_loss, "04": exercises.check_train_mnist,
             "04_ex3": exercises.check_warmup_schedule, "08": exercises.check_dataset_fn}[notebook]
    return lambda fn: check(fn, strategy)


def main(notebook: str, answers: list[str]) -> None:
    check = checker(notebook)
    cell_globals = {"tf": tf, "SMALL_EPOCHS": exercises.RESUME_EPOCHS, "SMALL_STEPS": exercises.RESUME_STEPS}
    verdicts = {a: check(runpy.run_path(a, init_globals=cell_globals)[NAMES[notebook]]) for a in answers}
    print(json.dumps(verdicts))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
