"""An independent oracle for ``distsim.predict``: a SimPy model of the step.

Written from the model as the docstrings and docs state it (the module
docstrings of ``distsim/engines/steady.py``, ``timeline.py``, ``asyncps.py``,
``prediction.py``, ``distsim/mechanics/communication.py``,
``collective_costs.py``, ``gradients.py`` and ``/work/shared/DESIGN.md``'s
cost formulas), never from the engines' code: nothing here imports
``distsim.engines`` or ``distsim.mechanics`` (``tests/test_oracle.py`` checks
this with an AST scan). It reads only :class:`distsim.scenario.Scenario`'s
fields.

* :mod:`.costs`: plain closed forms for one collective (ring, tree,
  halving-doubling, hierarchical, a synchronous PS, CentralStorage's reduce), the input, the
  dispatch, the update (each a few lines, with the docstring it comes from).
* :mod:`.model`: processes and resources in SimPy: a per-worker input
  producer into a ``Store`` of capacity 1 (prefetch) or input inside the
  step, the host's overhead and per-replica dispatch, a worker's shared CPU
  cores, each replica's forward
  and backward with a seeded random factor, gradient buckets reduced one at
  a time on a serial communication resource while the backward pass goes on,
  the update, the metric all-reduces; and the asynchronous parameter servers
  as FIFO shard resources that workers pull from and push to.
* :mod:`.scenarios`: the seeded random scenarios the oracle covers.

Scope (what the oracle covers; ``predict`` covers more): GPU devices, and
CPU devices on shared cores (with a CPU-quota straggler) for synchronous
training; no topology preset, the
``alpha_beta`` protocol (TensorFlow's NCCL default for mirrored on GPUs is
set back to it), kernel launches (``data/reference/RULES.md`` rules 16-18), ``buckets`` grouping, ``DATA``/``OFF`` sharding
without a shuffle buffer, and for asynchronous parameter servers
``ps_cluster="processes"`` over a half-duplex link, or ``"in_process"`` (one
FIFO server for every transfer and apply, and on shared CPU cores for the
workers' own time too).
"""
