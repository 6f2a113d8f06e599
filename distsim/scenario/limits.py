"""Sizes the simulator can answer in bounded time and memory.

Each bound is checked where the value enters (a scenario field, a sweep grid)
and named in the error, so a typo such as ``devices_per_worker=40000`` is a
one-line message, not a hang. The bounds come from ``benchmarks/bench_timing.py``:
the largest allowed scenario still predicts in seconds on a 2-core machine.
"""

#: Worker hosts in one cluster.
MAX_WORKERS = 100_000
#: Devices (replicas) on one worker.
MAX_DEVICES_PER_WORKER = 1_024
#: Replicas in one scenario (workers x devices). The collective cost is priced
#: from an explicit transfer schedule whose size grows with the square of the
#: ranks: 1,024 ranks take seconds.
MAX_REPLICAS = 1_000_000
#: Steps the timeline simulates (or updates per worker, async).
MAX_STEPS = 100_000
#: Steps x replicas x gradient buckets of one timeline (its arrays' size).
MAX_TIMELINE_CELLS = 2_000_000
#: Updates the asynchronous parameter-server simulation applies (steps x workers).
MAX_ASYNC_UPDATES = 10_000_000
#: Gradient tensors of a workload (buckets hold whole tensors).
MAX_GRADIENT_TENSORS = 100_000
#: Rows of one sweep (the product of the grid's lengths).
MAX_SWEEP_ROWS = 10_000_000
#: Examples in a dataset; epoch lengths are computed in closed form.
MAX_EXAMPLES = 10**12
#: Parameters of a model (a trillion-parameter model is in range; its memory
#: is checked against the device separately).
MAX_PARAMS = 10**13
