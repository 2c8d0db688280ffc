"""The MXNet backend on CPU: the networks equal the torch ones, and real jobs run through the worker.

MXNet runs only in subprocesses (as it does in real use: one worker process per job), so its engine
threads, signal handlers and bundled OpenBLAS never share the pytest process with other frameworks.
The subprocesses run side by side to keep the file well under a minute on two cores.
"""

from __future__ import annotations

import importlib.util
import math

import pytest

from dlbench.config import PrecisionConfig
from dlbench.core.cpu import onednn_avx512_core
from tests.worker_jobs import cuda_probe, run_all, run_snippet, worker_env

if importlib.util.find_spec("mxnet") is None:  # find only: importing mxnet here needs the numpy shim
    pytest.skip("mxnet is not installed in this interpreter", allow_module_level=True)


# Reference values: torchvision resnet50 / vgg16 at 1000 classes and the torch backend's CifarResNet
# (option A) at 10 classes; GFLOPs (multiply-add = 2) agree with torch.utils.flop_counter.
RESNET50_PARAMS = 25_557_032
VGG16_PARAMS = 138_357_544
RESNET56_CIFAR_PARAMS = 853_018
RESNET20_CIFAR_PARAMS = 269_722
RESNET50_GFLOPS_224 = 8.178368512
VGG16_GFLOPS_32 = 0.873660416
RESNET56_GFLOPS_32 = 0.250971392
RESNET20_GFLOPS_32 = 0.08110208

STATS_SCRIPT = (
    """
import json
from dlbench.errors import BackendUnavailable
from dlbench.backends.mxnet import build, model_stats
from dlbench.config import JobConfig
from dlbench.workloads.classification.spec import ClassificationConfig as Model
out = {
    "resnet50": model_stats(Model(name="resnet50")),
    "vgg16": model_stats(Model(name="vgg16", image_size=32)),
    "resnet_cifar": model_stats(Model(name="resnet_cifar", image_size=32, num_classes=10, depth=56)),
}
"""
    + cuda_probe("mxnet")
    + """print("STATS " + json.dumps(out))
"""
)

AMP = PrecisionConfig(name="amp", autocast=True, dtype="float16", cpu_dtype="bfloat16", loss_scale="dynamic")

