"""Will it fit? The device memory one replica needs.

The model, per replica, in bytes (NumPy arrays broadcast over a sweep):

* weights: ``num_params x bytes_per_param``; every replica holds a full
  copy while it computes, whatever the strategy;
* gradients: the same again;
* optimizer state: ``num_params x (optimizer_bytes_per_param - 3 x
  bytes_per_param) / 2``, the slots an update reads and writes besides the
  weight and the gradient (SGD 12 bytes of traffic: no slot; momentum 20:
  one; Adam 28: two). It sits on the device where the strategy keeps the
  variables there (default, one_device, mirrored, multi_worker_mirrored,
  tpu), and on the host CPU (central_storage) or the parameter servers
  (parameter_server) otherwise;
* activations: ``per-replica batch x activation_bytes_per_sample x
  activation_value_bytes / 4``: the workload counts float32 values, and a
  device that trains in bfloat16 (TPUs) stores each in 2 bytes.

Framework workspace, allocator fragmentation and input buffers are left
out, so the total is a lower bound: a replica that does not fit by this
count does not fit at all, while one that fits may still run out.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from distsim.mechanics.stepcosts import StepCosts

#: Strategies whose variables, and so optimizer state, live on the devices.
STATE_ON_DEVICE: tuple[str, ...] = ("default", "one_device", "mirrored", "multi_worker_mirrored", "tpu")
#: Bytes of one value in which ``Workload.activation_bytes_per_sample`` is counted.
FLOAT32_BYTES = 4


@dataclass
class Footprint:
    """Device memory of one replica, bytes (arrays over a sweep).

    Attributes:
        weights_bytes, gradient_bytes, optimizer_bytes, activation_bytes:
            the four parts (see the module docstring).
        capacity_bytes: the device's ``memory_bytes``.
    """

    weights_bytes: np.ndarray
    gradient_bytes: np.ndarray
    optimizer_bytes: np.ndarray
    activation_bytes: np.ndarray
    capacity_bytes: np.ndarray

    @property
    def total_bytes(self) -> np.ndarray:
        return self.weights_bytes + self.gradient_bytes + self.optimizer_bytes + self.activation_bytes

    @property
    def fits(self) -> np.ndarray:
        return self.total_bytes <= self.capacity_bytes

    def describe(self, i: int = 0) -> str:
        """The parts of row ``i`` in words, for an error message."""
        def at(x):
            return float(np.asarray(x).ravel()[i] if np.ndim(x) else x)
        return (f"weights {at(self.weights_bytes):.3g} + gradients {at(self.gradient_bytes):.3g} + optimizer state "
                f"{at(self.optimizer_bytes):.3g} + activations {at(self.activation_bytes):.3g} = "
                f"{at(self.total_bytes):.3g} bytes")


def footprint(p: StepCosts, strategy: str, replica_batch) -> Footprint:
    """The footprint of one replica running ``replica_batch`` examples per
    step; ``p``: the scenario's :class:`~distsim.mechanics.stepcosts.StepCosts`."""
    params, width = p.num_params, p.bytes_per_param
    slots = np.maximum(p.optimizer_bytes_per_param - 3 * width, 0) / 2
    on_device = strategy in STATE_ON_DEVICE
    return Footprint(
        weights_bytes=params * width,
        gradient_bytes=params * width,
        optimizer_bytes=params * slots * on_device,
        activation_bytes=(np.asarray(replica_batch, dtype=float) * p.activation_bytes_per_sample
                          * p.activation_value_bytes / FLOAT32_BYTES),
        capacity_bytes=p.memory_bytes,
    )
