"""What limits a predicted step: its bottleneck and the share of the step it takes.

The bottleneck is the largest piece of the step's **critical path**, the
chain of costs that sets the step time in the deterministic steady-state
model (:mod:`distsim.engines.steady`, and for asynchronous parameter servers
the per-update costs of :func:`distsim.engines.costs.async_costs`).
Its **share** is that piece's seconds divided by the step those pieces add
up to (the closed-form step, not the simulated mean or median, which also
hold stragglers' noise and queueing). The kinds, :data:`KINDS`:

* ``compute``: the device's forward and backward passes and the host's
  per-step overhead and dispatch that start them;
* ``input``: the host's input pipeline (reading, preprocessing, the copy to
  the device);
* ``communication``: gradient (and metric) traffic that the backward pass
  does not hide; in asynchronous training a worker's own push and pull
  (latency, request handling, bytes over its link);
* ``ps_nic``: an asynchronous parameter server's network interface (both
  directions' bytes) or its per-message request handling, when every
  worker's transfers together keep it busier than a worker's own cycle;
* ``ps_apply``: an asynchronous parameter server applying the pushed
  gradients (:func:`distsim.engines.costs.ps_apply_s`);
* ``memory``: the synchronous optimizer update on the device, which is
  bound by memory bandwidth (``num_params x optimizer_bytes_per_param /
  memory_bandwidth_Bps``, :func:`distsim.engines.steady.update_s`).
  Memory *capacity* is not a bottleneck: a replica that does not fit is an
  error (:func:`distsim.engines.prediction.check_fits`).

Synchronous steps (the slowest worker, a full global batch):

* without prefetch input and device work alternate, the step is ``input +
  compute + communication + memory``, every piece is on the critical path and
  the shares add up to 1;
* with prefetch the step is ``max(input, device work)``. When input takes at
  least as long as the device work it is the bottleneck with share 1 (the
  pipeline is busy the whole step; the device waits for it); otherwise input
  is hidden and the largest of compute, communication and memory is named,
  its share taken of the device work (which is the step).

Asynchronous parameter servers (one cycle: one update from each of ``w``
workers). A worker's own cycle is its compute (with input, overlapped
under prefetch as above), its push and pull and the apply its push waits
for. The parameter server serves all ``w`` workers: per cycle its NIC is busy
``w`` times a transfer's bytes each way (twice that for a half-duplex
link or an in-process cluster, whose one process serves pushes and pulls in
turn) and its host ``w`` times two requests and an apply. The cycle is the
larger of a worker's own cycle and the busiest PS station; when the PS is
the larger, the named piece is its busiest part (``ps_nic`` or ``ps_apply``)
with its seconds per cycle as the share, otherwise the largest piece of
the worker's cycle. An in-process cluster on shared CPU cores serves the
workers' compute and input in turn with the transfers too
(:func:`distsim.engines.costs.async_costs`), so they join its one station.
"""

from __future__ import annotations

from dataclasses import dataclass

from distsim.engines import steady
from distsim.mechanics.stepcosts import StepCosts
from distsim.mechanics.strategies import StrategyPlan
from distsim.scenario import Scenario

#: The bottleneck kinds (see the module docstring).
KINDS: tuple[str, ...] = ("compute", "input", "communication", "ps_nic", "ps_apply", "memory")


@dataclass(frozen=True)
class Bottleneck:
    """The named bottleneck of one prediction.

    Attributes:
        kind: one of :data:`KINDS`.
        share: the kind's seconds over the critical path's, in [0, 1].
        path_s: every piece on the critical path, seconds per step (async:
            per cycle of one update from each worker).
        step_s: the closed-form step (or cycle) those pieces make, seconds.
        warning: which scenario field to change when input dominates because
            of DATA sharding or a single input thread; ``""`` otherwise.
    """

    kind: str
    share: float
    path_s: dict
    step_s: float
    warning: str = ""

    @property
    def meta(self) -> dict[str, str]:
        """The ``Result.meta`` entries this adds (the warning, if any)."""
        return {"warning": self.warning} if self.warning else {}


