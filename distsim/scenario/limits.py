"""Sizes the simulator can answer in bounded time and memory.

Each bound is checked where the value enters (a scenario field, a sweep grid)
and named in the error, so a typo such as ``devices_per_worker=40000`` is a
one-line message, not a hang. Every bound is the size of a scenario
``benchmarks/bench_timing.py --limits`` times on a 2-core machine (figures
from that run are quoted below): the largest allowed scenario predicts in
about a second or a few, in at most a few GB.

Collectives are priced in closed form (no transfer schedule), so the number
of replicas costs only arrays of that length: the timeline is vectorised
over replicas and traces at most :data:`MAX_TRACE_REPLICAS` of them.
"""

#: Worker hosts in one cluster.
MAX_WORKERS = 100_000
#: Devices (replicas) on one worker.
MAX_DEVICES_PER_WORKER = 1_024
#: Replicas in one scenario (workers x devices). Collectives are priced in
#: closed form, so replicas cost arrays of their length: 1,000,000 replicas x
#: 19 steps (the timeline bound below) took 0.57 s and 134 MB.
MAX_REPLICAS = 1_000_000
#: Replicas of an explicit transfer schedule (the NumPy numerics, the
#: animations): its size grows with the square of the ranks; 512 ranks take
#: 1-2 s the first time (then it is cached), 1,024 take 10-30 s.
MAX_SCHEDULE_RANKS = 512
#: Steps the timeline simulates (or updates per worker, async): its loop
#: costs about 0.4 ms a step, so 10,000 steps take about 4 s.
MAX_STEPS = 10_000
#: Steps x (replicas + collectives per step) of one timeline: its work.
#: 20,000,000 as 1,000,000 replicas x 19 steps: 0.57 s; as 1,000 replicas x
#: 19,980 steps (one Python iteration per step): 7.8 s.
MAX_TIMELINE_CELLS = 20_000_000
#: Replicas a timeline's trace shows at most (the first workers' and the last's).
MAX_TRACE_REPLICAS = 64
#: Events of one trace, estimated as steps x shown replicas x (8 + backward
#: pieces + collectives per step). The 1,000-replica run above made 12.8
#: million events and peaked at 1.3 GB; 5,000,000 keeps a trace near 0.5 GB.
MAX_TRACE_EVENTS = 5_000_000
#: Updates the asynchronous parameter-server simulation applies (steps x
#: workers): predict takes about 11 us and 240 bytes per update (500,000
#: updates: 5.5 s, 118 MB), so a million stay near 10 s.
MAX_ASYNC_UPDATES = 1_000_000
#: Gradient tensors of a workload (buckets hold whole tensors).
MAX_GRADIENT_TENSORS = 100_000
#: Rows of one sweep (the product of the grid's lengths): 10,000,000 rows took
#: 14.9 s and 6.6 GB (about 650 bytes a row), so half of that.
MAX_SWEEP_ROWS = 5_000_000
#: Examples in a dataset; epoch lengths are computed in closed form.
MAX_EXAMPLES = 10**12
#: Parameters of a model (a trillion-parameter model is in range; its memory
#: is checked against the device separately).
MAX_PARAMS = 10**13

# Ranges of the continuous fields. A value a field's rule calls "> 0" can
# still be 1e-300, and 1/1e-300 overflows to inf somewhere downstream; these
# bounds are wide (many orders of magnitude beyond any real hardware on
# either side) yet keep every product and quotient the model forms finite:
# the slowest step they allow (1e20 FLOP x 1e12 examples at 1e3 FLOP/s x
# 1e-6 efficiency, times 1e12 steps and 1e6 epochs) is about 1e53 s, the
# fastest about 1e-20 s.

#: Seconds of a fixed cost (latency, overhead, per-example time): an hour.
MAX_SECONDS = 3_600.0
#: Seconds one example may take at the least (a femtosecond).
MIN_SECONDS_PER_EXAMPLE = 1e-15
#: Bytes per second of any link or memory: 1 byte/s to 10 PB/s.
MIN_BYTES_PER_S = 1.0
MAX_BYTES_PER_S = 1e16
#: Bytes of memory, a message or an example's activations: up to 10 PB.
MAX_BYTES = 1e16
#: Peak FLOP/s of a device: 1 kFLOP/s to 100 EFLOP/s.
MIN_FLOPS = 1e3
MAX_FLOPS = 1e20
#: Training FLOP per example: 1 to 1e20.
MIN_FLOP = 1.0
MAX_FLOP = 1e20
#: Smallest share (efficiency, payload fraction, readiness): one in a million.
MIN_FRACTION = 1e-6
#: Cores of a worker: a thousandth of a core to a million.
MIN_CORES = 1e-3
MAX_CORES = 1e6
#: Relative speed of an input core: 1/1000 to 1000 times the reference.
MIN_SPEED = 1e-3
MAX_SPEED = 1e3
