"""The JAX yardsticks (yardsticks/bare_jax_*.py) on the CPU, with real JAX at tiny shapes, under the
interpreter a JAX worker runs under (.venv-jax: numpy 2): each runs in a subprocess and prints parseable BARE
lines with finite losses, amp on the CPU computes in bfloat16, --no-jit runs op by op, and each network has
exactly the trainable parameters of dlbench's Flax model at the same config (the yardsticks import nothing
from dlbench, so only a count can tie them together)."""

from __future__ import annotations

import ast
import json
import math
import os
import subprocess
from pathlib import Path

import pytest

from dlbench.backends.interpreter import worker_python
from dlbench.config import JaxConfig
from dlbench.errors import ConfigError
from tests.worker_jobs import run_snippet, worker_env

try:
    PYTHON = worker_python(JaxConfig())
except ConfigError as exc:
    pytest.skip(str(exc), allow_module_level=True)

ROOT = Path(__file__).resolve().parents[2]
YARD = ROOT / "yardsticks"
TIMING = ["--device", "cpu", "--warmup", "1", "--steps", "2", "--windows", "2"]


def bare(script: str, *args: str) -> list[dict]:
    """Run a yardstick on the CPU under JAX's interpreter; return its BARE lines (parsed)."""
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "JAX_PLATFORMS": "cpu"}
    env.pop("PYTHONPATH", None)  # nothing from dlbench may be importable by accident
    cmd = ["nice", "-n", "5", PYTHON, str(YARD / script), *TIMING, *args]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(s[5:]) for s in done.stdout.splitlines() if s.startswith("BARE ")]


def check_lines(lines: list[dict], expected: list[tuple[str, str]], jit: bool, params: int) -> None:
    assert [(r["precision"], r["mode"]) for r in lines] == expected
    for r in lines:
        assert r["framework"] == "jax" and r["jit"] is jit and r["compile"] is jit and r["device"] == "cpu"
        assert r["params"] == params and r["optimizer"] == "optax"
        assert r["jax"] and r["flax"] and r["throughput"] > 0 and len(r["all"]) == 2
        assert r["p05"] <= r["throughput"] <= r["p95"]
        if r["mode"] == "train":
            assert r["loss_finite"] and math.isfinite(r["loss_last"])
        else:
            assert r["loss_last"] is None
        # amp on the CPU is bfloat16 (no fast fp16 kernels there), as dlbench defines it
        want = {"fp32": "float32", "tf32": "float32", "amp": "bfloat16", "bf16": "bfloat16"}[r["precision"]]
        assert r["compute_dtype"] == want and r["loss_scale"] == "none"
        assert r["tf32"] is (r["precision"] == "tf32")


def test_yardsticks_import_nothing_from_dlbench():
    paths = sorted(YARD.glob("bare_jax_*.py"))
    assert len(paths) == 3
    for path in paths:
        names = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                names.add(node.module or "")
        assert not [n for n in names if n.split(".")[0] == "dlbench"], path.name


COUNTS = """
import json, sys
import jax, jax.numpy as jnp
sys.path.insert(0, YARD)
import bare_jax_classification as cls, bare_jax_ncf as ncf
from dlbench.backends.jax.stats import model_stats
from dlbench.workloads.classification.spec import ClassificationConfig
from dlbench.workloads.recommendation.spec import RecommendationConfig, table_sizes

def count(module, *inputs):
    shapes = jax.eval_shape(lambda: module.init(jax.random.key(0), *inputs))["params"]
    return sum(int(x.size) for x in jax.tree.leaves(shapes))

ids = jnp.zeros((1,), jnp.int32)
out = {}
for size, classes in ((224, 1000), (32, 10)):
    mine = count(cls.ResNet50(classes=classes), jnp.zeros((1, size, size, 3)))
    theirs = model_stats(ClassificationConfig(name="resnet50", image_size=size, num_classes=classes))["params"]
    out[f"resnet50_{size}"] = [mine, theirs]
for users, items in ((None, None), (500, 300)):
    cfg = RecommendationConfig(num_users=users, num_items=items)
    mine = count(ncf.NeuMF(*table_sizes(cfg)), ids, ids)
    out[f"ncf_{users}"] = [mine, model_stats(cfg)["params"]]
print("STATS " + json.dumps(out))
"""


def test_networks_have_dlbench_parameter_counts():
    counts = run_snippet(f"YARD = {str(YARD)!r}\n" + COUNTS, worker_env(), python=PYTHON)
    assert counts["resnet50_224"] == [25_557_032, 25_557_032]
    assert counts["ncf_None"] == [31_832_577, 31_832_577]
    for key in ("resnet50_32", "ncf_500"):
        assert counts[key][0] == counts[key][1], key


def test_resnet50_trains_and_infers_jitted_and_op_by_op():
    tiny = ["--batch", "2", "--image-size", "32", "--num-classes", "10"]
    lines = bare("bare_jax_classification.py", *tiny, "--precision", "amp", "--mode", "train,infer")
    check_lines(lines, [("amp", "train"), ("amp", "infer")], jit=True, params=23_528_522)  # 10 classes
    assert all(r["model"] == "resnet50" and r["batch"] == 2 and r["unit"] == "img/s" for r in lines)
    eager = bare("bare_jax_classification.py", *tiny, "--precision", "fp32", "--mode", "infer", "--no-jit")
    check_lines(eager, [("fp32", "infer")], jit=False, params=23_528_522)


def test_ncf_ids_are_dlbench_synthetic_pool():
    """The yardstick trains on the very ids of dlbench's synthetic pool (same work per step)."""
    script = f"""
import argparse, json, sys
sys.path.insert(0, {str(YARD)!r})
import bare_jax_ncf as ncf
from dlbench.workloads.recommendation.spec import RecommendationConfig, synthetic_pool
theirs = synthetic_pool(RecommendationConfig(num_users=500, num_items=300))(1000, True)
mine = ncf.id_pool(argparse.Namespace(users=500, items=300, pool=8), 200)
same = len(mine) == len(theirs) == 8 and all(
    (u == b.inputs["user"]).all() and (i == b.inputs["item"]).all() and b.units == 5 * len(u)
    for (u, i), b in zip(mine, theirs))
print("STATS " + json.dumps(bool(same)))
"""
    assert run_snippet(script, worker_env(), python=PYTHON) is True


def test_ncf_trains_and_infers():
    tiny = [
        "--batch",
        "1000",
        "--users",
        "500",
        "--items",
        "300",
        "--precision",
        "fp32,tf32",
        "--mode",
        "train,infer",
    ]
    lines = bare("bare_jax_ncf.py", *tiny)
    pairs = [("fp32", "train"), ("fp32", "infer"), ("tf32", "train"), ("tf32", "infer")]
    check_lines(lines, pairs, jit=True, params=260_673)
    assert [r["batch"] for r in lines] == [1000] * 4 and all(r["unit"] == "samples/s" for r in lines)
    assert [r["matmul_precision"] for r in lines] == ["highest", "highest", "tensorfloat32", "tensorfloat32"]
