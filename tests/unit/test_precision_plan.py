"""The precision plan: every conf/precision option on each device kind, decided once for all backends."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from dlbench.config import JobConfig, PrecisionConfig
from dlbench.core.precision import impossible, plan_precision

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


AMP = {"name": "amp", "autocast": True, "dtype": "float16", "cpu_dtype": "bfloat16", "loss_scale": "dynamic"}


def _prec(**changes) -> PrecisionConfig:
    return PrecisionConfig(**(AMP | changes))


@pytest.mark.parametrize(
    ("framework", "changes", "kind", "train", "refused"),
    [
        ("torch", {"autocast": False, "cpu_dtype": "float16"}, "cpu", True, "GradScaler refuses float16"),
        (
            "torch",
            {"autocast": False},
            "cuda",
            True,
            "precision.dtype=float16",
        ),  # amp without autocast on a GPU
        ("torch", {"autocast": False}, "cpu", True, None),  # pure bfloat16: no loss scaling, runs
        ("torch", {"autocast": False, "cpu_dtype": "float16", "loss_scale": "none"}, "cpu", True, None),
        ("torch", {"cpu_dtype": "float16"}, "cpu", True, None),  # mixed float16: GradScaler takes it
        ("torch", {"autocast": False, "cpu_dtype": "float16"}, "cpu", False, None),  # inference: no scaler
        ("tf", {"autocast": False, "cpu_dtype": "float16"}, "cpu", True, None),  # tf: no such limit
        ("mxnet", {"autocast": False}, "cpu", True, "no bfloat16 kernel"),
        ("mxnet", {"autocast": False}, "cpu", False, None),  # a cast bfloat16 network infers
        ("mxnet", {}, "cpu", True, None),
    ],
)
def test_settings_that_can_only_crash_are_named(framework, changes, kind, train, refused):
    why = impossible(_prec(**changes), framework, kind, train)
    if refused is None:
        assert why is None
    else:
        assert refused in why and "\n" not in why and "use precision." in why


def test_the_torch_rule_is_what_torch_does():
    """The refusal rests on GradScaler's behaviour: pure float16 gradients are refused, mixed ones (float32
    parameters under autocast) are scaled; if torch changed, this test says so."""
    import torch

    for pure in (True, False):
        model = torch.nn.Linear(4, 2)
        model = model.half() if pure else model
        x = torch.randn(3, 4, dtype=torch.float16 if pure else torch.float32)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        scaler = torch.amp.GradScaler("cpu")
        with torch.autocast("cpu", dtype=torch.float16, enabled=not pure):
            loss = model(x).float().sum()
        scaler.scale(loss).backward()
        if pure:
            with pytest.raises(ValueError, match="unscale FP16 gradients"):
                scaler.step(opt)
        else:
            scaler.step(opt)
        kind = {"autocast": False, "cpu_dtype": "float16"} if pure else {"cpu_dtype": "float16"}
        assert (impossible(_prec(**kind), "torch", "cpu", True) is not None) == pure
