"""What one real TensorFlow run does, as plain data (no TensorFlow here).

A :class:`RunPlan` is the concrete, TensorFlow-level recipe for one
experiment: which ``tf.distribute`` strategy, how many worker processes and
devices, which MNIST model, how many steps. It is what a worker process reads,
so it round-trips through JSON. :func:`plan_from_scenario` derives it from a
:class:`distsim.scenario.Scenario`, the simulator's description of the same
experiment.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

from distsim.validation import (
    Boolean,
    InputError,
    Integer,
    Number,
    OneOf,
    Optional,
    StringMap,
    check_fields,
    check_keys,
    checked,
    default_of,
    read_json,
    write_json,
)
from distsim.numerics.models import MODELS, make_model
from distsim.scenario import PS_CLUSTERS, STRATEGIES, Cluster, Strategy, Training
from distsim.scenario.rules import check_replica_layout

#: Device kinds a plan may ask for. ``auto`` means GPU where there is one.
DEVICES: tuple[str, ...] = ("auto", "cpu", "gpu")

#: Cross-device ops for Mirrored; ``auto`` passes none, so TensorFlow picks its default
#: (CollectiveAllReduce: RING on CPUs and logical GPUs, NCCL on physical GPUs).
CROSS_DEVICE_OPS: tuple[str, ...] = ("auto", "reduction_to_one_device", "hierarchical_copy", "nccl")

#: Auto-shard policies the runner supports (FILE needs a dataset in files).
SHARD_POLICIES: tuple[str, ...] = ("DATA", "OFF")

#: Sizes of each model that a plan may set (the training scripts take ``hidden``, ``filters`` and ``l2``).
MODEL_SIZES: dict[str, tuple[str, ...]] = {"mlp": ("hidden", "l2"), "small_cnn": ("filters", "l2"),
                                           "softmax_regression": ("l2",)}

#: How ParameterServerStrategy is driven.
PS_LOOPS: tuple[str, ...] = ("fit", "custom")

PLAN_SCHEMA_VERSION = 1

_COUNT = Integer(1, 4_096)


@dataclass(frozen=True)
class RunPlan:
    """One real training run.

    Attributes:
        strategy: one of :data:`STRATEGIES`.
        num_workers: worker processes (MultiWorkerMirrored) or parameter-server
            workers; 1 for the single-process strategies.
        replicas_per_worker: devices (replicas) inside each worker: logical
            CPUs, or GPUs. Mirrored over 4 logical CPUs is ``num_workers=1,
            replicas_per_worker=4``.
        num_ps: parameter servers (ParameterServerStrategy only).
        per_replica_batch: examples per replica per step.
        steps_per_epoch: training steps (parameter-server: applied updates)
            per epoch.
        epochs: epochs.
        model: a :data:`distsim.numerics.models.MODELS` name.
        model_kwargs: its sizes, the arguments the training scripts take
            (:data:`MODEL_SIZES`: ``hidden`` for ``mlp``, ``filters`` for
            ``small_cnn``, ``l2`` for any); ``None``: ``{"hidden": 128}``
            for ``mlp``, the model's own defaults otherwise.
        learning_rate: plain SGD learning rate.
        seed: seeds the initial weights, TensorFlow and the shuffle.
        n_train: MNIST training examples used; ``None`` means one epoch's
            worth (``global_batch * steps_per_epoch``, at most 60,000).
        shuffle_buffer: ``shuffle(buffer)`` size, seeded and reshuffled
            every epoch; 0 = no shuffling (every epoch in the same order).
        prefetch: add ``prefetch(1)`` to the pipeline; ``None`` adds nothing
            (tf.distribute's distributed iterators prefetch by themselves).
        shard_policy: ``"DATA"`` or ``"OFF"`` (AutoShardPolicy).
        device: one of :data:`DEVICES`.
        cross_device_op: one of :data:`CROSS_DEVICE_OPS`.
        ps_loop: ``"fit"`` or ``"custom"`` (ClusterCoordinator loop).
        ps_cluster: one of :data:`PS_CLUSTERS`.
        steps_per_execution: steps per ``tf.function`` call (Keras
            ``steps_per_execution``).
        deterministic: enable TensorFlow's deterministic ops.
        warmup_steps: leading steps left out of the summary (tracing,
            first-touch allocation); they stay in ``step_times_s``. Fewer
            than the run's timed steps (parameter servers: ``warmup_steps x
            num_workers`` at most the updates less 2, which the interval
            between the first and last measured update needs).
    """

    strategy: str = checked(OneOf(STRATEGIES))
    num_workers: int = checked(_COUNT, default=default_of(Cluster, "num_workers"))
    replicas_per_worker: int = checked(_COUNT, default=default_of(Cluster, "devices_per_worker"))
    num_ps: int = checked(Integer(0, 4_096), default=0)
    per_replica_batch: int = checked(Integer(1, 60_000), default=64)
    steps_per_epoch: int = checked(Integer(1, 10_000_000), default=20)
    epochs: int = checked(Integer(1, 100_000), default=default_of(Training, "epochs"))
    model: str = checked(OneOf(tuple(sorted(MODELS))), default="mlp")
    model_kwargs: dict[str, Any] | None = checked(Optional(StringMap(), "the model's defaults (hidden=128 for mlp)"),
                                                  default=None)
    # At least 1e-12: TensorFlow trains in float32, where 1e-300 is 0 (no training, without a word).
    learning_rate: float = checked(Number(1e-12, 1e6), default=0.1)
    seed: int = checked(Integer(0, 2**31 - 1), default=default_of(Training, "seed"))
    n_train: int | None = checked(Optional(Integer(1, 60_000), "one epoch's worth"), default=None)
    shuffle_buffer: int = checked(Integer(0, 60_000), default=default_of(Training, "shuffle_buffer"))
    prefetch: bool | None = checked(Optional(Boolean(), "nothing added"), default=default_of(Training, "prefetch"))
    shard_policy: str = checked(OneOf(SHARD_POLICIES), default=default_of(Training, "shard_policy"))
    device: str = checked(OneOf(DEVICES), default="auto")
    cross_device_op: str = checked(OneOf(CROSS_DEVICE_OPS), default="auto")
    ps_loop: str = checked(OneOf(PS_LOOPS), default="fit")
    ps_cluster: str = checked(OneOf(PS_CLUSTERS), default=default_of(Strategy, "ps_cluster"))
    steps_per_execution: int = checked(Integer(1, 1_000_000), default=1)
    deterministic: bool = checked(Boolean(), default=False)
    warmup_steps: int = checked(Integer(0, 1_000_000), default=2)

    def __post_init__(self) -> None:
        check_fields(self, "RunPlan")
        if self.steps_per_epoch % self.steps_per_execution:
            raise InputError("RunPlan.steps_per_epoch", self.steps_per_epoch,
                             f"a multiple of steps_per_execution={self.steps_per_execution}")
        # TPUStrategy takes every core of the attached TPU: the plan names one replica.
        layout = "one_device" if self.strategy == "tpu" else self.strategy
        check_replica_layout(layout, self.num_workers, self.replicas_per_worker, workers_path="RunPlan.num_workers",
                             devices_path="RunPlan.replicas_per_worker", strategy_path="RunPlan.strategy")
        if self.strategy == "parameter_server":
            if self.num_ps < 1:
                raise InputError("RunPlan.num_ps", self.num_ps, ">= 1 with strategy 'parameter_server'")
            if self.replicas_per_worker != 1:
                raise InputError("RunPlan.replicas_per_worker", self.replicas_per_worker,
                                 "1 with strategy 'parameter_server' (one device per worker task)")
        elif self.num_ps:
            raise InputError("RunPlan.num_ps", self.num_ps, f"0 unless strategy is 'parameter_server' (got {self.strategy!r})")
        self._check_model_kwargs()
        self._check_warmup()
        if self.n_train is not None and self.n_train < self.global_batch:
            raise InputError("RunPlan.n_train", self.n_train,
                             f">= one global batch ({self.global_batch} examples), at most 60,000 (MNIST's training set)")

    def _check_model_kwargs(self) -> None:
        """Only sizes the training scripts pass on, each one the NumPy twin accepts."""
        if self.model_kwargs is None:
            object.__setattr__(self, "model_kwargs", {"hidden": 128} if self.model == "mlp" else {})
        allowed = MODEL_SIZES[self.model]
        for key, value in self.model_kwargs.items():
            if key not in allowed:
                raise InputError(f"RunPlan.model_kwargs.{key}", value,
                                 f"one of the sizes {allowed} for model {self.model!r} (what the training scripts take)")
        for key in ("hidden", "filters"):
            if key in self.model_kwargs:
                Integer(1, 65_536)(f"RunPlan.model_kwargs.{key}", self.model_kwargs[key])
        try:
            make_model(self.model, **self.model_kwargs)
        except InputError as exc:
            raise exc.at("RunPlan.model_kwargs") from None

    def _check_warmup(self) -> None:
        if self.strategy == "parameter_server":
            most = (self.total_steps - 2) // self.num_workers
            why = f"updates ({self.total_steps:,}) less 2, over {self.num_workers} workers"
        else:
            most = self.total_steps // self.steps_per_execution - 1
            why = f"timed calls ({self.total_steps // self.steps_per_execution:,}) less 1"
        if self.warmup_steps > most:
            raise InputError("RunPlan.warmup_steps", self.warmup_steps,
                             f"<= {max(most, 0):,}: the run's {why}, so that a measured step is left")

    # ---- derived sizes -------------------------------------------------------------
    @property
    def num_replicas(self) -> int:
        """Replicas in sync; for parameter-server training, the async workers."""
        return self.num_workers * self.replicas_per_worker

    @property
    def global_batch(self) -> int:
        """Examples per synchronous step over all replicas (async: per update x workers)."""
        return self.per_replica_batch * self.num_replicas

    @property
    def batch_per_call(self) -> int:
        """Examples one ``tf.data`` element holds: the global batch, except for
        parameter-server training, where each update uses one worker's batch."""
        return self.per_replica_batch if self.strategy == "parameter_server" else self.global_batch

    @property
    def total_steps(self) -> int:
        return self.steps_per_epoch * self.epochs

    @property
    def examples(self) -> int:
        """MNIST training examples the run draws from."""
        if self.n_train is not None:
            return self.n_train
        return min(60000, self.batch_per_call * self.steps_per_epoch)

    @property
    def multi_process(self) -> bool:
        """Whether the run needs one process per task (a TF_CONFIG cluster)."""
        return self.strategy == "multi_worker_mirrored" or (
            self.strategy == "parameter_server" and self.ps_cluster == "processes"
        )

    @property
    def label(self) -> str:
        """Short description, e.g. ``"mirrored x4"`` or ``"parameter_server 2w+1ps"``."""
        if self.strategy == "parameter_server":
            return f"parameter_server {self.num_workers}w+{self.num_ps}ps ({self.ps_loop})"
        if self.strategy == "multi_worker_mirrored":
            return f"multi_worker_mirrored {self.num_workers}x{self.replicas_per_worker}"
        if self.num_replicas > 1:
            return f"{self.strategy} x{self.num_replicas}"
        return self.strategy

    def with_(self, **changes) -> "RunPlan":
        """A copy with some fields changed (validated again)."""
        return replace(self, **changes)

    # ---- JSON ------------------------------------------------------------------------
    def to_dict(self) -> dict:
        return {"schema_version": PLAN_SCHEMA_VERSION, **asdict(self)}

    @classmethod
    def from_dict(cls, d: dict) -> "RunPlan":
        d = check_keys("run plan", d, {f.name for f in fields(cls)} | {"schema_version"},
                       required=("schema_version", "strategy"))
        if d.pop("schema_version") != PLAN_SCHEMA_VERSION:
            raise InputError("run plan.schema_version", d.get("schema_version"), f"{PLAN_SCHEMA_VERSION}")
        return cls(**d)

    def save(self, path: str | Path) -> Path:
        return write_json(path, self.to_dict())

    @classmethod
    def load(cls, path: str | Path) -> "RunPlan":
        return cls.from_dict(read_json(path, "run plan"))