JOBS = {
    "train_hybrid": {"mode": "train", "hybridize": True, "precision": PrecisionConfig()},
    "train_imperative": {"mode": "train", "hybridize": False, "precision": PrecisionConfig()},
    "infer_hybrid": {"mode": "infer", "hybridize": True, "precision": PrecisionConfig()},
    "train_amp": {"mode": "train", "hybridize": True, "precision": AMP},
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict:
    # Several processes share the CPU here: one compute thread each keeps them from thrashing.
    env = worker_env(OMP_NUM_THREADS="1", MXNET_CPU_WORKER_NTHREADS="1")
    return run_all("mxnet", JOBS, STATS_SCRIPT, tmp_path_factory.mktemp("mxnet_jobs"), env, depth=20)


def test_params_equal_torch_networks(runs: dict) -> None:
    stats = runs["stats"]
    assert stats["resnet50"]["params"] == RESNET50_PARAMS
    assert stats["vgg16"]["params"] == VGG16_PARAMS  # also at 32x32: adaptive pooling to 7x7
    assert stats["resnet_cifar"]["params"] == RESNET56_CIFAR_PARAMS


def test_flops_read_from_mxnet_graph(runs: dict) -> None:
    stats = runs["stats"]
    assert stats["resnet50"]["gflops"] == pytest.approx(RESNET50_GFLOPS_224, rel=1e-6)
    assert stats["vgg16"]["gflops"] == pytest.approx(VGG16_GFLOPS_32, rel=1e-6)
    assert stats["resnet_cifar"]["gflops"] == pytest.approx(RESNET56_GFLOPS_32, rel=1e-6)


def test_device_cuda_is_refused_in_one_line_without_a_gpu_build(runs: dict) -> None:
    message = runs["stats"]["cuda"]
    assert message.startswith("framework=mxnet device=cuda: ")
    assert "\n" not in message


@pytest.mark.parametrize("name", ["train_hybrid", "train_imperative", "infer_hybrid"])
def test_fp32_jobs_run_through_the_worker(runs: dict, name: str) -> None:
    rc, events, stderr = runs[name]
    assert rc == 0, stderr[-3000:]
    by_kind = {}
    for e in events:
        by_kind.setdefault(e["event"], []).append(e)
    built = by_kind["built"][0]
    assert built["params"] == RESNET20_CIFAR_PARAMS
    assert built["device"] == "cpu"
    assert built["versions"]["mxnet"] == "1.9.1"
    windows = by_kind["window"]
    assert len(windows) == 2 and all(w["throughput"] > 0 for w in windows)
    done = by_kind["done"][0]
    if "gflops" in done:  # the worker reports the backend's model_stats
        assert done["gflops"] == pytest.approx(RESNET20_GFLOPS_32, rel=1e-6)
    precision = done["precision"]
    assert precision["compute_dtype"] == "float32"
    assert precision["param_dtype"] == "float32"
    assert precision["first_layer"].endswith("(Convolution)") and precision["last_layer"].endswith(
        "(FullyConnected)"
    )
    assert precision["amp_cast_ops"] == 0
    assert done["run"]["hybridized"] is JOBS[name]["hybridize"]
    if JOBS[name]["mode"] == "train":
        # a real host float (it may approach 0: the net fits its one synthetic batch within a few steps)
        assert all(isinstance(w["loss"], float) and math.isfinite(w["loss"]) for w in windows)
    else:
        assert all(w["loss"] is None for w in windows)


def test_amp_on_cpu_computes_bfloat16_or_says_why_not(runs: dict) -> None:
    rc, events, stderr = runs["train_amp"]
    if onednn_avx512_core() is None:  # AVX-512 and oneDNN not capped below it
        assert rc == 0, stderr[-3000:]
        done = next(e for e in events if e["event"] == "done")
        precision = done["precision"]
        assert precision["compute_dtype"] == "bfloat16"
        assert precision["param_dtype"] == "float32"
        assert precision["amp_cast_ops"] > 0
        assert precision["last_layer_dtype"] == "bfloat16"
        assert precision["autocast"].startswith("cpu/bfloat16")
        if "gflops" in done:  # model_stats reads the AMP-rewritten graph (amp_cast before each conv)
            assert done["gflops"] == pytest.approx(RESNET20_GFLOPS_32, rel=1e-6)
        assert all(e["throughput"] > 0 for e in events if e["event"] == "window")
    else:
        # MXNet 1.9.1 has bf16 kernels only in oneDNN, for AVX-512 CPUs: the worker's own probe (the backstop
        # behind the orchestrator's capability check) gives a clear config error, not a silent float32 run.
        assert rc == 3, stderr[-3000:]
        error = next(e for e in events if e["event"] == "error")
        assert error["kind"] == "config"
        assert "bfloat16" in error["message"] and "AVX-512" in error["message"]


def test_bfloat16_outputs_are_read_back_as_their_values() -> None:
    """bfloat16's numpy dtype in MXNet is a record of one uint16; the bench's read-back must give the values,
    not the bits (which rank every negative logit above every positive one)."""
    script = """
import json
import numpy as np
from dlbench.backends.mxnet._compat import mx
from dlbench.backends.mxnet.bench import _float32_host
from dlbench.backends.mxnet.precision import np_dtype
logits = mx.nd.amp_cast(mx.nd.array([[1.5, -2.0, 0.25], [-0.5, 3.0, -4.0]]), dtype=np_dtype("bfloat16"))
out = _float32_host(logits)
print("STATS " + json.dumps({"values": out.tolist(), "dtype": str(out.dtype)}))
"""
    got = run_snippet(script, worker_env())
    assert got == {"values": [[1.5, -2.0, 0.25], [-0.5, 3.0, -4.0]], "dtype": "float32"}
