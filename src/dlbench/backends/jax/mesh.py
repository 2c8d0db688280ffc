"""devices=N in JAX: one process drives N local devices through `jax.sharding`, no ranks.

A 1-D mesh ("data") over the first N devices of the job's platform (host devices on the CPU, which the
worker's XLA_FLAGS ask for: backends/jax/environment.py; the local GPUs on a GPU). The step's batch is
sharded on its leading axis, so each device holds and computes its own per-device batch; the variables,
the optimizer state, the loss scale and the PRNG key are replicated. The same jitted step then runs as one
SPMD program: XLA inserts the collectives, the gradient all-reduce among them.

BatchNorm's batch statistics are the global batch's: under jit a mean over a sharded batch axis is a mean
over the whole axis (XLA adds the all-reduce), so N devices compute what one device computes on the
concatenated batch. torch's DistributedDataParallel normalizes each rank's batch by its own statistics.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from dlbench.errors import BackendUnavailable

AXIS = "data"


def mesh_devices(first: jax.Device, n: int) -> list[jax.Device]:
    """The first n devices of `first`'s platform, or one line saying how many JAX sees here."""
    found = jax.devices(first.platform)
    if len(found) < n:
        how = (
            " (CPU devices: XLA_FLAGS=--xla_force_host_platform_device_count, which the worker sets for "
            "devices>1 unless XLA_FLAGS already holds a count)"
            if first.platform == "cpu"
            else ""
        )
        raise BackendUnavailable(
            f"devices={n}: jax {jax.__version__} sees {len(found)} {first.platform} device(s) here; "
            f"use devices={len(found)} or fewer{how}"
        )
    return found[:n]


class DataMesh:
    """The job's devices as a 1-D mesh: where the batch is split and the state replicated."""

    def __init__(self, devices: list[jax.Device]) -> None:
        self.devices = devices
        self.mesh = Mesh(np.array(devices), (AXIS,))
        self.replicated = NamedSharding(self.mesh, P())
        self.batch = NamedSharding(self.mesh, P(AXIS))  # the leading axis: one slice per device

    def replicate(self, tree: Any) -> Any:
        """`tree` (variables, optimizer state...) copied whole onto every device of the mesh."""
        return jax.device_put(tree, self.replicated)

    def shard(self, array: np.ndarray) -> jax.Array:
        """A global batch array split on its leading axis: device d gets the d-th per-device batch."""
        return jax.device_put(array, self.batch)

    def jit_step(self, fn: Any, donate: tuple[int, ...]) -> Any:
        """The train step (carry, inputs, targets) -> (carry, loss) compiled for the mesh: the carry in and
        out replicated (so every later call matches the first and jit compiles once), the batch sharded."""
        r, b = self.replicated, self.batch
        return jax.jit(fn, donate_argnums=donate, in_shardings=(r, b, b), out_shardings=(r, r))

    def facts(self) -> dict[str, Any]:
        """The `ranks.*` params: the same names as torch's ranks where they mean the same (backend,
        world_size), and which devices the mesh holds."""
        return {
            "backend": "jax.sharding",
            "world_size": len(self.devices),
            "mesh": f"{AXIS}={len(self.devices)}",
            "mesh_devices": ",".join(f"{d.platform}:{d.id}" for d in self.devices),
        }
