"""distsim: predict, run and compare data-parallel training with tf.distribute.

Importing ``distsim`` never imports TensorFlow; only ``distsim.real`` does.

The package is layered; each folder imports only from the ones below it
(``.importlinter`` holds the contract CI checks)::

    real        real tf.distribute runs (the only TensorFlow importer)
    cli         python -m distsim
    views       figures and widgets
    published   published measurements the simulator reproduces
    numerics    NumPy training with virtual replicas on real MNIST
    engines     the simulators: steady state, timeline, async parameter servers, pipelines
    mechanics   sharding, collectives and their costs, communication, strategies, stragglers
    results     the Result and Trace every run returns
    scenario    the experiment as one validated state, and its presets
    datasets    real MNIST, offline
    validation  the one exception and the field rules
"""

from distsim.engines.asyncrun import rhythm_range_s
from distsim.engines.prediction import predict
from distsim.engines.sweeps import sweep
from distsim.numerics.asynctrain import AsyncRun, train_async, train_backup_sync
from distsim.numerics.largebatch import large_batch_experiment
from distsim.numerics.losslab import loss_scaling_lab
from distsim.numerics.models import make_model
from distsim.numerics.scenario_training import train_scenario
from distsim.numerics.train import TrainingDiverged, TrainRun, train_sync
from distsim.results import Curve, Event, Result, Staleness, Summary, Trace, compare
from distsim.scenario import Scenario, make_scenario
from distsim.validation import InputError

__version__ = "0.1.0"

__all__ = [
    "AsyncRun",
    "Curve",
    "Event",
    "InputError",
    "Result",
    "Scenario",
    "Staleness",
    "Summary",
    "Trace",
    "TrainRun",
    "TrainingDiverged",
    "__version__",
    "compare",
    "large_batch_experiment",
    "loss_scaling_lab",
    "make_model",
    "make_scenario",
    "predict",
    "rhythm_range_s",
    "sweep",
    "train_async",
    "train_backup_sync",
    "train_scenario",
    "train_sync",
]
