"""scripts/tools/jax_decode_windows.py and tf_decode_windows.py on the CPU: a tiny decoding job of the framework
through the real CLI, then the script on that job's job.json: every kind of window, with rates and the harness's
per-step figures; a job of another kind is refused in one line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dlbench.backends.interpreter import worker_python
from dlbench.config import JaxConfig, TFConfig
from dlbench.errors import ConfigError

pytestmark = pytest.mark.slow
TOOLS = Path(__file__).resolve().parents[2] / "scripts" / "tools"


def script(framework: str) -> Path:
    return TOOLS / f"{framework}_decode_windows.py"


def job_args(framework: str) -> list[str]:
    return [
        f"framework={framework}",
        "model=transformer",
        "model.size=tiny",
        "model.lengths=fixed",
        "model.max_len=16",
        "model.batch_tokens=64",
        "mode=infer",
        "device=cpu",
        "threads=1",
        "schedule.warmup_steps=1",
        "schedule.steps_per_window=1",
        "schedule.windows=1",
        "report.enabled=false",
        "telemetry.enabled=false",
    ]


def windows(cli, framework: str, config) -> list[dict]:
    """The tool's WINDOW lines on a tiny decoding job of `framework` run through the CLI (skips without
    the framework's interpreter)."""
    try:
        python = worker_python(config)
    except ConfigError as exc:
        pytest.skip(str(exc))
    res = cli.run(job_args(framework), timeout=600)
    assert res.returncode == 0, (res.stdout + res.stderr)[-3000:]
    (job,) = (cli.tmp / "sweep").rglob("job.json")
    proc = subprocess.run(
        [python, str(script(framework)), str(job), "--steps", "2", "--windows", "2"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [json.loads(ln[len("WINDOW ") :]) for ln in proc.stdout.splitlines() if ln.startswith("WINDOW ")]


def test_jax_windows_of_every_kind_on_a_tiny_decoding_job(cli):
    lines = windows(cli, "jax", JaxConfig())
    kinds = [ln["kind"] for ln in lines]
    for kind in ("harness", "harness_gc_off", "direct_read", "direct_no_read", "harness_again"):
        assert kinds.count(kind) == 2, kinds
    assert all(ln["rate"] > 0 for ln in lines if "rate" in ln)
    harness = [ln for ln in lines if ln["kind"].startswith("harness")]
    for ln in harness:  # one dispatch per batch, each within the window's
        assert len(ln["dispatch_ms"]) == 2 and 0 < sum(ln["dispatch_ms"]) <= 1e3 * ln["s"] + 1
        assert ln["compiles"] == 0  # warm-up compiled every shape
    done = lines[-1]
    assert done["kind"] == "done" and done["positions"] == 16 and done["sentences"] == 4


def test_tf_windows_of_every_kind_on_a_tiny_decoding_job(cli):
    lines = windows(cli, "tf", TFConfig())
    kinds = [ln["kind"] for ln in lines]
    for kind in ("harness", "harness_gc_off", "direct_scope", "direct_no_scope", "harness_again"):
        assert kinds.count(kind) == 2, kinds
    assert lines[0]["kind"] == "build" and lines[0]["threads"] == {"intra_op": 1, "inter_op": 1}
    assert all(ln["rate"] > 0 for ln in lines if "rate" in ln)
    for ln in lines:
        if ln["kind"].startswith("harness"):  # one time per batch, each within the window's
            assert len(ln["step_ms"]) == 2 and 0 < sum(ln["step_ms"]) <= 1e3 * ln["s"] + 1
        if ln["kind"] == "harness_gc_off":
            assert ln["gcs"] == 0
    done = lines[-1]
    assert done["kind"] == "done" and done["positions"] == 16 and done["sentences"] == 4


@pytest.mark.parametrize(("framework", "other"), [("jax", "torch"), ("tf", "jax")])
def test_a_job_that_is_not_the_tools_decoding_is_refused_in_one_line(tmp_path, framework, other):
    job = tmp_path / "job.json"
    job.write_text(json.dumps({"framework": {"name": other}, "mode": "infer"}))
    proc = subprocess.run(
        [sys.executable, str(script(framework)), str(job)], capture_output=True, text=True, timeout=120
    )  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.strip().endswith(f"needs framework={framework}, a translation model and mode=infer")
    assert "Traceback" not in proc.stderr
