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
#: ranks: 512 ranks take 1-2 s the first time (then it is cached), 1,024 take
#: 10-30 s.
MAX_REPLICAS = 512
#: Steps the timeline simulates (or updates per worker, async): its loop
#: costs about 0.5 ms a step, so 10,000 steps take about 5 s.
MAX_STEPS = 10_000
#: Steps x replicas x gradient buckets of one timeline: about 1 kB of arrays
#: and trace events each, so the bound keeps a timeline near 0.5 GB.
MAX_TIMELINE_CELLS = 500_000
#: Updates the asynchronous parameter-server simulation applies (steps x
#: workers): predict takes about 11 us and 240 bytes per update (500,000
#: updates: 5.5 s, 118 MB), so a million stay near 10 s.
MAX_ASYNC_UPDATES = 1_000_000
#: Gradient tensors of a workload (buckets hold whole tensors).
MAX_GRADIENT_TENSORS = 100_000
#: Rows of one sweep (the product of the grid's lengths).
MAX_SWEEP_ROWS = 10_000_000
#: Examples in a dataset; epoch lengths are computed in closed form.
MAX_EXAMPLES = 10**12
#: Parameters of a model (a trillion-parameter model is in range; its memory
#: is checked against the device separately).
MAX_PARAMS = 10**13
