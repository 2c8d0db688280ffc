"""devices=2 in TensorFlow: two logical CPU devices under MirroredStrategy train one mirrored model, each
replica on its own batch, and one step equals a one-device step on the global batch (both batches).

The logical devices must be set before TF starts its runtime, so the bench runs in a fresh process."""

from __future__ import annotations

import importlib.util
import multiprocessing

import numpy as np
import pytest

# Not imported here: TF loaded into the test process makes a later triton import (torch tests) segfault.
if importlib.util.find_spec("tensorflow") is None:
    pytest.skip("tensorflow is not installed", allow_module_level=True)

JOB = {
    "model": {"name": "small_cnn", "image_size": 8, "batch_size": 4},
    "devices": 2,
    "device": "cpu",
    "threads": 1,
    "framework": {"name": "tf"},
}


def _replicas(variable) -> list[np.ndarray]:
    return [np.asarray(v) for v in variable.value.values]


def _refusal(n: int, on_gpu: bool) -> str:
    from dlbench.backends.tensorflow.replicas import replica_devices
    from dlbench.errors import BackendUnavailable

    try:
        replica_devices(n, on_gpu)
    except BackendUnavailable as exc:
        return str(exc)
    return "not refused"


def _two_replicas_then_one_device(out: dict) -> None:
    import tensorflow as tf

    from dlbench.backends.tensorflow.bench import TFBench
    from dlbench.config import JobConfig

    tf.config.threading.set_intra_op_parallelism_threads(1)
    two = TFBench(JobConfig.from_dict(JOB))
    start = two.model.get_weights()
    batch = two.source.next()
    parts = [two.strategy.experimental_local_results(x) for x in batch.inputs + batch.targets]
    out["facts"] = two.ranks_facts()
    out["own_batches"] = not np.array_equal(np.asarray(parts[0][0]), np.asarray(parts[0][1]))
    out["units"] = batch.units
    with two._placed():
        two._step(batch.inputs, batch.targets)
    out["equal_replicas"] = all(
        all(np.array_equal(r, _replicas(v)[0]) for r in _replicas(v)) for v in two.model.variables
    )
    after_two = [_replicas(v)[0] for v in two.model.trainable_variables]
    two.close()
    out["refusals"] = [
        _refusal(3, False),
        _refusal(1, True) if not tf.config.list_physical_devices("GPU") else "",
    ]

    one = TFBench(JobConfig.from_dict(JOB | {"devices": 1}))
    one.model.set_weights(start)
    whole = tuple(tf.concat(list(p), 0) for p in parts)  # the global batch: replica 0's rows, then 1's
    with one._placed():
        one._step(whole[: len(batch.inputs)], whole[len(batch.inputs) :])
    after_one = [np.asarray(v) for v in one.model.trainable_variables]
    out["max_diff"] = max(float(np.max(np.abs(a - b))) for a, b in zip(after_two, after_one, strict=True))
    out["moved"] = max(float(np.max(np.abs(a - b))) for a, b in zip(start, after_one, strict=True))
    one.close()


def test_two_replicas_own_their_batches_stay_equal_and_match_one_device_on_the_global_batch():
    ctx = multiprocessing.get_context("spawn")
    with ctx.Manager() as manager:
        out = manager.dict()
        proc = ctx.Process(target=_two_replicas_then_one_device, args=(out,))
        proc.start()
        proc.join(timeout=300)
        got = dict(out)
    assert proc.exitcode == 0, got
    assert got["facts"] == {
        "backend": "tf.distribute.MirroredStrategy (ReductionToOneDevice)",
        "world_size": 2,
        "devices": "CPU:0,CPU:1",
    }
    assert got["own_batches"] and got["units"] == 2 * 4  # each replica its own batch, units counted once
    assert got["equal_replicas"]  # the mirrored variables agree after the step
    # once the runtime runs with its two CPU devices, more cannot be made; no GPU here: none to mirror over
    assert got["refusals"][0] == "devices=3: TensorFlow has 2 CPU device(s) here; use devices=2 or fewer"
    assert got["refusals"][1] in (
        "",
        "devices=1: TensorFlow has 0 GPU device(s) here; use device=cpu",
    )
    assert got["moved"] > 1e-4 and got["max_diff"] < 1e-5  # the global batch's mean gradient
