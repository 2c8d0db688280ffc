"""The PyTorch bench's optimizer and compile settings, on the CPU (CUDA-only choices are checked as data)."""

from __future__ import annotations

import pytest
import torch

from dlbench.backends.torch.bench import TorchBench
from dlbench.backends.torch.optimizers import resolve_optimizer_impl
from dlbench.config import PrecisionConfig
from tests.worker_jobs import tiny_job


def test_auto_optimizer_is_fused_on_cuda_only():
    # fused on CUDA: GradScaler then checks fp16 overflow on the GPU instead of syncing the host each step
    assert resolve_optimizer_impl("auto", torch.device("cuda", 0)) == "fused"
    assert resolve_optimizer_impl("auto", torch.device("cpu")) == "foreach"
    assert resolve_optimizer_impl("foreach", torch.device("cuda", 0)) == "foreach"


@pytest.mark.parametrize("impl", ["fused", "foreach"])
def test_chosen_sgd_implementation_is_used_and_trains(impl):
    job = tiny_job("torch", {"mode": "train", "precision": PrecisionConfig()})
    job.framework.optimizer_impl = impl
    bench = TorchBench(job)
    try:
        assert bench.opt.defaults["fused"] is (impl == "fused")
        before = [p.detach().clone() for p in bench.model.parameters()]
        bench.step()
        moved = sum(not torch.equal(a, p) for a, p in zip(before, bench.model.parameters(), strict=True))
        assert moved == len(before)
        facts = bench.run_facts()
        assert facts["optimizer"] == f"sgd/{impl}" and facts["compiled"] is False
    finally:
        bench.close()


@pytest.mark.parametrize("mode", ["train", "infer"])
def test_compiled_model_is_compiled_once(mode):
    # The precision probe's hooks on the first step must not reach the compiled graph: removing them
    # afterwards made dynamo compile everything a second time (SSD300 on an H200: 57 s, then 49 s more).
    import torch._dynamo

    torch._dynamo.reset()
    job = tiny_job("torch", {"mode": mode, "precision": PrecisionConfig()})
    job.framework.compile = True
    bench = TorchBench(job)
    try:
        with torch._dynamo.config.patch(error_on_recompile=True):
            for _ in range(3):
                bench.step()
        assert bench.run_facts()["compiled"] == "default"
        assert not bench.probe.active  # the first step still showed the dtypes
        assert bench.precision_report()["compute_dtype"] == "float32"
    finally:
        bench.close()
        torch._dynamo.reset()


def test_inference_has_no_optimizer():
    job = tiny_job("torch", {"mode": "infer", "precision": PrecisionConfig()})
    bench = TorchBench(job)
    assert bench.opt is None and bench.run_facts()["optimizer"] == "none"
    bench.close()


def _fp16_losses(impl: str, steps: int = 8) -> list[float]:
    """A small CNN under fp16 autocast with GradScaler on the CPU, from a scale that overflows fp16 on the
    first steps (as 2**16 does on GPUs for ResNet-50): those steps are skipped by the scaler."""
    from dlbench.backends.torch.optimizers import make_optimizer
    from dlbench.core.spec import OptimizerSpec

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(8 * 14 * 14, 10)
    )
    opt = make_optimizer(model, impl, OptimizerSpec("sgd", lr=0.01, momentum=0.9))
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**18)
    x, y = torch.randn(4, 3, 16, 16), torch.randint(0, 10, (4,))
    losses = []
    for _ in range(steps):
        with torch.autocast("cpu", dtype=torch.float16):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        losses.append(loss.item())
    assert scaler.get_scale() < 2.0**18  # the premise: some steps overflowed and were skipped
    return losses


def test_fused_sgd_survives_skipped_fp16_steps():
    # torch's fused SGD, left alone, fills its momentum from the inf gradients of a skipped step: NaN after
    fused, foreach = _fp16_losses("fused"), _fp16_losses("foreach")
    assert all(torch.isfinite(torch.tensor(fused)))
    assert fused == pytest.approx(foreach, rel=1e-3)
    assert fused[-1] < fused[0]  # and it trains