# ---- from a Scenario ---------------------------------------------------------------------------
#: Scenario workload presets the real runs can train, and the model each is.
WORKLOAD_MODELS: dict[str, str] = {
    "mnist_softmax": "softmax_regression",
    "mnist_mlp": "mlp",
    "mnist_mlp_wide": "mlp",
    "mnist_small_cnn": "small_cnn",
}

#: Scenario ``strategy.algorithm`` -> RunPlan ``cross_device_op`` for Mirrored. "auto" is
#: TensorFlow's own choice, CollectiveAllReduce: a ring (NCCL on physical GPUs).
_MIRRORED_OPS: dict[str | None, str] = {
    None: "auto",
    "ring": "auto",
    "reduce_to_one": "reduction_to_one_device",
    "hierarchical": "hierarchical_copy",
}


def _model_kwargs(model: str, num_params: int) -> dict[str, Any]:
    """Recover the model's size from the workload's parameter count."""
    if model == "mlp":  # 784 h + h + 10 h + 10
        hidden, rest = divmod(num_params - 10, 795)
        if rest or hidden < 1:
            raise InputError("workload.num_params", num_params, "an MNIST MLP's count, 795 x hidden + 10")
        return {"hidden": hidden}
    if model == "small_cnn":  # 9 f + f + 7840 f + 10
        filters, rest = divmod(num_params - 10, 7850)
        if rest or filters < 1:
            raise InputError("workload.num_params", num_params, "the small CNN's count, 7850 x filters + 10")
        return {"filters": filters}
    return {}


