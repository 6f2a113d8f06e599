"""Random *valid* scenarios over every knob, for property tests and benchmarks.

One recipe, :func:`scenario_spec`, decides every field through a small
``Chooser`` (pick one of a list, an integer, a log-uniform float, a coin).
Two choosers drive it:

* :func:`scenarios` wraps hypothesis' ``draw`` (``tests/test_invariants.py``),
  so hypothesis can shrink a failure to a small scenario;
* :class:`RandomChooser` wraps a seeded NumPy generator
  (``benchmarks/bench_invariants.py``), fast enough for 100,000 draws.

The scenario is built only through the public API (:func:`distsim.make_scenario`
from preset names, then :meth:`distsim.Scenario.replace` for link and
workload numbers). Invalid combinations are avoided by construction where a
rule is simple (layout per strategy, TPU strategy on TPU cores, NCCL and
topologies on GPUs, PS knobs only with parameter servers, ``num_files`` only
for FILE sharding, buckets <= tensors); the rest are rejected by catching
:class:`distsim.InputError`, and :data:`REJECTED` counts them by field path
(``predict`` itself refuses a replica that does not fit in device memory, so
the callers count those too).

Sizes are bounded so that one ``predict`` takes milliseconds: at most 4
workers x 8 devices, 3-12 steps, per-replica batches of 1-64.
"""

from __future__ import annotations

import collections
import math
from typing import Any, Callable, Sequence

import numpy as np
from hypothesis import assume
from hypothesis import strategies as st

import distsim
from distsim.scenario import (
    ALGORITHMS,
    COMPUTE_DISTRIBUTIONS,
    GROUPINGS,
    INTER_ALGORITHMS,
    SHARD_POLICIES,
    STRATEGIES,
    preset_names,
)

#: Rejected draws, by the field path of the InputError (or ``"ok"`` for built ones).
REJECTED: collections.Counter = collections.Counter()

DEVICES: tuple[str, ...] = tuple(preset_names("device"))
LINKS: tuple[str, ...] = tuple(preset_names("link"))
WORKLOADS: tuple[str, ...] = tuple(preset_names("workload"))
TOPOLOGIES: tuple[str, ...] = tuple(preset_names("topology"))
_KIND = {name: distsim.make_scenario(name, strategy="one_device").cluster.device.kind for name in DEVICES}
_TENSORS = {name: distsim.make_scenario("a100", name, "one_device").workload.num_gradient_tensors for name in WORKLOADS}

MAX_WORKERS = 4
MAX_DEVICES_PER_WORKER = 8


class Chooser:
    """What :func:`scenario_spec` asks of a random source."""

    def one_of(self, options: Sequence[Any]) -> Any:
        raise NotImplementedError

    def integer(self, low: int, high: int) -> int:
        """An integer in ``[low, high]``."""
        raise NotImplementedError

    def log_uniform(self, low: float, high: float) -> float:
        raise NotImplementedError

    def coin(self, p_true: float = 0.5) -> bool:
        raise NotImplementedError


class RandomChooser(Chooser):
    """A seeded NumPy generator as a :class:`Chooser`."""

    def __init__(self, rng: np.random.Generator):
        self.rng = rng

    def one_of(self, options):
        return options[int(self.rng.integers(len(options)))]

    def integer(self, low, high):
        return int(self.rng.integers(low, high + 1))

    def log_uniform(self, low, high):
        return float(math.exp(self.rng.uniform(math.log(low), math.log(high))))

    def coin(self, p_true=0.5):
        return bool(self.rng.random() < p_true)


class DrawChooser(Chooser):
    """hypothesis' ``draw`` as a :class:`Chooser` (shrinks to the first option, the low end)."""

    def __init__(self, draw: Callable):
        self.draw = draw

    def one_of(self, options):
        return self.draw(st.sampled_from(list(options)))

    def integer(self, low, high):
        return self.draw(st.integers(low, high))

    def log_uniform(self, low, high):
        return float(math.exp(self.draw(st.floats(math.log(low), math.log(high)))))

    def coin(self, p_true=0.5):
        # Shrinks to False; the bias only shapes the first draws.
        return self.draw(st.integers(0, 999)) < 1000 * p_true


def _layout(c: Chooser, strategy: str) -> tuple[int, int]:
    if strategy in ("default", "one_device"):
        return 1, 1
    if strategy in ("mirrored", "central_storage"):
        return 1, c.integer(1, MAX_DEVICES_PER_WORKER)
    return c.integer(1, MAX_WORKERS), c.integer(1, MAX_DEVICES_PER_WORKER)


