"""What validation costs: distsim's own rules against pydantic v2 and msgspec.

Measures, for the scenario schema (six parts, 45 fields with bounds):

* the import time of the validating code (a fresh interpreter, median of runs);
* the time to validate one scenario from its JSON dict;
* the message each gives for the same bad value.

distsim's rules need nothing beyond the standard library. pydantic and msgspec
are measured only when importable (they are not project dependencies; install
them in a scratch venv to compare: ``pip install pydantic msgspec``).

    .venv/bin/python benchmarks/bench_validation.py [--runs 15]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import textwrap
import timeit

PYDANTIC = textwrap.dedent(
    """
    from typing import Literal, Optional
    from pydantic import BaseModel, ConfigDict, Field

    class Part(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    class Device(Part):
        name: str = Field(max_length=200)
        kind: Literal["cpu", "gpu", "tpu"]
        peak_flops: float = Field(gt=0, allow_inf_nan=False)
        efficiency: float = Field(gt=0, le=1, allow_inf_nan=False)
        memory_bandwidth_Bps: float = Field(gt=0, allow_inf_nan=False)
        memory_bytes: float = Field(gt=0, allow_inf_nan=False)
        step_overhead_s: float = Field(ge=0, allow_inf_nan=False)
        replica_dispatch_s: float = Field(0.0, ge=0, allow_inf_nan=False)
        replica_variable_s: float = Field(0.0, ge=0, allow_inf_nan=False)
        sources: dict = {}

    class Link(Part):
        name: str = Field(max_length=200)
        bandwidth_Bps: float = Field(gt=0, allow_inf_nan=False)
        latency_s: float = Field(ge=0, allow_inf_nan=False)
        request_s: float = Field(0.0, ge=0, allow_inf_nan=False)
        sources: dict = {}

    class Cluster(Part):
        device: Device
        intra_link: Link
        inter_link: Link
        num_workers: int = Field(1, ge=1, le=100_000)
        devices_per_worker: int = Field(1, ge=1, le=1024)
        physical_cores: Optional[float] = Field(None, gt=0, allow_inf_nan=False)
        host_input_speed: float = Field(1.0, gt=0, allow_inf_nan=False)

    class Workload(Part):
        name: str = Field(max_length=200)
        num_params: int = Field(ge=1, le=10**13)
        flops_per_sample: float = Field(gt=0, allow_inf_nan=False)
        num_examples: int = Field(ge=1, le=10**12)
        bytes_per_param: int = Field(4, ge=1, le=16)
        compute_s_per_sample: Optional[float] = Field(None, gt=0, allow_inf_nan=False)
        input_s_per_sample: float = Field(0.0, ge=0, allow_inf_nan=False)
        input_bytes_per_sample: int = Field(0, ge=0, le=10**12)
        activation_bytes_per_sample: float = Field(0.0, ge=0, allow_inf_nan=False)
        num_gradient_tensors: int = Field(1, ge=1, le=100_000)
        sources: dict = {}

    class Strategy(Part):
        name: Literal["default", "one_device", "mirrored", "multi_worker_mirrored", "central_storage",
                      "parameter_server", "tpu"] = "mirrored"
        algorithm: Optional[Literal["ring", "tree", "halving_doubling", "hierarchical", "reduce_to_one",
                                    "parameter_server", "torus2d"]] = None
        mode: Optional[Literal["sync", "async"]] = None
        num_ps: int = Field(1, ge=1, le=10_000)
        ps_cluster: Literal["processes", "in_process"] = "processes"

    class Training(Part):
        global_batch: int = Field(64, ge=1, le=10**12)
        drop_remainder: bool = False
        steps: int = Field(20, ge=1, le=10_000)
        epochs: int = Field(1, ge=1, le=1_000_000)
        prefetch: Optional[bool] = None
        shuffle_buffer: int = Field(0, ge=0, le=10**12)
        input_threads: int = Field(1, ge=1, le=4096)
        num_buckets: int = Field(1, ge=1, le=100_000)
        compute_distribution: Literal["deterministic", "exponential", "lognormal"] = "deterministic"
        compute_sigma: float = Field(0.1, ge=0, le=10, allow_inf_nan=False)
        backup_workers: int = Field(0, ge=0, le=512)
        shard_policy: Literal["DATA", "FILE", "OFF"] = "DATA"
        num_files: Optional[int] = Field(None, ge=1, le=10**12)
        optimizer_bytes_per_param: int = Field(12, ge=0, le=1000)
        metric_values: int = Field(4, ge=0, le=10_000)
        seed: int = Field(0, ge=0, le=2**63 - 1)

    class Scenario(Part):
        schema_version: Literal[1]
        name: str = ""
        notes: str = ""
        cluster: Cluster
        workload: Workload
        strategy: Strategy = Strategy()
        training: Training = Training()

    def validate(d):
        return Scenario.model_validate(d)
    """
)

MSGSPEC = textwrap.dedent(
    """
    from typing import Annotated, Literal, Optional, Union
    import msgspec
    from msgspec import Meta, Struct

    Pos = Annotated[float, Meta(gt=0)]
    NonNeg = Annotated[float, Meta(ge=0)]

    class Device(Struct, forbid_unknown_fields=True, frozen=True):
        name: Annotated[str, Meta(max_length=200)]
        kind: Literal["cpu", "gpu", "tpu"]
        peak_flops: Pos
        efficiency: Annotated[float, Meta(gt=0, le=1)]
        memory_bandwidth_Bps: Pos
        memory_bytes: Pos
        step_overhead_s: NonNeg
        replica_dispatch_s: NonNeg = 0.0
        replica_variable_s: NonNeg = 0.0
        sources: dict = {}

    class Link(Struct, forbid_unknown_fields=True, frozen=True):
        name: Annotated[str, Meta(max_length=200)]
        bandwidth_Bps: Pos
        latency_s: NonNeg
        request_s: NonNeg = 0.0
        sources: dict = {}

    class Cluster(Struct, forbid_unknown_fields=True, frozen=True):
        device: Device
        intra_link: Link
        inter_link: Link
        num_workers: Annotated[int, Meta(ge=1, le=100_000)] = 1
        devices_per_worker: Annotated[int, Meta(ge=1, le=1024)] = 1
        physical_cores: Optional[Pos] = None
        host_input_speed: Pos = 1.0

    class Workload(Struct, forbid_unknown_fields=True, frozen=True):
        name: Annotated[str, Meta(max_length=200)]
        num_params: Annotated[int, Meta(ge=1, le=10**13)]
        flops_per_sample: Pos
        num_examples: Annotated[int, Meta(ge=1, le=10**12)]
        bytes_per_param: Annotated[int, Meta(ge=1, le=16)] = 4
        compute_s_per_sample: Optional[Pos] = None
        input_s_per_sample: NonNeg = 0.0
        input_bytes_per_sample: Annotated[int, Meta(ge=0, le=10**12)] = 0
        activation_bytes_per_sample: NonNeg = 0.0
        num_gradient_tensors: Annotated[int, Meta(ge=1, le=100_000)] = 1
        sources: dict = {}

    class Strategy(Struct, forbid_unknown_fields=True, frozen=True):
        name: Literal["default", "one_device", "mirrored", "multi_worker_mirrored", "central_storage",
                      "parameter_server", "tpu"] = "mirrored"
        algorithm: Optional[Literal["ring", "tree", "halving_doubling", "hierarchical", "reduce_to_one",
                                    "parameter_server", "torus2d"]] = None
        mode: Optional[Literal["sync", "async"]] = None
        num_ps: Annotated[int, Meta(ge=1, le=10_000)] = 1
        ps_cluster: Literal["processes", "in_process"] = "processes"

    class Training(Struct, forbid_unknown_fields=True, frozen=True):
        global_batch: Annotated[int, Meta(ge=1, le=10**12)] = 64
        drop_remainder: bool = False
        steps: Annotated[int, Meta(ge=1, le=10_000)] = 20
        epochs: Annotated[int, Meta(ge=1, le=1_000_000)] = 1
        prefetch: Optional[bool] = None
        shuffle_buffer: Annotated[int, Meta(ge=0, le=10**12)] = 0
        input_threads: Annotated[int, Meta(ge=1, le=4096)] = 1
        num_buckets: Annotated[int, Meta(ge=1, le=100_000)] = 1
        compute_distribution: Literal["deterministic", "exponential", "lognormal"] = "deterministic"
        compute_sigma: Annotated[float, Meta(ge=0, le=10)] = 0.1
        backup_workers: Annotated[int, Meta(ge=0, le=512)] = 0
        shard_policy: Literal["DATA", "FILE", "OFF"] = "DATA"
        num_files: Optional[Annotated[int, Meta(ge=1, le=10**12)]] = None
        optimizer_bytes_per_param: Annotated[int, Meta(ge=0, le=1000)] = 12
        metric_values: Annotated[int, Meta(ge=0, le=10_000)] = 4
        seed: Annotated[int, Meta(ge=0, le=2**63 - 1)] = 0

    class Scenario(Struct, forbid_unknown_fields=True, frozen=True):
        schema_version: Literal[1]
        cluster: Cluster
        workload: Workload
        name: str = ""
        notes: str = ""
        strategy: Strategy = Strategy()
        training: Training = Training()

    def validate(d):
        return msgspec.convert(d, Scenario, strict=True)
    """
)

DISTSIM = textwrap.dedent(
    """
    from distsim.scenario import Scenario

    def validate(d):
        return Scenario.from_dict(d)
    """
)


def import_time_ms(code: str, runs: int) -> float:
    """Median wall time of a fresh interpreter running ``code``, less an empty one's."""
    def once(src: str) -> float:
        out = subprocess.run([sys.executable, "-c", f"import time; t = time.perf_counter()\n{src}\n"
                              "print(time.perf_counter() - t)"], capture_output=True, text=True, check=True)
        return float(out.stdout.strip().splitlines()[-1]) * 1e3
    return statistics.median(once(code) for _ in range(runs))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help="fresh interpreters per import timing")
    args = parser.parse_args()

    from distsim import make_scenario

    scenario = make_scenario("v100", "resnet50_224", "multi_worker_mirrored", 4, 8, global_batch=1024)
    good = scenario.to_dict()
    bad = scenario.to_dict()
    bad["training"]["global_batch"] = 0
    print(f"{'validator':<10} {'import (ms)':>12} {'validate one scenario (us)':>28}   message for global_batch=0")
    for name, code in (("distsim", DISTSIM), ("pydantic", PYDANTIC), ("msgspec", MSGSPEC)):
        namespace: dict = {}
        try:
            exec(compile(code, f"<{name} models>", "exec", dont_inherit=True), namespace)
        except ImportError as exc:
            print(f"{name:<10} not installed ({exc})")
            continue
        validate = namespace["validate"]
        number, seconds = timeit.Timer(lambda: validate(good)).autorange()
        per_call_us = min(timeit.repeat(lambda: validate(good), number=number, repeat=5)) / number * 1e6
        try:
            validate(bad)
            message = "(accepted)"
        except Exception as exc:  # each library raises its own type
            message = " | ".join(str(exc).splitlines())[:150]
        imports = {"distsim": "import distsim.scenario", "pydantic": "import pydantic",
                   "msgspec": "import msgspec"}[name]
        print(f"{name:<10} {import_time_ms(imports, args.runs):>12.1f} {per_call_us:>28.1f}   {message}")
    print("distsim's figure covers presets, cross-field rules and size limits as well; the other two check "
          "fields only.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
