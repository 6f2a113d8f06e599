"""How data-parallel training moves examples and gradients.

* :mod:`~distsim.mechanics.sharding`: which examples each replica gets, epoch lengths;
* :mod:`~distsim.mechanics.collectives`: all-reduce algorithms as explicit schedules;
* :mod:`~distsim.mechanics.collective_costs`: their cost in closed form, for any number of ranks;
* :mod:`~distsim.mechanics.gradients`: which gradient tensors travel together, and when;
* :mod:`~distsim.mechanics.communication`: a collective's cost on real hardware (topology, NCCL,
  hierarchical stages, parameter servers);
* :mod:`~distsim.mechanics.reduceplan`: a schedule compiled for fast, exact NumPy execution;
* :mod:`~distsim.mechanics.strategies`: what each ``tf.distribute`` strategy means for the engines;
* :mod:`~distsim.mechanics.stragglers`: random compute times, backup workers;
* :mod:`~distsim.mechanics.memory`: the device memory one replica needs;
* :mod:`~distsim.mechanics.checkpointing`: how often to checkpoint, and what failures waste.
"""

from distsim.mechanics import (checkpointing, collective_costs, collectives, communication, gradients, memory,
                               reduceplan, sharding, strategies, stragglers)

__all__ = ["checkpointing", "collective_costs", "collectives", "communication", "gradients", "memory", "reduceplan",
           "sharding", "strategies", "stragglers"]
