"""Run a learner's ClusterCoordinator loop on a real parameter-server cluster; print one JSON report.

Starts 2 workers and 1 parameter server inside this process (localhost, as
``mnist_ps.py`` does), builds the MNIST MLP and an SGD optimizer under a
``ParameterServerStrategy``, and calls ``--answer-file``'s
``coordinator_loop(strategy, coordinator, model, optimizer, dataset_fn, steps)``.
The coordinator it gets records what it was asked to do. The report says what
was called, how many updates the parameter server had applied when the
function returned and after a final ``join``, and any error. The workbook's
exercise checker (``notebooks/exercises.py``) turns it into a verdict.
"""

from __future__ import annotations

import argparse
import json
import os
import runpy

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")  # tf_keras: Keras 3 cannot drive ParameterServerStrategy
os.environ.setdefault("GRPC_FAIL_FAST", "use_caller")

import tensorflow as tf  # noqa: E402
from mnist_fit import build_model  # noqa: E402
from mnist_ps import parse_args, start_local_cluster, worker_dataset_fn  # noqa: E402


class RecordingCoordinator:
    """A ClusterCoordinator that notes every call in `calls` and passes it on."""

    def __init__(self, coordinator) -> None:
        self.coordinator, self.calls = coordinator, []

    def create_per_worker_dataset(self, dataset_fn):
        self.calls.append("create_per_worker_dataset")
        return self.coordinator.create_per_worker_dataset(dataset_fn)

    def schedule(self, fn, args=None, kwargs=None):
        traced = isinstance(fn, (tf.types.experimental.PolymorphicFunction, tf.types.experimental.ConcreteFunction))
        self.calls.append("schedule" if traced else "schedule_python")
        return self.coordinator.schedule(fn, args=args, kwargs=kwargs)

    def join(self):
        self.calls.append("join")
        return self.coordinator.join()

    def __getattr__(self, name):   # done, fetch, strategy: as they are
        return getattr(self.coordinator, name)


def message(exc: BaseException) -> str:
    """The line of an error that says what went wrong: a traced function's error starts with "in user code:"."""
    lines = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip() and not ln.strip().startswith("Please see")] or [""]
    line = lines[-1] if lines[0] == "in user code:" else lines[0]
    return (line if line.startswith(type(exc).__name__) else f"{type(exc).__name__}: {line}")[:300]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--answer-file", required=True, help="a .py file defining coordinator_loop(...)")
    p.add_argument("--steps", type=int, default=40)
    args = p.parse_args()
    data_args = parse_args(["--workers", "2", "--steps", str(args.steps)])
    strategy = tf.distribute.ParameterServerStrategy(start_local_cluster(2, 1))
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    with strategy.scope():
        model = build_model("mlp", 0)
        optimizer = tf.keras.optimizers.SGD(0.1)
        applied = optimizer.iterations   # a variable on the PS: +1 per apply_gradients
    loop = runpy.run_path(args.answer_file, init_globals={"tf": tf})["coordinator_loop"]
    recorder = RecordingCoordinator(coordinator)
    report = {"steps": args.steps, "error": None}
    try:
        loop(strategy, recorder, model, optimizer, worker_dataset_fn(data_args), args.steps)
        report["done_at_return"] = bool(coordinator.done())
        report["applied_at_return"] = int(applied.numpy())
        coordinator.join()
    except Exception as exc:  # the learner's code failed: the checker passes the first line on
        report["error"] = message(exc)
    report["calls"] = recorder.calls
    report["applied"] = int(applied.numpy())
    print("distsim-report", json.dumps(report))


if __name__ == "__main__":
    main()