def plan_from_scenario(scenario, **real_options: Any) -> RunPlan:
    """The real run of ``scenario`` (a :class:`distsim.scenario.Scenario`).

    The scenario fixes strategy, cluster shape (including the PS cluster's
    hosting, ``strategy.ps_cluster``), workload, batch, steps, epochs, seed
    and input pipeline; ``real_options`` sets the knobs only a real run has
    (``ps_loop``, ``steps_per_execution``, ``deterministic``,
    ``warmup_steps``, ``learning_rate``, ``n_train``) and may override any
    field.

    For ``parameter_server``, ``training.steps`` counts updates per worker
    (as in the simulator), so the run applies ``steps x num_workers`` updates
    per epoch, each on a ``global_batch / num_workers`` batch.

    Raises:
        InputError: something the real runs cannot do, naming the field:
            a non-MNIST workload, a global batch that does not split evenly,
            FILE sharding, backup workers, synchronous PS, or a collective
            TensorFlow has no implementation for.
    """
    c, w, s, t = scenario.cluster, scenario.workload, scenario.strategy, scenario.training
    base = w.name.partition("@")[0]  # "mnist_mlp@this_machine" is mnist_mlp, calibrated
    if base not in WORKLOAD_MODELS:
        raise InputError("workload.name", w.name, f"an MNIST workload for real runs: {sorted(WORKLOAD_MODELS)} "
                         "(optionally with an '@<machine>' suffix)")
    model = WORKLOAD_MODELS[base]
    if t.global_batch % c.num_replicas:
        raise InputError("training.global_batch", t.global_batch,
                         f"a multiple of {c.num_replicas} replicas for a real run (each replica gets the same batch)")
    if t.shard_policy not in SHARD_POLICIES:
        raise InputError("training.shard_policy", t.shard_policy, f"one of {SHARD_POLICIES} for real runs")
    if t.backup_workers:
        raise InputError("training.backup_workers", t.backup_workers, "0 for real runs (tf.distribute has no backup workers)")
    device = {"cpu": "cpu", "gpu": "gpu", "tpu": "auto"}[c.device.kind]
    options: dict[str, Any] = {}
    steps = t.steps
    if s.name == "parameter_server":
        if (s.mode or "async") != "async":
            raise InputError("strategy.mode", s.mode, "'async' or null (TF2's ParameterServerStrategy is asynchronous only)")
        if s.algorithm not in (None, "parameter_server"):
            raise InputError("strategy.algorithm", s.algorithm, "'parameter_server' or null with parameter_server")
        options["num_ps"] = s.num_ps
        options["ps_cluster"] = s.ps_cluster
        steps = t.steps * c.num_workers
    elif s.name == "mirrored":
        if s.algorithm not in _MIRRORED_OPS:
            raise InputError("strategy.algorithm", s.algorithm, f"one of {sorted(map(str, _MIRRORED_OPS))} with mirrored "
                             "(the cross-device ops TensorFlow has)")
        options["cross_device_op"] = _MIRRORED_OPS[s.algorithm]
    elif s.algorithm not in (None, "ring") and s.name == "multi_worker_mirrored":
        raise InputError("strategy.algorithm", s.algorithm, "'ring' or null with multi_worker_mirrored")
    fields_ = dict(
        strategy=s.name,
        num_workers=c.num_workers,
        replicas_per_worker=c.devices_per_worker,
        per_replica_batch=t.global_batch // c.num_replicas,
        steps_per_epoch=steps,
        epochs=t.epochs,
        model=model,
        model_kwargs=_model_kwargs(model, w.num_params),
        seed=t.seed,
        shuffle_buffer=t.shuffle_buffer,
        prefetch=t.prefetch,
        shard_policy=t.shard_policy,
        device=device,
        **options,
    )
    fields_.update(real_options)
    return RunPlan(**fields_)
