"""What one real TensorFlow run does, as plain data (no TensorFlow here).

A :class:`RunPlan` is the concrete, TensorFlow-level recipe for one
experiment: which ``tf.distribute`` strategy, how many worker processes and
devices, which MNIST model, how many steps. It is what a worker process reads,
so it round-trips through JSON. :func:`plan_from_scenario` derives it from a
:class:`distsim.scenario.Scenario`, the simulator's description of the same
experiment.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from distsim.validation.jsonfile import read_json, write_json
from distsim.numerics.models import MODELS
from distsim.scenario import PS_CLUSTERS  # servers in the coordinator's process, or one process per task

#: Strategies distsim.real can run, by short name.
STRATEGIES: tuple[str, ...] = (
    "default",
    "one_device",
    "mirrored",
    "multi_worker_mirrored",
    "parameter_server",
    "central_storage",
    "tpu",
)

#: Device kinds a plan may ask for. ``auto`` means GPU where there is one.
DEVICES: tuple[str, ...] = ("auto", "cpu", "gpu")

#: Cross-device ops for Mirrored/CentralStorage; ``auto`` picks by device kind.
CROSS_DEVICE_OPS: tuple[str, ...] = ("auto", "reduction_to_one_device", "hierarchical_copy", "nccl")

#: Auto-shard policies the runner supports (FILE needs a dataset in files).
SHARD_POLICIES: tuple[str, ...] = ("DATA", "OFF")

#: How ParameterServerStrategy is driven.
PS_LOOPS: tuple[str, ...] = ("fit", "custom")

PLAN_SCHEMA_VERSION = 1


def _positive(name: str, value: Any, low: int = 1) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"RunPlan.{name}={value!r}; allowed: an integer >= {low}")


def _choice(name: str, value: Any, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"RunPlan.{name}={value!r}; allowed: {allowed}")


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
        model_kwargs: its constructor arguments (e.g. ``{"hidden": 128}``).
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
            first-touch allocation); they stay in ``step_times_s``.
    """

    strategy: str
    num_workers: int = 1
    replicas_per_worker: int = 1
    num_ps: int = 0
    per_replica_batch: int = 64
    steps_per_epoch: int = 20
    epochs: int = 1
    model: str = "mlp"
    model_kwargs: dict[str, Any] = field(default_factory=lambda: {"hidden": 128})
    learning_rate: float = 0.1
    seed: int = 0
    n_train: int | None = None
    shuffle_buffer: int = 0
    prefetch: bool | None = None
    shard_policy: str = "DATA"
    device: str = "auto"
    cross_device_op: str = "auto"
    ps_loop: str = "fit"
    ps_cluster: str = "in_process"
    steps_per_execution: int = 1
    deterministic: bool = False
    warmup_steps: int = 2

    def __post_init__(self) -> None:
        _choice("strategy", self.strategy, STRATEGIES)
        _choice("device", self.device, DEVICES)
        _choice("cross_device_op", self.cross_device_op, CROSS_DEVICE_OPS)
        _choice("ps_loop", self.ps_loop, PS_LOOPS)
        _choice("ps_cluster", self.ps_cluster, PS_CLUSTERS)
        _choice("model", self.model, tuple(sorted(MODELS)))
        for name in ("num_workers", "replicas_per_worker", "per_replica_batch", "steps_per_epoch", "epochs",
                     "steps_per_execution"):
            _positive(name, getattr(self, name))
        _positive("num_ps", self.num_ps, 0)
        _positive("shuffle_buffer", self.shuffle_buffer, 0)
        _choice("shard_policy", self.shard_policy, SHARD_POLICIES)
        if self.prefetch not in (None, True, False):
            raise ValueError(f"RunPlan.prefetch={self.prefetch!r}; allowed: true, false or null")
        if self.steps_per_epoch % self.steps_per_execution:
            raise ValueError(
                f"RunPlan.steps_per_epoch={self.steps_per_epoch} is not a multiple of "
                f"steps_per_execution={self.steps_per_execution}; allowed: a multiple"
            )
        _positive("warmup_steps", self.warmup_steps, 0)
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"RunPlan.seed={self.seed!r}; allowed: an integer >= 0")
        if not (isinstance(self.learning_rate, (int, float)) and math.isfinite(self.learning_rate)
                and self.learning_rate > 0):
            raise ValueError(f"RunPlan.learning_rate={self.learning_rate!r}; allowed: a finite number > 0")
        single = ("default", "one_device", "tpu")
        if self.strategy in single and (self.num_workers, self.replicas_per_worker) != (1, 1):
            raise ValueError(
                f"RunPlan.strategy={self.strategy!r} runs one replica; got num_workers={self.num_workers}, "
                f"replicas_per_worker={self.replicas_per_worker}; allowed: 1 and 1"
            )
        if self.strategy in ("mirrored", "central_storage") and self.num_workers != 1:
            raise ValueError(
                f"RunPlan.strategy={self.strategy!r} is one process; num_workers={self.num_workers}; allowed: 1 "
                "(use replicas_per_worker for the device count, or multi_worker_mirrored for processes)"
            )
        if self.strategy == "parameter_server":
            if self.num_ps < 1:
                raise ValueError(f"RunPlan.num_ps={self.num_ps} with parameter_server; allowed: >= 1")
            if self.replicas_per_worker != 1:
                raise ValueError(
                    f"RunPlan.replicas_per_worker={self.replicas_per_worker} with parameter_server; allowed: 1"
                )
        elif self.num_ps:
            raise ValueError(f"RunPlan.num_ps={self.num_ps} needs strategy='parameter_server'; got {self.strategy!r}")
        if self.n_train is not None:
            _positive("n_train", self.n_train)
            if self.n_train > 60000:
                raise ValueError(f"RunPlan.n_train={self.n_train}; allowed: 1..60000 (MNIST's training set)")
            if self.n_train < self.global_batch:
                raise ValueError(
                    f"RunPlan.n_train={self.n_train} is smaller than one global batch ({self.global_batch}); "
                    f"allowed: >= {self.global_batch}"
                )

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
        if not isinstance(d, dict):
            raise ValueError(f"a run plan must be a JSON object; got {type(d).__name__}")
        d = dict(d)
        version = d.pop("schema_version", None)
        if version != PLAN_SCHEMA_VERSION:
            raise ValueError(f"run plan schema_version={version!r}; this distsim reads {PLAN_SCHEMA_VERSION}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"run plan has unknown fields {unknown}; allowed: {sorted(known)}")
        if "strategy" not in d:
            raise ValueError("run plan has no 'strategy'; allowed: one of " + str(STRATEGIES))
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

#: Scenario ``strategy.algorithm`` -> RunPlan ``cross_device_op`` for Mirrored.
_MIRRORED_OPS: dict[str | None, str] = {
    None: "auto",
    "reduce_to_one": "reduction_to_one_device",
    "hierarchical": "hierarchical_copy",
    "ring": "nccl",
}


def _model_kwargs(model: str, num_params: int) -> dict[str, Any]:
    """Recover the model's size from the workload's parameter count."""
    if model == "mlp":  # 784 h + h + 10 h + 10
        hidden, rest = divmod(num_params - 10, 795)
        if rest or hidden < 1:
            raise ValueError(f"workload.num_params={num_params} is not an MNIST MLP's (795 h + 10)")
        return {"hidden": hidden}
    if model == "small_cnn":  # 9 f + f + 7840 f + 10
        filters, rest = divmod(num_params - 10, 7850)
        if rest or filters < 1:
            raise ValueError(f"workload.num_params={num_params} is not the small CNN's (7850 f + 10)")
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
        ValueError: something the real runs cannot do, naming the field:
            a non-MNIST workload, a global batch that does not split evenly,
            FILE sharding, backup workers, synchronous PS, or a collective
            TensorFlow has no implementation for.
    """
    c, w, s, t = scenario.cluster, scenario.workload, scenario.strategy, scenario.training
    base = w.name.partition("@")[0]  # "mnist_mlp@this_machine" is mnist_mlp, calibrated
    if base not in WORKLOAD_MODELS:
        raise ValueError(
            f"workload.name={w.name!r}; distsim.real trains MNIST only, allowed: {sorted(WORKLOAD_MODELS)} "
            "(optionally with an '@<machine>' suffix)"
        )
    model = WORKLOAD_MODELS[base]
    if t.global_batch % c.num_replicas:
        raise ValueError(
            f"training.global_batch={t.global_batch} does not split evenly over {c.num_replicas} replicas; "
            f"allowed: a multiple of {c.num_replicas}"
        )
    if t.shard_policy not in SHARD_POLICIES:
        raise ValueError(f"training.shard_policy={t.shard_policy!r}; allowed for real runs: {SHARD_POLICIES}")
    if t.backup_workers:
        raise ValueError(
            f"training.backup_workers={t.backup_workers}; allowed: 0 (tf.distribute has no backup workers)"
        )
    device = {"cpu": "cpu", "gpu": "gpu", "tpu": "auto"}[c.device.kind]
    options: dict[str, Any] = {}
    steps = t.steps
    if s.name == "parameter_server":
        if (s.mode or "async") != "async":
            raise ValueError(f"strategy.mode={s.mode!r}; allowed for real parameter-server runs: 'async'")
        if s.algorithm not in (None, "parameter_server"):
            raise ValueError(f"strategy.algorithm={s.algorithm!r}; allowed with parameter_server: 'parameter_server'")
        options["num_ps"] = s.num_ps
        options["ps_cluster"] = s.ps_cluster
        steps = t.steps * c.num_workers
    elif s.name == "mirrored":
        if s.algorithm not in _MIRRORED_OPS:
            raise ValueError(f"strategy.algorithm={s.algorithm!r}; allowed with mirrored: {sorted(map(str, _MIRRORED_OPS))}")
        options["cross_device_op"] = _MIRRORED_OPS[s.algorithm]
    elif s.algorithm not in (None, "ring") and s.name == "multi_worker_mirrored":
        raise ValueError(f"strategy.algorithm={s.algorithm!r}; allowed with multi_worker_mirrored: 'ring' or null")
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
