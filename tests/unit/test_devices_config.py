"""`devices`: validated in one line, per device batch, the split of threads, digests of one-device runs."""

from __future__ import annotations

import pytest

from dlbench.backends.threads import rank_threads, worker_env
from dlbench.config import JobConfig, validate
from dlbench.errors import ConfigError
from dlbench.tracking.resume import config_hash


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"devices": 0}, "devices=0: use a whole number, 1 or more"),
        ({"devices": -2}, "devices=-2: use a whole number, 1 or more"),
        ({"devices": 2, "framework": {"name": "mxnet"}}, "framework=mxnet runs on one device for now"),
        ({"devices": 2, "framework": {"name": "mxnet"}}, "several devices: framework=torch or jax or tf"),
        ({"devices": 2, "framework": {"name": "tf", "xla": True}}, "framework.xla=true runs on one device"),
        ({"devices": 2, "mode": "infer"}, "devices=2: mode=infer runs on one device; use mode=train"),
        ({"devices": 2, "mode": "converge"}, "mode=converge runs on one device"),
    ],
)
def test_bad_devices_are_refused_in_one_line(change, says):
    with pytest.raises(ConfigError) as err:
        validate(JobConfig.from_dict(change))
    assert says in str(err.value) and "\n" not in str(err.value)


def test_a_non_integer_devices_is_refused_at_composition(compose):
    with pytest.raises(Exception, match="devices"):
        compose(["devices=two"])


def test_torch_training_on_two_devices_is_valid_and_its_batch_is_per_device(compose):
    from omegaconf import OmegaConf

    job = JobConfig.from_dict(
        OmegaConf.to_container(compose(["devices=2", "schedule.batch_size=8"]), resolve=True)
    )
    validate(job)
    assert (job.devices, job.batch_size, job.global_batch_size) == (2, 8, 16)


@pytest.mark.parametrize("framework", ["torch", "jax"])
def test_training_on_two_devices_is_valid_for_torch_and_jax(compose, framework):
    from omegaconf import OmegaConf

    overrides = [f"framework={framework}", "devices=2", "schedule.batch_size=8"]
    job = JobConfig.from_dict(OmegaConf.to_container(compose(overrides), resolve=True))
    validate(job)
    assert (job.framework.name, job.global_batch_size) == (framework, 16)


def test_ranks_split_the_threads_and_one_device_keeps_the_setting():
    assert rank_threads(None, 1, "torch") is None and rank_threads(3, 1, "torch") == 3
    assert rank_threads(4, 2, "torch") == 2 and rank_threads(1, 2, "torch") == 1
    assert rank_threads(5, 2, "torch") == 2


def test_one_jax_process_drives_every_device_with_the_jobs_threads():
    assert rank_threads(4, 2, "jax") == 4 and rank_threads(None, 2, "jax") is None


def test_only_a_jax_worker_on_several_devices_asks_xla_for_host_devices(monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", "--xla_dump_to=/tmp/x")
    flag = "--xla_force_host_platform_device_count"
    assert "XLA_FLAGS" not in worker_env("jax", 1, 1) and "XLA_FLAGS" not in worker_env("torch", 1, 2)
    assert worker_env("jax", 1, 2)["XLA_FLAGS"] == f"--xla_dump_to=/tmp/x {flag}=2"


def test_tf_on_two_devices_is_valid_and_keeps_its_threads_in_its_one_process(compose):
    from omegaconf import OmegaConf

    job = JobConfig.from_dict(
        OmegaConf.to_container(compose(["framework=tf", "devices=2", "schedule.batch_size=8"]), resolve=True)
    )
    validate(job)
    assert job.global_batch_size == 16
    assert rank_threads(4, 2, "tf") == 4 and rank_threads(None, 2, "tf") is None


def test_one_device_keeps_the_digest_of_runs_made_before_devices_existed():
    config = JobConfig().to_dict()
    before = {k: v for k, v in config.items() if k != "devices"}
    assert config_hash(config) == config_hash(before)
    assert config_hash(config | {"devices": 2}) != config_hash(before)
