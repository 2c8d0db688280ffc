"""The JAX backend on CPU: the networks equal the torch ones, and real jobs run through the worker under the
interpreter framework=jax resolves to (this one if it imports jax, else the project's .venv-jax).

JAX runs only in subprocesses, as in real use (its own environment: numpy >= 2). They run side by side,
one compute thread each.
"""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from dlbench.backends.interpreter import worker_python
from dlbench.config import JaxConfig, PrecisionConfig
from dlbench.errors import ConfigError
from dlbench.workloads.detection.spec import DetectionConfig
from tests.worker_jobs import run_snippet, run_worker, tiny_job, worker_env

try:
    PYTHON = worker_python(JaxConfig())
except ConfigError as exc:
    pytest.skip(str(exc), allow_module_level=True)

# torchvision's and the torch CifarResNet's counts (test_backend_tf.py says how they were measured)
TORCH_PARAMS = {"resnet50": 25_557_032, "vgg16": 134_301_514, "resnet_cifar": 853_018}  # vgg16: 10 classes
TORCH_GFLOPS_32 = {"resnet50": 0.170917888, "vgg16": 0.865550336, "resnet_cifar": 0.250971392}
RESNET8_CIFAR_PARAMS = 75_290

STATS_SCRIPT = """
import json
from dlbench.backends.jax import build, model_stats
from dlbench.config import JobConfig
from dlbench.errors import BackendUnavailable
from dlbench.workloads.classification.spec import ClassificationConfig
out = {}
for name, classes in (("resnet50", 1000), ("vgg16", 10), ("resnet_cifar", 10)):
    cfg = ClassificationConfig(name=name, image_size=32, num_classes=classes, depth=56 if name == "resnet_cifar" else None)
    out[name] = model_stats(cfg)
job = JobConfig.from_dict({"framework": {"name": "jax"}, "device": "cuda"})
try:
    build(job)
    out["cuda"] = "built"
except BackendUnavailable as exc:
    out["cuda"] = str(exc)
print("STATS " + json.dumps(out))
"""

AMP = PrecisionConfig(name="amp", autocast=True, dtype="float16", cpu_dtype="bfloat16", loss_scale="dynamic")
# float16 with dynamic loss scaling, what amp means on a GPU, forced onto the CPU
FP16 = PrecisionConfig(name="amp", autocast=True, dtype="float16", cpu_dtype="float16", loss_scale="dynamic")

