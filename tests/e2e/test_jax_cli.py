"""framework=jax through the real CLI: the orchestrator (under this interpreter, numpy < 2) runs JAX's worker
under the interpreter it resolves (this one if it imports jax, else .venv-jax), and each run records the
precision JAX really computed in, its execution mode and the threads XLA started, and its worker was told
to reserve no GPU memory up front (environment.json)."""

from __future__ import annotations

import json

import pytest

from dlbench.backends.interpreter import worker_python
from dlbench.config import JaxConfig
from dlbench.errors import ConfigError
from tests.conftest import TINY

pytestmark = pytest.mark.slow


def test_a_jax_sweep_records_verified_precision_and_its_mode(cli):
    try:
        worker_python(JaxConfig())
    except ConfigError as exc:
        pytest.skip(str(exc))
    res = cli.run(["framework=jax", "precision=fp32,amp", "threads=1", *TINY], timeout=900)
    assert res.returncode == 0, (res.stdout + res.stderr)[-3000:]
    kids = {r.data.params["precision.name"]: r for r in cli.runs() if "mlflow.parentRunId" in r.data.tags}
    assert sorted(kids) == ["amp", "fp32"] and all(r.info.status == "FINISHED" for r in kids.values())
    for name, dtype in (("fp32", "float32"), ("amp", "bfloat16")):
        tags, params = kids[name].data.tags, kids[name].data.params
        assert tags["precision.compute_dtype"] == dtype and tags["precision.param_dtype"] == "float32"
        assert tags["run.execution"] == "jit" and tags["run.donated"] == "True"
        assert params["threads.intra_op"] == "1" and params["framework.jit"] == "True"
        assert float(kids[name].data.metrics["throughput"]) > 0
    envs = [json.loads(p.read_text())["env"] for p in (cli.tmp / "sweep").rglob("environment.json")]
    assert len(envs) == 2 and all(e["XLA_PYTHON_CLIENT_PREALLOCATE"] == "false" for e in envs)
