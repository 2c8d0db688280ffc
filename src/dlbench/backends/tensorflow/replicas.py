"""Data-parallel training on several devices, TensorFlow's way: one process, tf.distribute.MirroredStrategy.

The worker drives all N devices itself (no ranks as processes): on GPUs the first N local GPUs, all-reduce
by NCCL (`NcclAllReduce`); on the CPU, N logical CPU devices made from the one physical CPU before TF starts
its runtime, all-reduce by `ReductionToOneDevice`. They share the process's thread pools, so the job's
threads are not split (backends/threads.ONE_PROCESS_FRAMEWORKS). The model's variables are mirrored (one
copy per device, equal after every step: Keras' optimizer sums the gradients over the replicas); each
replica trains on its own per-device batch, and the loss each replica differentiates is its batch mean
divided by N, so the summed gradient is the global batch's mean (what `tf.nn.compute_average_loss` with the
global batch gives for equal per-replica batches).

BatchNormalization: dlbench keeps Keras' plain layer (no SyncBatchNormalization), so each replica
normalises with its own per-device batch's statistics, as torch's DistributedDataParallel without
SyncBatchNorm does. Each replica also updates its own copy of the moving averages (Keras 3 assigns them
per replica), and what is read outside the step (evaluation, export) is the first replica's copy, as
DDP's buffers are rank 0's. The trained weights themselves stay equal on every replica.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from typing import Any

import tensorflow as tf

from dlbench.core.bench import Batch
from dlbench.errors import BackendUnavailable


def logical_cpus(n: int) -> list[str]:
    """N logical CPU devices' names. Their configuration must come before TF initialises its devices; in a
    process whose runtime already runs, what it has is kept (and too few is refused by the caller)."""
    cpu = tf.config.list_physical_devices("CPU")[0]
    with contextlib.suppress(RuntimeError):  # the runtime already started: keep its devices
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * n)
    return [d.name for d in tf.config.list_logical_devices("CPU")]


def replica_devices(n: int, on_gpu: bool) -> list[str]:
    """The first N devices of the job's kind, or a one-line refusal when TF has fewer."""
    kind = "GPU" if on_gpu else "CPU"
    found = [d.name for d in tf.config.list_logical_devices("GPU")] if on_gpu else logical_cpus(n)
    if len(found) < n:
        fix = f"use devices={len(found)} or fewer" if found else "use device=cpu"
        raise BackendUnavailable(f"devices={n}: TensorFlow has {len(found)} {kind} device(s) here; {fix}")
    return found[:n]


def cross_device_ops(on_gpu: bool) -> tf.distribute.CrossDeviceOps:
    """NCCL all-reduce between GPUs; on the CPU, reduction to one device (NCCL needs GPUs)."""
    return tf.distribute.NcclAllReduce() if on_gpu else tf.distribute.ReductionToOneDevice()


def mirrored(n: int, on_gpu: bool) -> tf.distribute.MirroredStrategy:
    """MirroredStrategy over the first N devices of the job's kind."""
    if on_gpu:  # NVLink SHARP / multicast stays off, as for torch's ranks: a shared host may lack its setup
        os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    ops = cross_device_ops(on_gpu)
    return tf.distribute.MirroredStrategy(devices=replica_devices(n, on_gpu), cross_device_ops=ops)


def strategy_facts(strategy: tf.distribute.MirroredStrategy, on_gpu: bool) -> dict[str, Any]:
    """What ran, under torch's `ranks.*` names where they mean the same (backend, world_size), plus the
    devices the replicas ran on."""
    ops = type(cross_device_ops(on_gpu)).__name__
    return {
        "backend": f"tf.distribute.MirroredStrategy ({ops})",
        "world_size": strategy.num_replicas_in_sync,
        "devices": ",".join(d.split("device:")[-1] for d in strategy.extended.worker_devices),
    }


def replicated(strategy: tf.distribute.Strategy, body: Callable[..., tf.Tensor]) -> Callable[..., tf.Tensor]:
    """`body` run on every replica (its own per-replica inputs); returns the replicas' mean loss."""

    def run(inputs: tuple, targets: tuple) -> tf.Tensor:
        per_replica = strategy.run(body, args=(inputs, targets))
        return strategy.reduce(tf.distribute.ReduceOp.MEAN, per_replica, axis=None)

    return run


class ReplicaSource:
    """One source per replica (each its own data: `data.shard_id` = the replica, which also seeds its
    synthetic batch), each placing its batches on its replica's device; a step's batch is theirs as
    per-replica values, with the units of all of them, counted once for the job."""

    def __init__(self, strategy: tf.distribute.Strategy, sources: list[Any]) -> None:
        self.strategy, self.sources = strategy, sources

    def _per_replica(self, parts: list[tuple]) -> tuple:
        def value(i: int) -> Any:
            return self.strategy.experimental_distribute_values_from_function(
                lambda ctx: parts[ctx.replica_id_in_sync_group][i]
            )

        return tuple(value(i) for i in range(len(parts[0])))

    def next(self) -> Batch:
        batches = [s.next() for s in self.sources]
        return Batch(
            self._per_replica([b.inputs for b in batches]),
            self._per_replica([b.targets for b in batches]),
            sum(b.units for b in batches),
        )

    def close(self) -> None:
        for s in self.sources:
            s.close()
