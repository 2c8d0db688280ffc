"""The TensorFlow backend on CPU: the networks equal the torch ones, and real jobs run through the worker.

TensorFlow runs only in subprocesses (as in real use: one worker process per job), never in the
pytest process: loading triton (shipped with torch) after TensorFlow in one process segfaults, and
other test files import torch. The subprocesses run side by side, one compute thread each.
"""

from __future__ import annotations

import importlib.util

import pytest

from dlbench.config import PrecisionConfig
from tests.worker_jobs import cuda_probe, run_all, worker_env

if importlib.util.find_spec("tensorflow") is None:
    pytest.skip("tensorflow is not installed in this interpreter", allow_module_level=True)


# Reference values, from torchvision (resnet50, vgg16) and the torch backend's CifarResNet (option A),
# counted with requires_grad parameters; FLOPs from torch.utils.flop_counter at batch 1 (conv + linear,
# multiply-add = 2), all measured with torch 2.14.1 / torchvision 0.29.1.
TORCH_PARAMS = {
    ("resnet50", 1000): 25_557_032,
    ("resnet50", 10): 23_528_522,
    ("vgg16", 1000): 138_357_544,
    ("vgg16", 10): 134_301_514,
    ("resnet_cifar", 10): 853_018,  # depth 56
    ("resnet_cifar", 1000): 917_368,
}
RESNET8_CIFAR_PARAMS = 75_290
TORCH_GFLOPS_32 = {"resnet50": 0.170917888, "vgg16": 0.865550336, "resnet_cifar": 0.250971392}

STATS_SCRIPT = (
    """
import json
from dlbench.errors import BackendUnavailable
from dlbench.backends.tensorflow import build, model_stats
from dlbench.backends.tensorflow.family import trainable_params
from dlbench.workloads.classification.tensorflow import build_model
from dlbench.config import JobConfig
from dlbench.workloads.classification.spec import ClassificationConfig

def spec(name, classes):
    return ClassificationConfig(name=name, image_size=32, num_classes=classes, depth=56 if name == "resnet_cifar" else None)

out = {"stats": {}, "params": {}}
# model_stats builds (and counts) one class count per model; build_model the other.
for name, classes in (("resnet50", 1000), ("vgg16", 10), ("resnet_cifar", 10)):
    out["stats"][name] = model_stats(spec(name, classes))
    out["params"][f"{name}/{classes}"] = out["stats"][name]["params"]
for name, classes in (("resnet50", 10), ("vgg16", 1000), ("resnet_cifar", 1000)):
    out["params"][f"{name}/{classes}"] = trainable_params(build_model(spec(name, classes)))
import tensorflow as tf
if not tf.config.list_physical_devices("GPU"):
"""
    + cuda_probe("tf", indent="    ")
    + """print("STATS " + json.dumps(out))
"""
)

AMP = PrecisionConfig(name="amp", autocast=True, dtype="float16", cpu_dtype="bfloat16", loss_scale="dynamic")

JOBS = {
    "train_fp32": {"mode": "train", "precision": PrecisionConfig(), "compute": "float32"},
    "train_amp": {"mode": "train", "precision": AMP, "compute": "bfloat16"},
    "infer_amp": {"mode": "infer", "precision": AMP, "compute": "bfloat16"},
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict:
    # Several processes share the CPU here: one compute thread each keeps them from thrashing.
    env = worker_env(
        OMP_NUM_THREADS="1", TF_NUM_INTRAOP_THREADS="1", TF_NUM_INTEROP_THREADS="1", TF_CPP_MIN_LOG_LEVEL="2"
    )
    return run_all("tf", JOBS, STATS_SCRIPT, tmp_path_factory.mktemp("tf_jobs"), env, depth=8)


@pytest.mark.parametrize(("model", "classes"), sorted(TORCH_PARAMS))
def test_params_equal_torch_networks(runs: dict, model: str, classes: int) -> None:
    # vgg16 is built at 32x32: adaptive pooling to 7x7 keeps its 25088-input classifier
    assert runs["stats"]["params"][f"{model}/{classes}"] == TORCH_PARAMS[(model, classes)]


@pytest.mark.parametrize("model", sorted(TORCH_GFLOPS_32))
def test_flops_from_tf_profiler_equal_torch(runs: dict, model: str) -> None:
    stats = runs["stats"]["stats"][model]
    assert stats["gflops"] == pytest.approx(TORCH_GFLOPS_32[model], rel=1e-6)
    assert stats["flops_by_op"]["Conv2D"] > 0 and stats["flops_by_op"]["MatMul"] > 0
    assert stats["gflops_all"] >= stats["gflops"]


def test_device_cuda_is_refused_in_one_line_without_a_gpu(runs: dict) -> None:
    message = runs["stats"].get("cuda")
    if message is None:
        pytest.skip("a GPU is visible to TensorFlow here")
    assert message.startswith("framework=tf device=cuda: ")
    assert "\n" not in message


@pytest.mark.parametrize("name", sorted(JOBS))
def test_jobs_run_through_the_worker(runs: dict, name: str) -> None:
    rc, events, stderr = runs[name]
    assert rc == 0, stderr[-3000:]
    by_kind: dict[str, list[dict]] = {}
    for e in events:
        by_kind.setdefault(e["event"], []).append(e)
    built = by_kind["built"][0]
    assert built["params"] == RESNET8_CIFAR_PARAMS
    assert built["device"] == "cpu"
    assert built["versions"]["tensorflow"].startswith("2.")
    windows = by_kind["window"]
    assert len(windows) == 2 and all(w["throughput"] > 0 for w in windows)
    precision = by_kind["done"][0]["precision"]
    # observed on the real output tensors of the first and last weight-carrying layers
    assert precision["compute_dtype"] == JOBS[name]["compute"]
    assert precision["first_layer"] == "stem_conv (Conv2D)" and precision["last_layer"] == "logits (Dense)"
    assert precision["first_layer_dtype"] == precision["last_layer_dtype"] == JOBS[name]["compute"]
    assert precision["param_dtype"] == "float32"  # fp32, or mixed precision's float32 master weights
    assert precision["loss_scale"] == "none"  # bfloat16 on CPU needs no loss scaling
    assert precision["tf32"] is False
    assert by_kind["done"][0]["framework_mem_bytes"] is None
    run = by_kind["done"][0]["run"]
    assert run["xla"] is False and run["unit"] == "images"
    assert run["optimizer"] == ("sgd" if JOBS[name]["mode"] == "train" else "none")
    if JOBS[name]["mode"] == "train":
        assert all(w["loss"] > 0 for w in windows)
    else:
        assert all(w["loss"] is None for w in windows)
