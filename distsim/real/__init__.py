"""Real ``tf.distribute`` runs of the experiments the simulator predicts.

The only part of distsim that uses TensorFlow, and only inside the task
processes it starts: importing ``distsim.real`` does not import TensorFlow.

* :func:`run` runs a :class:`~distsim.scenario.Scenario` (or a
  :class:`RunPlan`) for real on this machine, one fresh process per task, and
  returns ``Result(source="measured")`` in the simulator's schema.
* :func:`run_with_failure` kills a MultiWorkerMirrored worker mid-training and
  resumes from the ``BackupAndRestore`` checkpoint; :func:`run_ps_with_worker_failure`
  kills a parameter-server worker and lets the coordinator carry on.
* The network lab (:mod:`distsim.real.netlab`): :func:`lab_scenario`,
  :func:`run_point` (predict, then run over emulated NICs),
  :func:`wire_bound_s`, :func:`apply_times` (when a measured run applied each update); :func:`emulation_unavailable` says why emulated
  hosts cannot run here.
* :func:`calibrate` times micro-benchmarks and writes "this machine" presets;
  :func:`fit_link` fits a link's alpha and B to measured all-reduce times.
* :func:`configure_tensorflow` is the first cell of a notebook that uses
  TensorFlow in its own kernel (``tf_keras``, logical devices).
* TF_CONFIG helpers: :func:`build_tf_config`, :func:`validate_tf_config`,
  :func:`localhost_cluster`; launching your own task processes: :class:`Task`,
  :func:`launch`, :func:`launched_processes`; a short probe in a fresh
  interpreter: :func:`run_python`.
* The training scripts every measured run executes (``notebooks/scripts``):
  :func:`script_path`, :func:`load_script`, :func:`script_command`.

``python -m distsim.real worker --tf-config '<json>' --scenario S.json`` runs
one task of a real multi-machine cluster (see ``distsim/real/README.md``).
"""

from distsim.real.calibrate import Calibration, LinkFit, calibrate, fit_link
from distsim.real.env import configure_tensorflow, describe_tensorflow, physical_gpu_count, start_tensorflow
from distsim.real.experiment import EmulationUnavailable, run, tpu_status
from distsim.real.fault import (
    FaultToleranceRun,
    ParameterServerFailureRun,
    load_final_weights,
    run_ps_with_worker_failure,
    run_with_failure,
)
from distsim.real.netlab import (
    BATCH_PER_WORKER,
    TCP_PAYLOAD_FRACTION,
    LabPoint,
    apply_times,
    lab_hardware,
    lab_scenario,
    run_point,
    wire_bound_s,
)
from distsim.real.network import unavailable as emulation_unavailable
from distsim.real.launcher import (
    LaunchError,
    LaunchOutcome,
    ProbeFailed,
    Task,
    launch,
    launched_processes,
    python_module_argv,
    run_python,
)
from distsim.real.plan import RunPlan, plan_from_scenario
from distsim.real.protocol import NoTPUError
from distsim.real.scripts import load_script, script_command, script_path
from distsim.real.tfconfig import (
    TFConfigError,
    build_tf_config,
    build_tf_configs,
    free_ports,
    is_chief,
    localhost_cluster,
    task_name,
    validate_tf_config,
)

__all__ = [
    "BATCH_PER_WORKER",
    "Calibration",
    "LinkFit",
    "fit_link",
    "EmulationUnavailable",
    "LabPoint",
    "apply_times",
    "TCP_PAYLOAD_FRACTION",
    "emulation_unavailable",
    "lab_hardware",
    "lab_scenario",
    "run_point",
    "wire_bound_s",
    "FaultToleranceRun",
    "LaunchError",
    "LaunchOutcome",
    "NoTPUError",
    "ParameterServerFailureRun",
    "RunPlan",
    "TFConfigError",
    "Task",
    "build_tf_config",
    "build_tf_configs",
    "calibrate",
    "configure_tensorflow",
    "describe_tensorflow",
    "free_ports",
    "is_chief",
    "launch",
    "launched_processes",
    "load_final_weights",
    "load_script",
    "localhost_cluster",
    "physical_gpu_count",
    "start_tensorflow",
    "plan_from_scenario",
    "python_module_argv",
    "ProbeFailed",
    "run_python",
    "run",
    "run_ps_with_worker_failure",
    "run_with_failure",
    "script_command",
    "script_path",
    "task_name",
    "tpu_status",
    "validate_tf_config",
]
