"""model.init_weights: every framework starts from one file of framework-neutral weights, so the first
step's loss on the same batch (the spec's numpy synthetic batch, seed 0 everywhere) is the same in torch,
TensorFlow, MXNet and JAX. Real workers, one subprocess per framework (JAX's under its own interpreter), on
the CPU."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from dlbench.config import JobConfig
from dlbench.workloads.classification.small_cnn_plan import SmallCnnSizes, initial_weights
from tests.worker_jobs import framework_pythons, run_snippet, run_worker, worker_env

FRAMEWORKS = ("torch", "tf", "mxnet", "jax")
PYTHONS = framework_pythons(FRAMEWORKS)
SIZES = SmallCnnSizes(image_size=8, channels=1, num_classes=10)
ENV = worker_env(OMP_NUM_THREADS="1", TF_NUM_INTRAOP_THREADS="1", TF_NUM_INTEROP_THREADS="1")


def _job(framework: str, init: Path | None, model: str = "small_cnn") -> JobConfig:
    # ResNet-50 at 64x64: its last stage is 2x2, so BatchNorm averages 16 numbers per channel (at 32x32, 4:
    # MXNet then drifts 2.6e-4 relative from torch and TF, amplified fp32 rounding, not a mapping error)
    image = {"small_cnn": 8, "resnet50": 64}.get(model, 32)
    sizes = (
        {"image_size": image, "channels": 1} if model == "small_cnn" else {"image_size": image, "depth": 8}
    )
    sizes["num_classes"] = 10
    job = JobConfig.from_dict(
        {
            "framework": {"name": framework},
            "model": {"name": model, "task": "classification", **sizes, "init_weights": init and str(init)},
        }
    )
    s = job.schedule
    s.batch_size, s.warmup_steps, s.steps_per_window, s.windows = 4, 0, 1, 1
    job.mode, job.device, job.threads = "train", "cpu", 1
    return job


def _first_losses(tmp: Path, init: Path | None, model: str = "small_cnn") -> dict[str, float]:
    def one(fw: str) -> float:
        rc, events, err = run_worker(
            _job(fw, init, model), tmp / f"{fw}-{model}-{init is not None}.json", ENV, python=PYTHONS[fw]
        )
        assert rc == 0, err[-3000:]
        (window,) = [e for e in events if e.get("event") == "window"]
        return float(window["loss"])

    with ThreadPoolExecutor(max_workers=2) as pool:  # two cores: four workers at once only thrash
        return dict(zip(FRAMEWORKS, pool.map(one, FRAMEWORKS), strict=True))


@pytest.fixture(scope="module")
def weights_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("init") / "small_cnn.npz"
    weights = initial_weights(SIZES, seed=7)
    weights = {k: v + np.float32(0.01) if k.endswith(".bias") else v for k, v in weights.items()}  # not zero
    np.savez(path, **weights)
    return path


CIFAR_WEIGHTS = """
import numpy as np, torch
from dlbench.config import JobConfig
from dlbench.workloads.classification.torch import ClassificationTorch
job = JobConfig.from_dict({"model": {"name": "MODEL", "depth": 8, "image_size": 32, "num_classes": 10}})
torch.manual_seed(11)
family = ClassificationTorch()
model = family.build_model(job.model)
with torch.no_grad():  # BN away from its identity start, so a wrong mapping of gamma/beta shows
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.weight.uniform_(0.5, 1.5); m.bias.uniform_(-0.2, 0.2)
np.savez("PATH", **family.export_weights(model))
print("STATS {}")
"""


def _resnet_weights(tmp: Path, model: str) -> Path:
    path = tmp / f"{model}.npz"
    run_snippet(CIFAR_WEIGHTS.replace("PATH", str(path)).replace("MODEL", model), ENV)
    return path


def test_the_cifar_resnet_from_the_same_weights_gives_the_same_first_loss(tmp_path):
    """The ResNet family's exchange (layers by order and kind, each framework converting its layout)."""
    path = _resnet_weights(tmp_path, "resnet_cifar")
    loaded = _first_losses(tmp_path, path, "resnet_cifar")
    for fw in FRAMEWORKS[1:]:
        assert loaded[fw] == pytest.approx(loaded["torch"], rel=1e-4), loaded
    default = _first_losses(tmp_path, None, "resnet_cifar")  # each framework's own initialisation
    assert all(abs(default[fw] - loaded[fw]) > 1e-3 for fw in FRAMEWORKS[1:]), (default, loaded)


def test_resnet50_from_the_same_weights_gives_the_same_first_loss(tmp_path):
    """ResNet-50 v1.5 at 64x64: its own initialisation differs per framework, one file makes them agree."""
    loaded = _first_losses(tmp_path, _resnet_weights(tmp_path, "resnet50"), "resnet50")
    for fw in FRAMEWORKS[1:]:
        assert loaded[fw] == pytest.approx(loaded["torch"], rel=1e-4), loaded


def test_one_step_from_the_same_weights_gives_the_same_loss_everywhere(weights_file, tmp_path):
    loaded = _first_losses(tmp_path, weights_file)
    for fw in FRAMEWORKS[1:]:
        assert loaded[fw] == pytest.approx(loaded["torch"], rel=1e-4), loaded
    default = _first_losses(tmp_path, None)  # the seed-0 weights every framework builds by itself
    assert abs(default["torch"] - loaded["torch"]) > 1e-3  # the file, not the default, was used


def test_a_model_without_an_exchange_or_a_bad_file_is_one_line(weights_file, tmp_path):
    rc, events, err = run_worker(_job("torch", weights_file, "vgg16"), tmp_path / "vgg.json", ENV)
    failed = [e for e in events if e.get("event") == "failed" or "message" in e]
    text = " ".join(str(e.get("message", "")) for e in failed) + err
    assert rc != 0 and "has no framework-neutral weight exchange in torch yet" in text
    bad = tmp_path / "wrong.npz"
    np.savez(bad, nothing=np.zeros(3, np.float32))
    rc, events, err = run_worker(_job("tf", bad), tmp_path / "bad.json", ENV)
    text = " ".join(str(e.get("message", "")) for e in events) + err
    assert rc != 0 and f"model.init_weights={bad}: cannot load it" in text


def test_a_missing_file_is_refused_before_a_worker_starts(tmp_path):
    from dlbench.config import validate
    from dlbench.errors import ConfigError

    with pytest.raises(ConfigError, match="model.init_weights=.*: no such file"):
        validate(_job("torch", tmp_path / "absent.npz"))
