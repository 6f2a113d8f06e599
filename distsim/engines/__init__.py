"""The simulators: a scenario in, predicted times out.

* :mod:`~distsim.engines.costs`: the costs a step is priced from, computed once per scenario
  (:class:`~distsim.engines.costs.StepCosts`), and an asynchronous worker's;
* :mod:`~distsim.engines.steady`: the synchronous step in closed form (steady state, vectorised);
* :mod:`~distsim.engines.timeline`: the synchronous step simulated step by step, with its trace;
* :mod:`~distsim.engines.asyncps`: asynchronous parameter-server updates and their staleness;
* :mod:`~distsim.engines.asyncrun`: an asynchronous PS scenario's update log, rhythms and caveat;
* :mod:`~distsim.engines.pipeline`: pipeline (model) parallelism;
* :mod:`~distsim.engines.prediction`: :func:`predict`, one scenario;
* :mod:`~distsim.engines.bottleneck`: what limits a predicted step, and its share;
* :mod:`~distsim.engines.sweeps`: :func:`sweep`, a grid of scenarios at once.
"""

from distsim.engines import asyncps, asyncrun, bottleneck, costs, pipeline, steady, timeline
from distsim.engines.prediction import predict
from distsim.engines.sweeps import SweepTable, sweep

__all__ = ["SweepTable", "asyncps", "asyncrun", "bottleneck", "costs", "pipeline", "predict", "steady", "sweep",
           "timeline"]
