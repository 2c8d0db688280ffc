"""Running one framework's worker, or a snippet, in a subprocess: frameworks never share a process
(triton, shipped with torch, segfaults when loaded after TensorFlow), and tests often run several at once."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from dlbench.backends.base import BACKENDS
from dlbench.backends.interpreter import worker_python
from dlbench.config import FRAMEWORK_CONFIGS, JobConfig
from dlbench.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
TEST_WORKLOADS = (
    "tests.workloads.mlp"  # registered in the subprocess by dlbench's registry ($DLBENCH_WORKLOADS)
)


def worker_env(**threads: str) -> dict[str, str]:
    """dlbench and the test-only workload importable, plus per-framework thread caps so parallel
    subprocesses do not thrash."""
    env = dict(os.environ, DLBENCH_WORKLOADS=TEST_WORKLOADS)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SRC), str(ROOT), env.get("PYTHONPATH")]))
    env.update(threads)
    return env


def framework_pythons(frameworks) -> dict[str, str]:
    """framework -> the interpreter its worker runs under, for those that can run here (JAX: its own
    environment, .venv-jax, unless this interpreter imports jax)."""
    found = {}
    for fw in frameworks:
        try:
            python = worker_python(FRAMEWORK_CONFIGS[fw]())
        except ConfigError:
            continue
        if python != sys.executable or importlib.util.find_spec(BACKENDS[fw][1]) is not None:
            found[fw] = python
    return found


def tiny_job(framework: str, spec: dict, depth: int = 8) -> JobConfig:
    """A CIFAR ResNet at 32x32, batch 2, 1 warm-up step, 2 windows of 2 steps, on the CPU."""
    knobs = {"hybridize": spec.get("hybridize", True)} if framework == "mxnet" else {}
    job = JobConfig.from_dict({"framework": {"name": framework, **knobs}})
    job.model.name, job.model.depth, job.model.image_size, job.model.num_classes = (
        "resnet_cifar",
        depth,
        32,
        10,
    )
    s = job.schedule
    s.batch_size, s.warmup_steps, s.steps_per_window, s.windows = 2, 1, 2, 2
    job.mode, job.device, job.precision = spec["mode"], "cpu", spec["precision"]
    job.threads = 1  # tests run several workers at once: one thread each (the env caps say the same)
    return job


def run_worker(
    job: JobConfig, path: Path, env: dict[str, str], timeout: float = 300, python: str = sys.executable
) -> tuple[int, list[dict], str]:
    """`python -m dlbench.worker` with events on stdout: (exit code, events, stderr)."""
    path.write_text(json.dumps(job.to_dict()))
    proc = subprocess.run(
        [python, "-m", "dlbench.worker", "--job", str(path), "--events-fd", "1"],
        capture_output=True, text=True, env=env, timeout=timeout,
    )  # fmt: skip
    events = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    return proc.returncode, events, proc.stderr


def run_snippet(
    script: str,
    env: dict[str, str],
    marker: str = "STATS ",
    timeout: float = 300,
    python: str = sys.executable,
) -> dict:
    """Run python code in a subprocess (under `python`, e.g. JAX's own environment); return the JSON it
    printed after `marker`."""
    proc = subprocess.run([python, "-c", script], capture_output=True, text=True, env=env, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith(marker))
    return json.loads(line.removeprefix(marker))


def run_all(
    framework: str, jobs: dict[str, dict], stats_script: str, tmp: Path, env: dict[str, str], depth: int = 8
) -> dict:
    """The stats snippet and every job's worker at once: {"stats": ..., name: (rc, events, stderr)}."""
    with ThreadPoolExecutor(max_workers=len(jobs) + 1) as pool:
        stats = pool.submit(run_snippet, stats_script, env)
        workers = {
            name: pool.submit(run_worker, tiny_job(framework, spec, depth), tmp / f"{name}.json", env)
            for name, spec in jobs.items()
        }
        return {"stats": stats.result(), **{name: f.result() for name, f in workers.items()}}


def cuda_probe(framework: str, indent: str = "") -> str:
    """Snippet lines that build `framework` with device=cuda and put "built" or the one-line refusal in
    out["cuda"]. The snippet must have imported build, JobConfig and BackendUnavailable, and made `out`."""
    lines = f"""
        job = JobConfig.from_dict({{"framework": {{"name": "{framework}"}}}})
        job.device = "cuda"
        try:
            build(job)
            out["cuda"] = "built"
        except BackendUnavailable as exc:
            out["cuda"] = str(exc)
    """
    return textwrap.indent(textwrap.dedent(lines).strip("\n"), indent) + "\n"
