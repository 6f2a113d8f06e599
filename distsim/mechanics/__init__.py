"""How data-parallel training moves examples and gradients.

* :mod:`~distsim.mechanics.sharding`: which examples each replica gets, epoch lengths;
* :mod:`~distsim.mechanics.collectives`: all-reduce algorithms as explicit schedules, their costs;
* :mod:`~distsim.mechanics.reduceplan`: a schedule compiled for fast, exact NumPy execution;
* :mod:`~distsim.mechanics.strategies`: what each ``tf.distribute`` strategy means for the engines;
* :mod:`~distsim.mechanics.stragglers`: random compute times, backup workers;
* :mod:`~distsim.mechanics.memory`: the device memory one replica needs.
"""

from distsim.mechanics import collectives, memory, reduceplan, sharding, strategies, stragglers

__all__ = ["collectives", "memory", "reduceplan", "sharding", "strategies", "stragglers"]
