"""The TensorFlow yardsticks (yardsticks/bare_tf_*.py) on the CPU, with real TF at tiny shapes: each runs in a
subprocess and prints parseable BARE lines with finite losses, `--xla` really compiles with XLA, amp on the
CPU computes in bfloat16, and each network has exactly the trainable parameters of dlbench's TF model at the
same config (the yardsticks import nothing from dlbench, so only a count can tie them together)."""

from __future__ import annotations

import importlib
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
YARD = ROOT / "yardsticks"
XLA_LOG = "Compiled cluster using XLA"
TIMING = ["--device", "cpu", "--warmup", "1", "--steps", "2", "--windows", "2"]


def bare(script: str, *args: str, xla_log: bool = False) -> tuple[list[dict], str]:
    """Run a yardstick on the CPU; return its BARE lines (parsed) and its stderr."""
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "TF_CPP_MIN_LOG_LEVEL": "0" if xla_log else "2"}
    env.pop("PYTHONPATH", None)  # nothing from dlbench may be importable by accident
    cmd = ["nice", "-n", "5", sys.executable, str(YARD / script), *TIMING, *args]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [json.loads(s[5:]) for s in done.stdout.splitlines() if s.startswith("BARE ")]
    return lines, done.stderr


def check_lines(lines: list[dict], expected: list[tuple[str, str]], xla: bool, params: int) -> None:
    assert [(r["precision"], r["mode"]) for r in lines] == expected
    for r in lines:
        assert r["framework"] == "tf" and r["xla"] is xla and r["device"] == "cpu"
        assert r["params"] == params
        assert r["tf"] and r["throughput"] > 0 and len(r["all"]) == 2
        assert r["p05"] <= r["throughput"] <= r["p95"]
        if r["mode"] == "train":
            assert r["loss_finite"] and math.isfinite(r["loss_last"])
        else:
            assert r["loss_last"] is None
        # amp on the CPU is bfloat16 (no fast fp16 kernels there), as dlbench defines it
        want = {"fp32": "float32", "tf32": "float32", "amp": "bfloat16", "bf16": "bfloat16"}[r["precision"]]
        assert r["compute_dtype"] == want
        assert r["policy"] == ("float32" if want == "float32" else f"mixed_{want}")
        assert r["tf32"] is (r["precision"] == "tf32")


@pytest.fixture(scope="module")
def tf_models():
    """(yardstick module loader, keras) with the float32 policy, for building models in this process."""
    keras = pytest.importorskip("keras")
    sys.path.insert(0, str(YARD))
    keras.mixed_precision.set_global_policy("float32")
    yield lambda name: importlib.import_module(name), keras
    sys.path.remove(str(YARD))


def count(model) -> int:
    return int(sum(math.prod(v.shape) for v in model.trainable_weights))


# ---- the shared part ------------------------------------------------------------------------------------


def test_report_exits_3_on_a_nonfinite_loss(tf_models, capsys):
    load, _ = tf_models
    common = load("bare_tf_common")
    prec = common.Precision("cpu", "/CPU:0", "float32", "float32", "float32", False)
    import argparse

    a = argparse.Namespace(precision="fp32", mode="train", xla=False)
    assert common.report(a, prec, [1.0, 2.0], float("nan")) == 3
    assert common.report(a, prec, [1.0, 2.0], 0.5) == 0
    out = [json.loads(s[5:]) for s in capsys.readouterr().out.splitlines() if s.startswith("BARE ")]
    assert [r["loss_finite"] for r in out] == [False, True]
    assert out[1]["throughput"] == 1.5


def test_yardsticks_import_nothing_from_dlbench():
    import ast

    paths = sorted(YARD.glob("bare_tf_*.py"))
    assert paths
    for path in paths:
        names = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                names.add(node.module or "")
        assert not [n for n in names if n.split(".")[0] == "dlbench"], path.name


# ---- classification --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "size", "classes", "params"),
    [("resnet50", 224, 1000, 25_557_032), ("resnet50", 32, 10, None), ("vgg16", 32, 10, None)],
)
def test_classification_params_equal_dlbench(tf_models, name, size, classes, params):
    load, keras = tf_models
    from dlbench.backends.tensorflow.models.classification import build_model
    from dlbench.tasks.classification import ClassificationConfig

    theirs = count(build_model(ClassificationConfig(name=name, image_size=size, num_classes=classes)))
    mine = count(load("bare_tf_classification").MODELS[name](size, classes))
    keras.backend.clear_session()
    assert mine == theirs
    if params is not None:
        assert mine == params


def test_resnet50_graph_mode_runs_train_and_infer():
    tiny = ["--batch", "2", "--image-size", "32", "--num-classes", "10"]
    lines, _ = bare("bare_tf_classification.py", *tiny, "--precision", "fp32,amp", "--mode", "train,infer")
    pairs = [("fp32", "train"), ("fp32", "infer"), ("amp", "train"), ("amp", "infer")]
    check_lines(lines, pairs, xla=False, params=23_528_522)  # ResNet-50 with 10 classes
    assert all(r["model"] == "resnet50" and r["batch"] == 2 and r["unit"] == "images" for r in lines)


def test_resnet50_xla_compiles_with_xla():
    tiny = ["--batch", "2", "--image-size", "32", "--num-classes", "10"]
    lines, err = bare("bare_tf_classification.py", *tiny, "--precision", "bf16", "--xla", xla_log=True)
    check_lines(lines, [("bf16", "train")], xla=True, params=23_528_522)
    assert XLA_LOG in err


# ---- NCF -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("users", "items", "params"), [(None, None, 31_832_577), (500, 300, None)])
def test_ncf_params_equal_dlbench(tf_models, users, items, params):
    load, keras = tf_models
    from dlbench.backends.tensorflow.models.recommendation import build_model
    from dlbench.tasks.recommendation import RecommendationConfig, table_sizes

    cfg = RecommendationConfig(num_users=users, num_items=items)
    theirs = count(build_model(cfg))
    mine = count(load("bare_tf_ncf").neumf(*table_sizes(cfg)))
    keras.backend.clear_session()
    assert mine == theirs
    if params is not None:
        assert mine == params


def test_ncf_ids_are_dlbench_synthetic_pool(tf_models):
    """The yardstick trains on the very ids of dlbench's synthetic pool (same work per step)."""
    import argparse

    from dlbench.tasks.recommendation import RecommendationConfig, synthetic_pool

    ncf = tf_models[0]("bare_tf_ncf")
    theirs = synthetic_pool(RecommendationConfig(num_users=500, num_items=300))(1000, True)
    mine = ncf.id_pool(argparse.Namespace(users=500, items=300, pool=8), 200)
    assert len(mine) == len(theirs) == 8
    for (u, i), b in zip(mine, theirs, strict=True):
        assert (u == b.inputs["user"]).all() and (i == b.inputs["item"]).all()
        assert b.units == 5 * len(u)


@pytest.mark.parametrize("xla", [False, True])
def test_ncf_runs(xla):
    tiny = [
        "--batch",
        "1000",
        "--users",
        "500",
        "--items",
        "300",
        "--precision",
        "fp32,amp",
        "--mode",
        "train,infer",
    ]
    lines, err = bare("bare_tf_ncf.py", *tiny, *(["--xla"] if xla else []), xla_log=xla)
    pairs = [("fp32", "train"), ("fp32", "infer"), ("amp", "train"), ("amp", "infer")]
    check_lines(lines, pairs, xla=xla, params=260_673)
    assert [r["batch"] for r in lines] == [1000] * 4
    if xla:
        assert XLA_LOG in err
