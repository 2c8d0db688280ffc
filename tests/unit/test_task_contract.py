"""The contract every (framework, task) pair must keep: build, train and infer steps, sync, a loss, units
counted on the host, a precision report read from real layer outputs, run facts apart from precision
facts, and the same parameter count in every framework. Each framework runs in its own subprocess.

A new workload registers its smallest config (`Workload(smallest=...)`); the test then drives it through
every framework with no edit here (docs/architecture.md, "Adding a workload"), JAX under the interpreter its
worker resolves to. Only the (framework, task) pairs the selected tests need are run (`-k jax` runs JAX's alone).
"""

from __future__ import annotations

import json
import math
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from dlbench.config import JobConfig
from dlbench.data.synthetic import synthetic_batch
from dlbench.workloads.registry import task_spec, workloads
from tests.conftest import MXNET_BF16, TF_BF16
from tests.worker_jobs import framework_pythons, run_snippet, run_worker, worker_env

TASKS = workloads()  # every registered workload, the test-only one included (tests/conftest.py)

PYTHONS = framework_pythons(("torch", "tf", "mxnet", "jax"))  # framework -> its worker's interpreter
FRAMEWORKS = list(PYTHONS)
# The smallest config of each registered task's family (CPU, a few milliseconds a step), as it registered it.
TINY = {task: w.smallest_config() for task, w in TASKS.items()}
STEPS = 3

SCRIPT = """
import json, sys
from dlbench.backends.base import load_backend
from dlbench.errors import BackendUnavailable
from dlbench.config import JobConfig, PrecisionConfig

jobs = json.loads(sys.argv[1])
backend = load_backend(jobs["fp32_train"]["framework"]["name"])
out = {"stats": backend.model_stats(JobConfig.from_dict(jobs["fp32_train"]).model)}
for name, data in jobs.items():
    job = JobConfig.from_dict(data)
    try:
        bench = backend.build(job)
    except BackendUnavailable as exc:
        out[name] = {"unavailable": str(exc)}
        continue
    try:
        units = [bench.units()]
        for _ in range(STEPS):
            bench.step()
            units.append(bench.units())
        bench.sync()
        out[name] = {
            "units": units, "unit": bench.unit, "loss": bench.loss(), "params": bench.params(),
            "precision": bench.precision_report(), "run": bench.run_facts(), "device": bench.device,
        }
    finally:
        bench.close()
print("STATS " + json.dumps(out, default=str))
""".replace("STEPS", str(STEPS))

AMP = {"name": "amp", "autocast": True, "dtype": "float16", "cpu_dtype": "bfloat16", "loss_scale": "dynamic"}


def _job(framework: str, task: str, mode: str, precision: dict | None = None) -> JobConfig:
    job = JobConfig.from_dict({"model": {**TINY[task].__dict__}, "framework": {"name": framework}})
    job.mode, job.device = mode, "cpu"
    if precision:
        job.precision = JobConfig.from_dict({"precision": precision}).precision
    s = job.schedule
    s.warmup_steps, s.steps_per_window, s.windows = 1, 2, 2
    return job


def _run(framework: str, task: str, tmp: Path) -> dict:
    jobs = {
        "fp32_train": _job(framework, task, "train"),
        "fp32_infer": _job(framework, task, "infer"),
        "amp_train": _job(framework, task, "train", AMP),
    }
    env = worker_env(OMP_NUM_THREADS="1", MXNET_CPU_WORKER_NTHREADS="1", TF_NUM_INTRAOP_THREADS="1",
                     TF_NUM_INTEROP_THREADS="1", TF_CPP_MIN_LOG_LEVEL="2")  # fmt: skip
    # XLA's programs kept on disk for this module: the worker's step is the snippet's fp32 one, compiled
    # again otherwise (JAX's SSD300 pair took 110 s without, 72 s with, alone on a 2-core machine); no
    # test here times a step
    env["JAX_COMPILATION_CACHE_DIR"] = str(tmp / "jax_cache")
    arg = json.dumps({k: j.to_dict() for k, j in jobs.items()})
    # SSD300's graph takes TensorFlow minutes to trace three times on a loaded 2-core machine
    limit = 900 if task == "detection" else 300
    python = PYTHONS[framework]
    out = run_snippet(f"import sys; sys.argv = ['x', {arg!r}]\n" + SCRIPT, env, timeout=limit, python=python)
    # and the real worker, which rebuilds the family's config from JSON and reports the unit
    path = tmp / f"{framework}-{task}.json"
    out["worker"] = run_worker(jobs["fp32_train"], path, env, timeout=limit, python=python)
    return out


