"""Execution mode as an axis: `execution=eager|compiled` sets each framework's compile knob, every run is
tagged with the mode it ran in, and MXNet (no whole-step compiler) is not run under `execution=compiled`."""

from __future__ import annotations

import pytest

from dlbench.backends import capability
from dlbench.config import JobConfig, validate
from dlbench.core.execution import (
    COMPILED,
    UNCOMPILED,
    apply_execution,
    cell_label,
    execution,
    execution_class,
)
from dlbench.errors import ConfigError


def test_each_framework_knob_names_a_mode_from_config_or_mlflow_params():
    assert execution("torch", {"compile": False}) == "eager"
    assert (
        execution("torch", {"compile": "True", "compile_mode": "max-autotune"})
        == "torch.compile(max-autotune)"
    )
    assert execution("tf", {"xla": "False"}) == "graph"
    assert execution("tf", {"xla": True}) == "xla"
    assert execution("mxnet", {}) == "hybridized" and execution("mxnet", {"hybridize": "False"}) == "eager"
    assert execution("jax", {"jit": "True"}) == "jit" and execution("jax", {"jit": False}) == "eager"
    assert [execution_class(m) for m in ("eager", "graph", "hybridized")] == [UNCOMPILED] * 3
    assert [execution_class(m) for m in ("xla", "torch.compile(default)", "jit")] == [COMPILED] * 3


@pytest.mark.parametrize(("framework", "knob"), [("torch", "compile"), ("tf", "xla"), ("jax", "jit")])
def test_execution_sets_the_compile_knob_and_null_leaves_it(compose, framework, knob):
    for chosen, want in (("compiled", True), ("eager", False)):
        job = JobConfig.from_dict(compose([f"framework={framework}", f"execution={chosen}"]))
        validate(job)
        apply_execution(job.framework, job.execution)
        assert getattr(job.framework, knob) is want
    default = getattr(JobConfig.from_dict(compose([f"framework={framework}"])).framework, knob)
    job = JobConfig.from_dict(compose([f"framework={framework}", f"framework.{knob}={not default}"]))
    apply_execution(job.framework, job.execution)
    assert getattr(job.framework, knob) is not default  # execution=null: the framework's own knob stands


@pytest.mark.parametrize(
    ("overrides", "want"),
    [
        (["framework=torch", "execution=compiled"], "torch resnet50 amp train torch.compile(default)"),
        (["framework=tf", "execution=eager"], "tf resnet50 amp train graph"),
        (["framework=jax", "mode=infer"], "jax resnet50 amp infer jit"),
    ],
)
def test_a_cell_is_labelled_with_its_mode_before_the_knobs_are_set(compose, overrides, want):
    job = JobConfig.from_dict(compose(["model=resnet50", "precision=amp", *overrides]))
    knobs = dict(vars(job.framework))
    assert cell_label(job) == want
    assert vars(job.framework) == knobs  # labelling leaves the job's own knobs alone


def test_a_bad_execution_is_one_line_and_mxnet_compiled_is_not_run(compose):
    job = JobConfig.from_dict(compose(["execution=fast"]))
    with pytest.raises(ConfigError, match="execution='fast': use eager or compiled"):
        validate(job)
    mx = JobConfig.from_dict(compose(["framework=mxnet", "execution=compiled", "precision=fp32"]))
    assert "no whole-step compiler" in capability.check(mx, gpus=[]).reason
    mx.execution = "eager"
    assert capability.check(mx, gpus=[]).reason is None


def test_the_gpu_framework_preset_crosses_frameworks_modes_and_tensor_core_precisions(compose):
    cfg = compose(["+experiment=frameworks_gpu"], hydra=True)
    params = dict(cfg.hydra.sweeper.params)
    assert params == {
        "framework": "tf,torch,jax",
        "execution": "eager,compiled",
        "precision": "fp32,tf32,amp,bf16",  # fp32: the base of the report's × fp32 and its amp verdict
    }
    assert cfg.device == "cuda"
    assert cfg.schedule.min_timed_s >= 5  # a fast GPU's default windows are too short for 10 Hz telemetry
    assert cfg.schedule.min_timed_s / cfg.schedule.windows >= 2  # 9-ms edges: ~0.45%
    assert cfg.schedule.steps_per_window == 1  # ...and a slow cell's 20-step floor far too long


@pytest.mark.parametrize(
    ("model", "batch"),
    [("resnet50", 256), ("ssd300", 128), ("ncf", 2**20), ("vgg16", None), ("transformer", None)],
)
def test_the_gpu_framework_preset_sizes_each_model_for_a_gpu(compose, model, batch):
    cfg = compose(["+experiment=frameworks_gpu", f"model={model}"])
    assert cfg.schedule.batch_size == batch  # None: the model's own default
    if model == "transformer":
        assert (cfg.model.batch_tokens, cfg.model.lengths) == (40960, "fixed")
    assert (
        compose(
            ["+experiment=frameworks_gpu", f"model={model}", "schedule.batch_size=64"]
        ).schedule.batch_size
        == 64
    )
    assert compose(["+experiment=frameworks_gpu"]).schedule.batch_size == 256  # resnet50 unless named
