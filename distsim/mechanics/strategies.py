"""What each ``tf.distribute`` strategy means for the timing engine.

=====================  =================  ==============================================  =====  ========
strategy               variables on       gradient summation (default)                    mode   prefetch
=====================  =================  ==============================================  =====  ========
default (no strategy)  the one device     none                                            sync   yes
one_device             the one device     none                                            sync   yes
mirrored               every replica      ``ring``: TF's CollectiveAllReduce (NCCL on     sync   yes
                                          physical GPUs, RING on CPUs and on logical
                                          GPUs), priced over the intra-worker link
multi_worker_mirrored  every replica      ``ring`` over all replicas: TF's RING           sync   yes
                                          collective on GPUs too (AUTO in eager mode)
central_storage        host CPU           ``reduce_to_one`` onto the host, then           sync   yes
                                          broadcast of the variables
parameter_server       ``num_ps`` shards  ``parameter_server`` push/pull                  async  yes
tpu                    every core         ``torus2d`` all-reduce over ICI                 sync   yes
=====================  =================  ==============================================  =====  ========

**Mirrored's default, from TensorFlow's source.** A ``MirroredStrategy()``
built without ``cross_device_ops`` uses ``CollectiveAllReduce``:
``MirroredExtended._make_collective_ops_with_fallbacks`` in
``tensorflow/python/distribute/mirrored_strategy.py`` (TensorFlow 2.21) picks
the RING implementation when every device is a CPU or when there are more
logical than physical GPUs, NCCL when every device is a physical GPU, and
``ReductionToOneDevice`` only for a mix of CPUs and GPUs (or in TF1 graph
mode). A run confirms it: ``MirroredStrategy()`` over 4 logical CPUs has
``extended._cross_device_ops`` = ``CollectiveAllReduce`` with
``CommunicationImplementation.RING``. Older releases (and several tutorials)
say "NCCL by default" or "ReductionToOneDevice on CPU"; neither holds for a
plain ``MirroredStrategy()`` in TensorFlow 2.21.

**The implementation behind ``ring`` (``Strategy.protocol=None``).**
:func:`default_protocol` follows TensorFlow 2.21. ``MirroredStrategy`` sets
``CommunicationImplementation.NCCL`` (``mirrored_strategy.py:339-340``) and
keeps it when every device is a physical GPU (lines 388-402): ``nccl`` on GPU
devices. ``MultiWorkerMirroredStrategy`` leaves ``AUTO``
(``communication_options=None`` becomes ``collective_util.Options()``,
implementation ``AUTO``: ``collective_all_reduce_strategy.py:184-185``,
``collective_util.py:123``). Its session config switches the runtime to
NCCL (``collective_nccl = True``, lines 880-884) only outside eager mode and
only for ``implementation=NCCL``; in eager mode ``configure_collective_ops`` is
called without ``use_nccl_communication`` (lines 435-438 and 540-549;
``context.py:1048``: default False). So in TF2's eager ``fit`` the AUTO
collective is TF's own RING on GPUs too (``alpha_beta``); NCCL runs only when
asked for by name. Pass
``protocol="nccl"`` for ``CommunicationOptions(implementation=NCCL)``. A
chosen ``Strategy.algorithm`` is another cross-device op (ReductionToOneDevice,
HierarchicalCopy...), never NCCL's tuning: ``alpha_beta``.

**The model of a ring inside one process (stated, not fitted).** The
collective ring between the logical devices of one process runs the
``ring`` schedule (2(p-1) steps, each moving n/p bytes per device) and each
step is priced at the intra-worker link's ``latency_s + bytes /
bandwidth_Bps``, the same alpha-beta model as between GPUs. For logical CPUs
the link is ``shared_memory`` (an assumption) or ``this_machine_memory``, which
:func:`distsim.real.calibrate` fits on ``ReductionToOneDevice`` all-reduces;
using that fit for the ring assumes one copy-and-add costs the same in both,
which notebook 03 checks against a measured ring. Set
``Strategy.algorithm="reduce_to_one"`` to predict a run that passes
``cross_device_ops=tf.distribute.ReductionToOneDevice()``.

``prefetch``: every strategy's default prefetches, plain Keras included.
tf.distribute's distributed iterators prefetch each replica's next batch
(to the device) while it computes. Without a strategy, TensorFlow 2.21 also
overlaps input with compute: ``tf_keras`` ``fit`` on arrays ends its pipeline
with ``dataset.prefetch(tf.data.AUTOTUNE)``
(``tf_keras/src/engine/data_adapter.py:366``, ``TensorLikeDataAdapter``), and
tf.data appends a prefetch to any pipeline that ends in a synchronous
transformation such as ``batch`` (``inject_prefetch``, "If None, defaults to
True": ``tensorflow/python/data/ops/options.py:369-375``). Set
``Training.prefetch=False`` for a pipeline without it (``inject_prefetch``
off, or TensorFlow releases before 2022, which lacked the rewrite).

Collectives across workers use the inter-worker link and share each host's
NIC (``ranks_per_node`` = devices per worker); within a worker they use the
intra-worker link. ``Strategy.algorithm`` overrides the default.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from distsim.scenario import Scenario, Strategy
from distsim.validation import default_of

#: Where each strategy keeps the variables (for display).
PLACEMENT: dict[str, str] = {
    "default": "device",
    "one_device": "device",
    "mirrored": "mirrored",
    "multi_worker_mirrored": "mirrored",
    "central_storage": "host_cpu",
    "parameter_server": "ps_shards",
    "tpu": "mirrored",
}

#: The TensorFlow class behind each name.
TF_CLASS: dict[str, str] = {
    "default": "tf.distribute.get_strategy() (no strategy)",
    "one_device": "tf.distribute.OneDeviceStrategy",
    "mirrored": "tf.distribute.MirroredStrategy",
    "multi_worker_mirrored": "tf.distribute.MultiWorkerMirroredStrategy",
    "central_storage": "tf.distribute.experimental.CentralStorageStrategy",
    "parameter_server": "tf.distribute.ParameterServerStrategy",
    "tpu": "tf.distribute.TPUStrategy",
}


@dataclass(frozen=True)
class StrategyPlan:
    """A strategy resolved for one scenario.

    Attributes:
        strategy: strategy name.
        placement: where the variables live.
        algorithm: gradient summation algorithm, ``None`` when there is no
            communication (one replica).
        options: options for :func:`distsim.mechanics.collectives.build_schedule`.
        mode: ``sync`` or ``async``.
        prefetch: whether input overlaps with compute.
        tf_class: the TensorFlow class.
        ps_cluster: how a parameter-server cluster is hosted
            (:attr:`distsim.scenario.Strategy.ps_cluster`).
        protocol: how collectives are priced (``alpha_beta`` or ``nccl``),
            :attr:`distsim.scenario.Strategy.protocol` or TensorFlow's default.
    """

    strategy: str
    placement: str
    algorithm: str | None
    options: dict = field(default_factory=dict)
    mode: str = "sync"
    prefetch: bool = True
    tf_class: str = ""
    ps_cluster: str = default_of(Strategy, "ps_cluster")
    protocol: str = "alpha_beta"


def default_protocol(scenario: Scenario) -> str:
    """TensorFlow's collective implementation for the scenario (see the module
    docstring): ``nccl`` for MirroredStrategy's default all-reduce over
    several GPUs, ``alpha_beta`` (TF's RING, or another op) otherwise."""
    s = scenario.strategy
    gpus = scenario.cluster.device.kind == "gpu" and scenario.num_replicas > 1
    return "nccl" if s.name == "mirrored" and s.algorithm is None and gpus else "alpha_beta"


def default_algorithm(scenario: Scenario) -> str | None:
    """TensorFlow's default gradient summation for the scenario's strategy."""
    name = scenario.strategy.name
    if name == "parameter_server":
        return "parameter_server"
    if scenario.num_replicas == 1:
        return None
    if name == "central_storage":
        return "reduce_to_one"
    if name == "tpu":
        return "torus2d"
    return "ring"


def plan(scenario: Scenario) -> StrategyPlan:
    """Resolve the scenario's strategy: algorithm, its options, mode, prefetch."""
    s, c = scenario.strategy, scenario.cluster
    algorithm = s.algorithm or default_algorithm(scenario)
    if scenario.num_replicas == 1 and s.name != "parameter_server":
        algorithm = None
    options: dict = {}
    if algorithm == "parameter_server":
        options = {"num_shards": s.num_ps, "ps_on_worker_nodes": s.ps_placement == "worker_hosts"}
    elif algorithm == "torus2d":
        options = {}
    elif algorithm is not None:
        options = {"ranks_per_node": c.devices_per_worker}
        if algorithm == "reduce_to_one" and s.name == "central_storage":
            options["extra_root"] = True
    mode = s.mode or ("async" if s.name == "parameter_server" else "sync")
    prefetch = scenario.training.prefetch
    if prefetch is None:
        prefetch = True  # every strategy, plain Keras included (see the module docstring)
    return StrategyPlan(
        strategy=s.name,
        placement=PLACEMENT[s.name],
        algorithm=algorithm,
        options=options,
        mode=mode,
        prefetch=bool(prefetch),
        tf_class=TF_CLASS[s.name],
        ps_cluster=s.ps_cluster,
        protocol=s.protocol or default_protocol(scenario),
    )