JOBS = {
    "train_fp32": {"mode": "train", "precision": PrecisionConfig(), "compute": "float32"},
    "train_amp": {"mode": "train", "precision": AMP, "compute": "bfloat16"},
    "infer_amp": {"mode": "infer", "precision": AMP, "compute": "bfloat16"},
    "train_fp16": {"mode": "train", "precision": FP16, "compute": "float16"},
    "train_eager": {"mode": "train", "precision": PrecisionConfig(), "compute": "float32", "jit": False},
    "train_threefry": {
        "mode": "train",
        "precision": PrecisionConfig(),
        "compute": "float32",
        "prng": "threefry2x32",
    },
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict:
    tmp: Path = tmp_path_factory.mktemp("jax_jobs")
    env = worker_env(OMP_NUM_THREADS="1")
    with ThreadPoolExecutor(max_workers=3) as pool:
        stats = pool.submit(run_snippet, STATS_SCRIPT, env, python=PYTHON)
        workers = {}
        for name, spec in JOBS.items():
            job = tiny_job("jax", spec)
            job.framework.jit = spec.get("jit", True)
            job.framework.prng = spec.get("prng", "rbg")
            workers[name] = pool.submit(run_worker, job, tmp / f"{name}.json", env, python=PYTHON)
        return {"stats": stats.result(), **{name: f.result() for name, f in workers.items()}}


@pytest.mark.parametrize("model", sorted(TORCH_PARAMS))
def test_params_and_flops_equal_torch_networks(runs: dict, model: str) -> None:
    stats = runs["stats"][model]
    assert stats["params"] == TORCH_PARAMS[model]
    # conv + dense of the jaxpr; VGG16's adaptive pooling at 32 px adds an einsum torch does not count
    assert stats["gflops"] == pytest.approx(TORCH_GFLOPS_32[model], rel=1e-3)


def test_device_cuda_is_refused_in_one_line_without_a_gpu(runs: dict) -> None:
    message = runs["stats"]["cuda"]
    if message == "built":
        pytest.skip("a GPU is visible to JAX here")
    assert message.startswith("framework=jax device=cuda: ") and "\n" not in message


def _events(run: tuple) -> dict[str, list[dict]]:
    rc, events, stderr = run
    assert rc == 0, stderr[-3000:]
    by_kind: dict[str, list[dict]] = {}
    for e in events:
        by_kind.setdefault(e["event"], []).append(e)
    return by_kind


@pytest.mark.parametrize("name", sorted(JOBS))
def test_jobs_run_through_the_worker(runs: dict, name: str) -> None:
    by_kind = _events(runs[name])
    spec = JOBS[name]
    built = by_kind["built"][0]
    assert built["params"] == RESNET8_CIFAR_PARAMS and built["device"] == "cpu"
    assert built["versions"]["jax"].startswith("0.") and "flax" in built["versions"]
    assert built["threads"] == {"intra_op": 1, "inter_op": 1}  # XLA's pool, counted after it started
    windows = by_kind["window"]
    assert len(windows) == 2 and all(w["throughput"] > 0 for w in windows)
    done = by_kind["done"][0]
    precision = done["precision"]
    assert precision["compute_dtype"] == spec["compute"]  # read while the step was traced
    assert precision["first_layer"] == "stem_conv (Conv)" and precision["last_layer"] == "logits (Dense)"
    assert precision["first_layer_dtype"] == precision["last_layer_dtype"] == spec["compute"]
    assert precision["param_dtype"] == "float32"
    # true FP32 dots for a float32 network; XLA's default where no float32 dot remains
    assert precision["matmul_precision"] == ("highest" if spec["compute"] == "float32" else "default")
    assert precision["tf32_matmul"] is False
    assert done["framework_mem_bytes"] is None
    run = done["run"]
    assert run["compiled"] == ("jit" if spec.get("jit", True) else False)
    assert run["donated"] == (spec["mode"] == "train" and spec.get("jit", True))
    # the step's key, read back from the state the step carries: framework.prng, rbg unless set
    assert run.get("prng") == (spec.get("prng", "rbg") if spec["mode"] == "train" else None)
    if spec["mode"] == "train":
        assert all(w["loss"] > 0 for w in windows)
        assert run["optimizer"] == "sgd/optax"
    else:
        assert all(w["loss"] is None for w in windows)


def test_float16_trains_with_a_dynamic_loss_scale(runs: dict) -> None:
    precision = _events(runs["train_fp16"])["done"][0]["precision"]
    assert precision["loss_scale"].startswith("dynamic (scale=")
    assert _events(runs["train_amp"])["done"][0]["precision"]["loss_scale"] == "none"  # bfloat16


def test_the_jitted_step_compiles_once(runs: dict) -> None:
    """The warm-up step compiles; a second compilation would make a timed window as slow as warm-up."""
    by_kind = _events(runs["train_fp32"])
    per_step = [w["seconds"] / w["steps"] for w in by_kind["window"]]
    assert max(per_step) < by_kind["warmup_done"][0]["warmup_s"] / 5, (per_step, by_kind["warmup_done"])


def test_the_interpreter_is_configured_or_found_or_named_in_one_line(tmp_path: Path) -> None:
    assert worker_python(JaxConfig(python="/opt/py/bin/python")) == "/opt/py/bin/python"
    assert worker_python(JaxConfig(name="torch")) == sys.executable  # shares this environment
    with pytest.raises(ConfigError, match=r"^framework=jax: .* run `make setup` \(it makes \.venv-jax\)"):
        worker_python(JaxConfig(), root=tmp_path, importable=False)
    (tmp_path / ".venv-jax" / "bin").mkdir(parents=True)
    (tmp_path / ".venv-jax" / "bin" / "python").touch()
    assert worker_python(JaxConfig(), root=tmp_path, importable=False) == str(
        tmp_path / ".venv-jax" / "bin" / "python"
    )


def test_a_dali_fed_job_on_a_folder_without_images_is_one_line(tmp_path: Path) -> None:
    """JAX reads real data through DALI (tests/e2e/test_data_cli.py trains on a folder); a folder DALI
    cannot read is the same one config line the other frameworks give, not a traceback."""
    job = tiny_job("jax", {"mode": "train", "precision": PrecisionConfig()})
    job.dataset.name, job.dataset.format, job.dataset.path = "imagenet", "folder", str(tmp_path)
    rc, events, _ = run_worker(job, tmp_path / "job.json", worker_env(OMP_NUM_THREADS="1"), python=PYTHON)
    error = next(e for e in events if e["event"] == "error")
    assert rc == 3 and error["kind"] == "config", error
    assert str(tmp_path) in error["message"] and "\n" not in error["message"]


def test_ssd300_inference_with_decoding_and_nms_runs_in_the_worker(tmp_path: Path) -> None:
    """model.postprocess=true: decoding + NMS traced into the jitted inference step, through the worker."""
    job = tiny_job("jax", {"mode": "infer", "precision": PrecisionConfig()})
    job.model = DetectionConfig(image_size=32, batch_size=2, postprocess=True)
    rc, events, stderr = run_worker(
        job, tmp_path / "job.json", worker_env(OMP_NUM_THREADS="1"), python=PYTHON
    )
    assert rc == 0, stderr[-3000:]
    windows = [e for e in events if e["event"] == "window"]
    assert len(windows) == 2 and all(w["samples"] == 4 for w in windows)


def test_the_cuda_plugin_version_is_written_as_torch_and_tf_write_theirs():
    from dlbench.backends.jax import cuda_version

    assert cuda_version("cuda 13000") == "13.0" and cuda_version("cuda 12080") == "12.8"
    assert cuda_version("rocm 6.3") == "rocm 6.3"  # not CUDA's integer: as it is
