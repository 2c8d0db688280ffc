"""Composition of every config group against the schema, and the checks the schema cannot express."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from dlbench.config import JobConfig, validate
from dlbench.errors import ConfigError
from tests.conftest import CONF


def options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF / group).glob("*.yaml"))


def test_every_group_option_composes_and_validates(compose):
    groups = ["framework", "model", "dataset", "precision", "tracking"]
    for group in groups:
        assert options(group), f"conf/{group} is empty"
    for framework, model, precision in itertools.product(
        options("framework"), options("model"), options("precision")
    ):
        cfg = compose([f"framework={framework}", f"model={model}", f"precision={precision}"])
        job = JobConfig.from_dict(OmegaConf.to_container(cfg, resolve=True))
        validate(job)
        assert (job.framework.name, job.model.name, job.precision.name) == (
            {"tf": "tf"}.get(framework, framework),
            model,
            precision,
        )
    for dataset in options("dataset"):
        cfg = compose([f"dataset={dataset}", "dataset.path=/somewhere"])
        assert cfg.dataset.name == dataset


def test_experiment_presets_compose(compose):
    for preset in options("experiment"):
        cfg = compose([f"+experiment={preset}"])
        JobConfig.from_dict(OmegaConf.to_container(cfg, resolve=True))


def test_precisions_are_data_not_names(compose):
    """The precision matrix lives in conf/precision: amp = fp16 + dynamic loss scale on CUDA, bf16 on CPU."""
    amp = compose(["precision=amp"]).precision
    assert (amp.autocast, amp.dtype, amp.cpu_dtype, amp.loss_scale) == (
        True,
        "float16",
        "bfloat16",
        "dynamic",
    )
    fp32 = compose(["precision=fp32"]).precision
    assert (fp32.autocast, fp32.allow_tf32) == (False, False)
    assert compose(["precision=tf32"]).precision.allow_tf32 is True


def test_batch_size_defaults_to_the_model(compose):
    job = JobConfig.from_dict(OmegaConf.to_container(compose(["model=resnet_cifar"]), resolve=True))
    assert job.batch_size == 128
    job = JobConfig.from_dict(OmegaConf.to_container(compose(["schedule.batch_size=7"]), resolve=True))
    assert job.batch_size == 7


def test_unknown_key_is_refused_at_composition(compose):
    with pytest.raises(Exception, match="nope"):
        compose(["schedule.nope=1"])
    with pytest.raises(Exception, match="framework"):
        compose(["framework=nope"])


def test_wrong_type_is_refused_at_composition(compose):
    with pytest.raises(Exception, match="windows"):
        compose(["schedule.windows=many"])


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"schedule": {"batch_size": 0}}, "schedule.batch_size"),
        ({"schedule": {"windows": 0}}, "schedule.windows"),
        ({"schedule": {"min_timed_s": 0}}, "schedule.min_timed_s"),
        ({"pythons": {"caffe": "/usr/bin/python3"}}, "pythons"),
        ({"mode": "fly"}, "mode"),
        ({"device": "tpu"}, "device"),
        ({"telemetry": {"interval_s": 0}}, "telemetry.interval_s"),
        ({"dataset": {"name": "imagenet"}}, "dataset.path"),
        ({"framework": {"compile_mode": "fast"}}, "framework.compile_mode"),
        ({"framework": {"optimizer_impl": "apex"}}, "framework.optimizer_impl"),
        ({"framework": {"name": "jax", "prng": "philox"}}, "framework.prng"),
        ({"model": {"image_size": 4}}, "model.image_size"),
        ({"model": {"num_classes": 1}}, "model.num_classes"),
        ({"model": {"task": "segmentation"}}, "model.task"),
    ],
)
def test_validate_names_the_key_in_one_line(change, key):
    job = JobConfig.from_dict(change)
    with pytest.raises(ConfigError) as err:
        validate(job)
    message = str(err.value)
    assert key in message and "\n" not in message


def test_job_config_round_trips_through_a_plain_dict():
    job = JobConfig.from_dict({"model": {"name": "vgg16"}, "precision": {"name": "amp", "autocast": True}})
    again = JobConfig.from_dict(job.to_dict())
    assert again == job


def test_a_model_key_of_another_family_is_refused_at_composition(compose):
    with pytest.raises(Exception, match="vocab"):
        compose(["model=vgg16", "model.vocab=32000"])


def test_the_worker_rebuilds_the_family_schema_from_json():
    from dlbench.workloads.classification.spec import ClassificationConfig
    from tests.workloads.mlp.spec import MLPConfig

    mlp = JobConfig.from_dict({"model": {"task": "test_mlp", "features": 7}})
    assert type(mlp.model) is MLPConfig and mlp.model.features == 7
    assert JobConfig.from_dict(mlp.to_dict()) == mlp
    assert type(JobConfig.from_dict({}).model) is ClassificationConfig


def test_any_family_schema_merges_into_the_job_schema(compose):
    """The job schema's model node is the common base, so a family's schema (a subclass) replaces it."""
    from hydra.core.config_store import ConfigStore

    from tests.workloads.mlp.spec import MLPConfig

    compose()  # registers the schemas
    schema = ConfigStore.instance().repo["dlbench_schema.yaml"].node
    merged = OmegaConf.merge(schema, {"model": OmegaConf.structured(MLPConfig)})
    assert OmegaConf.get_type(merged.model) is MLPConfig
    with pytest.raises(Exception, match="image_size"):
        OmegaConf.merge(merged, {"model": {"image_size": 32}})


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        (["framework=tf", "framework.compile=true"], "compile"),
        (["framework=mxnet", "framework.xla=true"], "xla"),
        (["framework=torch", "framework.hybridize=false"], "hybridize"),
    ],
)
def test_a_key_of_another_framework_is_refused_at_composition(compose, overrides, key):
    with pytest.raises(Exception, match=key):
        compose(overrides)


def test_each_framework_gets_its_own_schema_back_from_json(compose):
    from dlbench.config import MXNetConfig, TFConfig, TorchConfig

    for name, cls in (("torch", TorchConfig), ("tf", TFConfig), ("mxnet", MXNetConfig)):
        job = JobConfig.from_dict(OmegaConf.to_container(compose([f"framework={name}"]), resolve=True))
        assert type(job.framework) is cls and JobConfig.from_dict(job.to_dict()) == job
    tf = JobConfig.from_dict({"framework": {"name": "tf", "xla": True}}).to_dict()["framework"]
    assert tf == {"name": "tf", "python": None, "xla": True}  # no torch or mxnet keys logged as params


def test_a_relative_dataset_path_is_found_from_any_directory(tmp_path, monkeypatch):
    """Presets name data/... under the project (where the data scripts write); from another directory the
    path falls back to the project root, while a path that exists where the user is wins."""
    from dlbench.core.names import PROJECT_ROOT, project_relative

    monkeypatch.chdir(tmp_path)
    assert project_relative("conf/experiment") == PROJECT_ROOT / "conf" / "experiment"
    (tmp_path / "conf" / "experiment").mkdir(parents=True)
    assert project_relative("conf/experiment") == tmp_path / "conf" / "experiment"
    assert project_relative("/nowhere/at/all") == Path("/nowhere/at/all")
