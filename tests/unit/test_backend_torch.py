"""The PyTorch bench's optimizer and compile settings, on the CPU (CUDA-only choices are checked as data)."""

from __future__ import annotations

import pytest
import torch

from dlbench.backends.torch.bench import TorchBench, resolve_optimizer_impl
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
        report = bench.precision_report()
        assert report["optimizer"] == f"sgd/{impl}" and report["compiled"] is False
    finally:
        bench.close()


def test_inference_has_no_optimizer():
    job = tiny_job("torch", {"mode": "infer", "precision": PrecisionConfig()})
    bench = TorchBench(job)
    assert bench.opt is None and bench.precision_report()["optimizer"] == "none"
    bench.close()
