"""The precision plan: every conf/precision option on each device kind, decided once for all backends."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from dlbench.config import JobConfig, PrecisionConfig
from dlbench.core.precision import plan_precision

# (option, device kind) -> compute, params, autocast, loss scaling, tf32, what a data pipeline emits
EXPECTED = {
    ("fp32", "cuda"): ("float32", "float32", False, False, False, "float32"),
    ("fp32", "cpu"): ("float32", "float32", False, False, False, "float32"),
    ("tf32", "cuda"): ("float32", "float32", False, False, True, "float32"),
    ("amp", "cuda"): ("float16", "float32", True, True, False, "float16"),
    ("amp", "cpu"): ("bfloat16", "float32", True, False, False, "float32"),  # no loss scaling for bf16
    ("bf16", "cuda"): ("bfloat16", "float32", True, False, False, "float32"),  # DALI has no bfloat16
    ("bf16", "cpu"): ("bfloat16", "float32", True, False, False, "float32"),
}


@pytest.mark.parametrize(("option", "kind"), sorted(EXPECTED))
def test_each_precision_option_plans_the_same_for_every_backend(compose, option, kind):
    job = JobConfig.from_dict(OmegaConf.to_container(compose([f"precision={option}"]), resolve=True))
    plan = plan_precision(job.precision, kind)
    got = (
        plan.compute_dtype,
        plan.param_dtype,
        plan.autocast,
        plan.loss_scaling,
        plan.tf32,
        plan.input_dtype,
    )
    assert got == EXPECTED[(option, kind)]


def test_without_autocast_a_reduced_dtype_runs_the_whole_network():
    pure = PrecisionConfig(name="fp16", autocast=False, dtype="float16", loss_scale="dynamic")
    plan = plan_precision(pure, "cuda")
    assert (plan.param_dtype, plan.autocast, plan.loss_scaling, plan.input_dtype) == (
        "float16",
        False,
        True,
        "float16",
    )
    assert plan_precision(pure, "cpu").compute_dtype == "float32"  # cpu_dtype decides on the CPU


def test_an_unknown_device_kind_is_refused():
    with pytest.raises(ValueError, match="device kind"):
        plan_precision(PrecisionConfig(), "gpu")