def _needed(items: list[pytest.Item]) -> list[tuple[str, str]]:
    """The (framework, task) pairs the selected tests of this module read; a test over a task without a
    framework compares them all."""
    pairs: dict[tuple[str, str], None] = {}
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if getattr(item.module, "__name__", None) != __name__ or "task" not in params:
            continue
        for fw in [params["framework"]] if "framework" in params else FRAMEWORKS:
            pairs[(fw, params["task"])] = None
    return list(pairs)


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> dict:
    tmp = tmp_path_factory.mktemp("contract")
    pairs = _needed(request.session.items)
    with ThreadPoolExecutor(max_workers=3) as pool:
        futures = {pair: pool.submit(_run, *pair, tmp) for pair in pairs}
        return {pair: f.result() for pair, f in futures.items()}


def test_every_registered_task_names_its_smallest_config():
    missing = [task for task, w in TASKS.items() if not w.smallest]
    assert not missing, f"register these workloads with smallest={{...}} (their smallest config): {missing}"


@pytest.mark.parametrize("task", sorted(TASKS))
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_train_and_infer_steps_count_units_and_report_precision(results: dict, framework: str, task: str):
    spec = task_spec(TINY[task])
    per_batch = synthetic_batch(spec, TINY[task].batch_size).units
    assert per_batch > 0
    for name in ("fp32_train", "fp32_infer"):
        r = results[(framework, task)][name]
        unit = spec.unit if name.endswith("train") else spec.infer_unit or spec.unit
        assert r["device"] == "cpu" and r["unit"] == unit
        assert r["units"] == [i * per_batch for i in range(STEPS + 1)]  # counted per step, on the host
        if name.endswith("train"):
            assert isinstance(r["loss"], float) and math.isfinite(r["loss"])
            assert r["run"]["optimizer"].startswith(spec.optimizer.kind)
        else:
            assert r["loss"] is None and r["run"]["optimizer"] == "none"
        p = r["precision"]
        assert p["compute_dtype"] == p["first_layer_dtype"] == p["last_layer_dtype"] == "float32"
        assert p["first_layer"] != p["last_layer"]  # two different weight-carrying layers were seen
        assert p["param_dtype"] == "float32" and p["loss_scale"] == "none"
        assert "optimizer" not in p and "data_skipped" not in p  # run facts travel apart
        assert r["run"]["task"] == task and r["run"]["unit"] == unit


@pytest.mark.parametrize("task", sorted(TASKS))
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_mixed_precision_is_verified_on_real_outputs(results: dict, framework: str, task: str):
    r = results[(framework, task)]["amp_train"]
    if "unavailable" in r:  # MXNet computes bfloat16 only with AVX-512 oneDNN kernels; TF fails under a cap
        expected = {"mxnet": not MXNET_BF16, "tf": not TF_BF16}.get(framework, False)
        assert expected and "bfloat16" in r["unavailable"] and "\n" not in r["unavailable"]
        return
    p = r["precision"]
    assert p["compute_dtype"] == "bfloat16" and p["param_dtype"] == "float32"
    assert p["autocast"] != "off" and p["loss_scale"] == "none"  # bf16 needs no loss scaling


@pytest.mark.parametrize("task", sorted(TASKS))
def test_the_network_is_the_same_in_every_framework(results: dict, task: str):
    params = {fw: results[(fw, task)]["fp32_train"]["params"] for fw in FRAMEWORKS}
    stats = {fw: results[(fw, task)]["stats"]["params"] for fw in FRAMEWORKS}
    assert len(set(params.values())) == 1, params
    assert stats == params
    gflops = [results[(fw, task)]["stats"]["gflops"] for fw in FRAMEWORKS]
    assert max(gflops) <= 1.02 * min(gflops), gflops


@pytest.mark.parametrize("task", sorted(TASKS))
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_the_worker_runs_the_task_and_reports_its_unit(results: dict, framework: str, task: str):
    rc, events, stderr = results[(framework, task)]["worker"]
    assert rc == 0, stderr[-3000:]
    built = next(e for e in events if e["event"] == "built")
    assert built["unit"] == task_spec(TINY[task]).unit
    windows = [e for e in events if e["event"] == "window"]
    per_batch = synthetic_batch(task_spec(TINY[task]), TINY[task].batch_size).units
    assert [w["samples"] for w in windows] == [2 * per_batch, 2 * per_batch]
    done = next(e for e in events if e["event"] == "done")
    assert done["precision"]["compute_dtype"] == "float32" and done["run"]["task"] == task
