"""`devices`: validated in one line, per device batch, the split of threads, digests of one-device runs."""

from __future__ import annotations

import pytest

from dlbench.backends.threads import rank_threads
from dlbench.config import JobConfig, validate
from dlbench.errors import ConfigError
from dlbench.tracking.resume import config_hash


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"devices": 0}, "devices=0: use a whole number, 1 or more"),
        ({"devices": -2}, "devices=-2: use a whole number, 1 or more"),
        ({"devices": 2, "framework": {"name": "mxnet"}}, "framework=mxnet runs on one device for now"),
        ({"devices": 2, "framework": {"name": "jax"}}, "several devices: framework=torch or tf"),
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


def test_ranks_split_the_threads_and_one_device_keeps_the_setting():
    assert rank_threads(None, 1) is None and rank_threads(3, 1) == 3
    assert rank_threads(4, 2) == 2 and rank_threads(1, 2) == 1 and rank_threads(5, 2) == 2


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
