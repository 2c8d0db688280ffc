"""devices=2 in JAX on two host devices: the batch is sharded over both, every device holds the same
weights after the steps, and they equal one device's steps on the same global batch (BatchNorm's
statistics are the global batch's under the mesh). JAX runs in a subprocess, under its own interpreter."""

from __future__ import annotations

import pytest

from dlbench.backends.interpreter import worker_python
from dlbench.backends.jax.environment import HOST_DEVICES, host_devices
from dlbench.config import JaxConfig
from dlbench.errors import ConfigError
from tests.worker_jobs import run_snippet, worker_env

try:
    PYTHON = worker_python(JaxConfig())
except ConfigError as exc:
    pytest.skip(str(exc), allow_module_level=True)

SCRIPT = """
import json
import jax
import numpy as np
from dlbench.backends.jax.bench import JaxBench
from dlbench.config import JobConfig
from dlbench.errors import BackendUnavailable, ConfigError

job = {
    "framework": {"name": "jax"}, "device": "cpu", "threads": 1, "devices": 2,
    "model": {"name": "resnet_cifar", "depth": 8, "image_size": 32, "num_classes": 10},
    "schedule": {"batch_size": 2},
}
two = JaxBench(JobConfig.from_dict(job))
one = JaxBench(JobConfig.from_dict(job | {"devices": 1}))
batch = two.source.next()
x = batch.inputs[0]
out = {
    "shape": list(x.shape),
    "batch_devices": len(x.sharding.device_set),
    "shard_rows": [s.data.shape[0] for s in x.addressable_shards],
    "shards_differ": not np.array_equal(*(np.asarray(s.data) for s in x.addressable_shards)),
    "units": batch.units,
    "facts": two.ranks_facts(),
}
same = lambda a: jax.device_put(np.asarray(a), one.dev)
before = [np.asarray(a) for a in jax.tree.leaves(one.carry[0]["params"])]
for _ in range(2):
    two.carry, _ = two._train(two.carry, batch.inputs, batch.targets)
    one.carry, _ = one._train(one.carry, tuple(map(same, batch.inputs)), tuple(map(same, batch.targets)))
leaves2, leaves1 = jax.tree.leaves(two.carry[0]), jax.tree.leaves(one.carry[0])
out["param_devices"] = min(len(a.sharding.device_set) for a in leaves2)
out["replicas_equal"] = all(
    np.array_equal(np.asarray(a.addressable_shards[0].data), np.asarray(a.addressable_shards[1].data))
    for a in leaves2
)
out["max_diff"] = max(float(np.max(np.abs(np.asarray(a) - np.asarray(b)))) for a, b in zip(leaves2, leaves1))
after = jax.tree.leaves(two.carry[0]["params"])
out["moved"] = max(float(np.max(np.abs(np.asarray(a) - b))) for a, b in zip(after, before))
try:
    JaxBench(JobConfig.from_dict(job | {"devices": 3}))
    out["three"] = "built"
except BackendUnavailable as exc:
    out["three"] = str(exc)
try:
    JaxBench(JobConfig.from_dict(job | {"model": {"task": "translation", "name": "transformer"}}))
    out["varying"] = "built"
except ConfigError as exc:
    out["varying"] = str(exc)
print("STATS " + json.dumps(out))
"""


@pytest.fixture(scope="module")
def got() -> dict:
    env = worker_env(OMP_NUM_THREADS="1", XLA_FLAGS=f"{HOST_DEVICES}=2")
    return run_snippet(SCRIPT, env, python=PYTHON)


def test_the_global_batch_is_sharded_over_both_devices_each_its_own(got: dict) -> None:
    assert got["shape"][0] == 4 and got["batch_devices"] == 2 and got["shard_rows"] == [2, 2]
    assert got["shards_differ"]  # device 1 got its own per-device batch, not device 0's again
    assert got["units"] == 4  # the global batch's units, counted once for the job
    assert got["facts"] == {
        "backend": "jax.sharding",
        "world_size": 2,
        "mesh": "data=2",
        "mesh_devices": "cpu:0,cpu:1",
    }


def test_the_weights_stay_replicated_and_equal_one_device_on_the_global_batch(got: dict) -> None:
    assert got["param_devices"] == 2 and got["replicas_equal"]
    assert got["moved"] > 1e-4  # the steps did train: the comparison is not of untouched weights
    assert got["max_diff"] < 1e-5, got["max_diff"]


def test_more_devices_than_jax_sees_is_refused_in_one_line(got: dict) -> None:
    assert got["three"].startswith("devices=3: jax") and "sees 2 cpu device(s)" in got["three"]
    assert "\n" not in got["three"]


def test_a_task_with_its_own_varying_batches_is_refused_in_one_line(got: dict) -> None:
    assert got["varying"].startswith("devices=2 framework=jax: several devices take synthetic data")


def test_host_devices_are_asked_for_after_the_users_flags_only_on_several_devices() -> None:
    assert host_devices(1, "--xla_foo=1") == {}
    assert host_devices(2, "") == {"XLA_FLAGS": f"{HOST_DEVICES}=2"}
    assert host_devices(2, "--xla_foo=1") == {"XLA_FLAGS": f"--xla_foo=1 {HOST_DEVICES}=2"}
    assert host_devices(4, f"{HOST_DEVICES}=8") == {}  # the user's count wins