def _named(path_s: dict, step_s: float, warning: str = "") -> Bottleneck:
    kind = max(path_s, key=path_s.get)  # ties go to the first of the path's order
    return Bottleneck(kind, min(path_s[kind] / step_s, 1.0), path_s, step_s, warning)


def of_sync(scenario: Scenario, plan_: StrategyPlan, parts: steady.StepParts) -> Bottleneck:
    """The bottleneck of a synchronous scenario from the pieces of its slowest
    worker's full step (:attr:`steady.ModelOutput.parts`)."""
    device = {
        "compute": float(parts.overhead_s + parts.dispatch_s + parts.forward_s + parts.backward_s),
        "communication": float(parts.exposed_comm_s + parts.metric_comm_s),
        "memory": float(parts.update_s),
    }
    input_ = float(parts.input_s)
    device_s = sum(device.values())
    if not plan_.prefetch:
        path = {**device, "input": input_}
        neck = _named(path, device_s + input_)
    elif input_ >= device_s:
        neck = _named({"input": input_}, input_)
    else:
        neck = _named(device, device_s)
    return _warned(neck, scenario, sync=True)


def of_async(scenario: Scenario, plan_: StrategyPlan, p: StepCosts, costs) -> Bottleneck:
    """The bottleneck of an asynchronous PS scenario from its
    :class:`~distsim.engines.costs.AsyncCosts` ``costs`` (``p``: its
    :class:`~distsim.mechanics.stepcosts.StepCosts`). Workers are the typical (not straggler) worker."""
    parts = steady.step_parts(p, p.global_batch, plan_)
    device = float(parts.overhead_s + parts.dispatch_s + parts.forward_s + parts.backward_s)
    worker = float(costs.compute_s)  # device work with the worker's input, overlapped under prefetch
    if plan_.prefetch:
        own = {"input": worker} if worker > device else {"compute": device}
    else:
        own = {"compute": device, "input": worker - device}
    apply = float(costs.ps_apply_s)
    own |= {"communication": 2 * float(costs.pull_s), "ps_apply": apply}  # a pull is one transfer's own time
    w = scenario.num_replicas
    service, request = float(costs.ps_service_s), float(costs.ps_request_s)
    if costs.duplex:
        stations = [{"ps_nic": w * (service - request)}, {"ps_nic": w * 2 * request, "ps_apply": w * apply}]
    elif bool(costs.compute_at_ps):  # the one server serves the workers' own time too: it is all the step
        mine = {k: w * v for k, v in own.items() if k in ("compute", "input")}
        stations = [mine | {"ps_nic": w * 2 * service, "ps_apply": w * apply}]
    else:
        stations = [{"ps_nic": w * 2 * service, "ps_apply": w * apply}]
    busiest = max(stations, key=lambda s: sum(s.values()))
    ps_s, own_s = sum(busiest.values()), sum(own.values())
    neck = _named(busiest, ps_s) if ps_s > own_s else _named(own, own_s)
    return _warned(neck, scenario, sync=False)


def _warned(neck: Bottleneck, scenario: Scenario, sync: bool) -> Bottleneck:
    """``neck`` with a warning naming the fields to change when input dominates because every
    worker reads the whole global batch (DATA sharding, synchronous only: asynchronous workers
    read their own batches) or the input map runs on one thread."""
    if neck.kind != "input":
        return neck
    t, workers = scenario.training, scenario.cluster.num_workers
    advice = []
    if sync and t.shard_policy == "DATA" and workers > 1:
        advice.append(f"under training.shard_policy='DATA' each of the {workers:,} workers reads the whole global "
                      f"batch of {t.global_batch:,} examples: store the data in files and set "
                      f"training.shard_policy='FILE' with training.num_files >= {workers:,} (TensorFlow's default "
                      "AUTO policy shards by file only with at least as many files as workers)")
    if t.input_threads == 1:
        advice.append("the input map runs on one thread: raise training.input_threads (tf.data.AUTOTUNE "
                      "parallelises it over the host's cores)")
    if not advice:
        return neck
    warning = f"input takes {neck.share:.0%} of the step; " + "; ".join(advice)
    return Bottleneck(neck.kind, neck.share, neck.path_s, neck.step_s, warning)
