"""What a worker process and its launcher agree on, with no TensorFlow here.

The launcher side (:mod:`distsim.real.launcher`, :mod:`distsim.real.experiment`)
and the worker side (:mod:`distsim.real.runners`, ``python -m distsim.real
worker``) both import this module and nothing of each other.
"""

from __future__ import annotations

#: Exit code of a worker that found no TPU (the launcher reports it in one line).
EXIT_NO_TPU = 3

#: Prefix of the progress lines a worker prints for its launcher's progress bar.
PROGRESS_PREFIX = "distsim-progress"

#: Environment variable holding the launcher's PID; a worker dies with it.
PARENT_PID_ENV = "DISTSIM_PARENT_PID"

#: Per-replica batch of the replica-count micro-benchmark (small enough that
#: compute is a small part of the step; the calibration subtracts it).
TINY_BATCH = 4


class NoTPUError(RuntimeError):
    """No TPU is attached to this runtime (raised by the worker, reported by the launcher)."""