def _device(c: Chooser, strategy: str) -> str:
    names = [d for d in DEVICES if _KIND[d] == "tpu"] if strategy == "tpu" else list(DEVICES)
    return c.one_of(names)


def _ps_knobs(c: Chooser, strategy: str, algorithm: str | None, workers: int) -> dict:
    """num_ps, ps_cluster, ps_placement, ps_local_sum and mode, as the rules allow them."""
    out: dict[str, Any] = {}
    uses_ps = strategy == "parameter_server" or algorithm == "parameter_server"
    if strategy == "parameter_server":
        out["mode"] = c.one_of([None, "sync", "async"])
        out["ps_cluster"] = c.one_of(["processes", "in_process"])
    if not uses_ps:
        return out
    out["num_ps"] = c.integer(1, 4)
    if out.get("mode", "sync") == "sync":  # a parameter_server strategy's mode None is async
        placements = ["own_hosts", "worker_hosts"] + (["host_cpu"] if workers == 1 else [])
        out["ps_placement"] = c.one_of(placements)
        out["ps_local_sum"] = c.coin()
    return out


def _algorithm(c: Chooser, strategy: str) -> tuple[str | None, str]:
    """``(algorithm, inter_algorithm)``."""
    if strategy in ("default", "one_device"):
        return None, "ring"
    if strategy == "parameter_server":
        return c.one_of([None, "parameter_server"]), "ring"
    algorithm = c.one_of([None, *ALGORITHMS])
    inter = c.one_of(INTER_ALGORITHMS) if algorithm == "hierarchical" else "ring"
    return algorithm, inter


def _grouping(c: Chooser, workload: str) -> dict:
    grouping = c.one_of(GROUPINGS)
    out: dict[str, Any] = {"grouping": grouping}
    if grouping == "buckets":
        out["num_buckets"] = c.integer(1, min(8, _TENSORS[workload]))
    elif grouping == "pack":
        out["bytes_per_pack"] = c.one_of([0, 2**16, 2**20, 2**24])
    elif grouping == "fusion":
        out["fusion_threshold_bytes"] = c.one_of([0, 2**20, 64 * 2**20])
        out["fusion_cycle_s"] = c.log_uniform(1e-4, 1e-2)
    return out


def _training(c: Chooser, workload: str, replicas: int, workers: int, async_: bool, multi: bool,
              distributions: Sequence[str]) -> dict:
    out: dict[str, Any] = {
        "global_batch": replicas * c.integer(1, 64) - (c.integer(0, replicas - 1) if c.coin(0.2) else 0),
        "steps": c.integer(3, 12),
        "epochs": c.integer(1, 3),
        "prefetch": c.one_of([None, True, False]),
        "input_threads": c.one_of([1, 1, 2, 8, 64]),
        "shuffle_buffer": c.one_of([0, 0, 1024, 10_000]),
        "compute_distribution": c.one_of(distributions),
        "seed": c.integer(0, 2**31 - 1),
        "optimizer_bytes_per_param": c.one_of([12, 20, 28]),
        "drop_remainder": c.coin(0.3),
    }
    if out["compute_distribution"] == "lognormal":  # the rules refuse a sigma for any other distribution
        out["compute_sigma"] = c.log_uniform(0.01, 1.0)
    policy = c.one_of(SHARD_POLICIES)
    out["shard_policy"] = policy
    if policy == "FILE":
        out["num_files"] = workers * c.integer(1, 64)
    out.update(_grouping(c, workload))
    if multi and not async_ and replicas > 1 and out.get("num_buckets", 1) == 1 and c.coin(0.2):
        out["backup_workers"] = c.integer(1, replicas - 1)
    return out


def scenario_spec(c: Chooser, *, strategies: Sequence[str] = STRATEGIES,
                  distributions: Sequence[str] = COMPUTE_DISTRIBUTIONS, one_replica: bool = False) -> dict:
    """Keyword arguments of :func:`distsim.make_scenario` and a list of
    ``(path, value)`` replacements, all drawn from ``c``: a strategy of
    ``strategies``, a compute distribution of ``distributions``, and one
    worker with one device when ``one_replica``."""
    strategy = c.one_of(strategies)
    device = _device(c, strategy)
    kind = _KIND[device]
    workload = c.one_of(WORKLOADS)
    workers, devices = (1, 1) if one_replica else _layout(c, strategy)
    algorithm, inter_algorithm = _algorithm(c, strategy)
    ps = _ps_knobs(c, strategy, algorithm, workers)
    async_ = strategy == "parameter_server" and ps.get("mode") in (None, "async")
    kwargs: dict[str, Any] = {
        "device": device, "workload": workload, "strategy": strategy,
        "num_workers": workers, "devices_per_worker": devices,
        "algorithm": algorithm, "inter_algorithm": inter_algorithm, **ps,
        "intra_link": c.one_of(LINKS), "inter_link": c.one_of(LINKS),
        "host_input_speed": c.log_uniform(0.25, 4.0),
    }
    if kind == "gpu":
        kwargs["protocol"] = c.one_of(["alpha_beta", "nccl"])
        if c.coin(0.3):
            kwargs["topology"] = c.one_of(TOPOLOGIES)
    if kind == "cpu" and c.coin(0.5):
        kwargs["physical_cores"] = c.log_uniform(0.5, 8.0)
        if c.coin(0.3) and workers > 1:
            kwargs["straggler_cores"] = kwargs["physical_cores"] * c.log_uniform(0.1, 1.0)
    kwargs.update(_training(c, workload, workers * devices, workers, async_, strategy not in ("default", "one_device"),
                            distributions))
    replacements: list[tuple[str, Any]] = []
    for link in ("intra_link", "inter_link"):
        if c.coin(0.3):
            replacements.append((f"cluster.{link}.bandwidth_Bps", c.log_uniform(1e6, 1e12)))
        if c.coin(0.3):
            replacements.append((f"cluster.{link}.latency_s", c.log_uniform(1e-7, 1e-2)))
    if c.coin(0.3):
        replacements.append(("cluster.inter_link.request_s", c.log_uniform(1e-6, 1e-2)))
    if c.coin(0.3):
        replacements.append(("cluster.inter_link.full_duplex", True))
        if c.coin(0.5):
            replacements.append(("cluster.inter_link.whole_message_bytes", c.log_uniform(1e3, 1e8)))
    if c.coin(0.2):
        replacements.append(("cluster.inter_link.stack_bandwidth_Bps", c.log_uniform(1e7, 1e11)))
    if c.coin(0.25):
        replacements.append(("workload.compute_s_per_sample", c.log_uniform(1e-6, 1e-2)))
    if c.coin(0.25):
        replacements.append(("workload.input_s_per_sample", c.log_uniform(1e-7, 1e-3)))
    if c.coin(0.3):
        # The host's per-replica dispatch (and on shared CPU cores its turns with the compute): the
        # built-in presets leave it 0, calibrated ones measure 0.7-2.2 ms (data/measurements/README.md).
        dispatch = c.log_uniform(1e-6, 3e-3)
        replacements.append(("cluster.device.replica_dispatch_s", dispatch))
        if c.coin(0.5):
            replacements.append(("cluster.device.replica_variable_s", dispatch * c.log_uniform(0.01, 1.0)))
    return {"kwargs": kwargs, "replace": replacements}


def build(spec: dict) -> distsim.Scenario | None:
    """The scenario ``spec`` describes, or ``None`` (counted in :data:`REJECTED`) when a rule refuses it."""
    try:
        scenario = distsim.make_scenario(**spec["kwargs"])
        for path, value in spec["replace"]:
            scenario = scenario.replace(path, value)
    except distsim.InputError as exc:
        REJECTED[exc.path] += 1
        return None
    REJECTED["ok"] += 1
    return scenario


class Case:
    """A drawn scenario with the spec that built it; its repr is the code
    that rebuilds it, so a falsifying example prints as a reproducer."""

    def __init__(self, spec: dict, scenario: distsim.Scenario):
        self.spec, self.scenario = spec, scenario

    def __repr__(self) -> str:
        return reproducer(self.spec)


def reproducer(spec: dict) -> str:
    """Python that rebuilds the scenario of ``spec``."""
    args = ", ".join(f"{k}={v!r}" for k, v in spec["kwargs"].items())
    return f"make_scenario({args})" + "".join(f".replace({p!r}, {v!r})" for p, v in spec["replace"])


@st.composite
def scenarios(draw, **options) -> Case:
    """A hypothesis strategy of valid scenarios as :class:`Case` (``options``
    as for :func:`scenario_spec`; invalid draws are rejected with ``assume``)."""
    spec = scenario_spec(DrawChooser(draw), **options)
    scenario = build(spec)
    assume(scenario is not None)
    return Case(spec, scenario)


def random_scenario(rng: np.random.Generator, tries: int = 100) -> distsim.Scenario:
    """A valid scenario from a seeded generator (redrawn while a rule refuses it)."""
    c = RandomChooser(rng)
    for _ in range(tries):
        scenario = build(scenario_spec(c))
        if scenario is not None:
            return scenario
    raise RuntimeError(f"{tries} draws in a row were rejected: {dict(REJECTED)}")
