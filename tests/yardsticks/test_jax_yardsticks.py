"""The JAX yardsticks (yardsticks/bare_jax_*.py) on the CPU, with real JAX at tiny shapes, under the
interpreter a JAX worker runs under (.venv-jax: numpy 2): each runs in a subprocess and prints parseable BARE
lines with finite losses, amp on the CPU computes in bfloat16, --no-jit runs op by op, and each network has
exactly the trainable parameters of dlbench's Flax model at the same config (the yardsticks import nothing
from dlbench, so only a test can tie them together); VGG16, SSD300 and the Transformer also give dlbench's
outputs (and the Transformer its greedy decoding) on one set of random weights."""

from __future__ import annotations

import ast
import gzip
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
    assert len(paths) == 5
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
for name in ("resnet50", "vgg16"):
    for size, classes in ((224, 1000), (32, 10)):
        mine = count(cls.MODELS[name](classes=classes), jnp.zeros((1, size, size, 3)))
        theirs = model_stats(ClassificationConfig(name=name, image_size=size, num_classes=classes))["params"]
        out[f"{name}_{size}"] = [mine, theirs]
for users, items in ((None, None), (500, 300)):
    cfg = RecommendationConfig(num_users=users, num_items=items)
    mine = count(ncf.NeuMF(*table_sizes(cfg)), ids, ids)
    out[f"ncf_{users}"] = [mine, model_stats(cfg)["params"]]
print("STATS " + json.dumps(out))
"""


def test_networks_have_dlbench_parameter_counts():
    counts = run_snippet(f"YARD = {str(YARD)!r}\n" + COUNTS, worker_env(), python=PYTHON)
    assert counts["resnet50_224"] == [25_557_032, 25_557_032]
    assert counts["vgg16_224"] == [138_357_544, 138_357_544]
    assert counts["ncf_None"] == [31_832_577, 31_832_577]
    for key in ("resnet50_32", "vgg16_32", "ncf_500"):
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
    lines = bare("bare_jax_ncf.py", *tiny, "--min-window-s", "0.2")
    pairs = [("fp32", "train"), ("fp32", "infer"), ("tf32", "train"), ("tf32", "infer")]
    check_lines(lines, pairs, jit=True, params=260_673)
    assert [r["batch"] for r in lines] == [1000] * 4 and all(r["unit"] == "samples/s" for r in lines)
    for r in lines:  # --min-window-s stretched each configuration's windows to about 0.2 s
        assert r["steps"] > 2 and all(r["steps"] * 1000 / rate > 0.1 for rate in r["all"]), r
    assert [r["matmul_precision"] for r in lines] == ["highest", "highest", "tensorfloat32", "tensorfloat32"]


SHARED = """
import argparse, json, sys
import flax.linen as nn, jax, jax.numpy as jnp, numpy as np
jax.config.update("jax_default_matmul_precision", "highest")
sys.path.insert(0, YARD)

def init_shapes(module, *inputs):
    key = jax.random.key(0)
    return jax.eval_shape(lambda: module.init({"params": key, "dropout": key}, *inputs))

def count(module, *inputs):
    return sum(int(x.size) for x in jax.tree.leaves(init_shapes(module, *inputs)["params"]))

LEAF_MODULES = (nn.Conv, nn.BatchNorm, nn.Dense, nn.LayerNorm, nn.Embed)

def layers(module, *inputs):
    \"\"\"The network's variables (shapes) and its layers' paths in the order they first run (their names
    differ between the two networks; the order in which they run does not).\"\"\"
    order = []

    def record(next_fun, args, kwargs, context):
        path = context.module.scope.path
        if isinstance(context.module, LEAF_MODULES) and path not in order:
            order.append(path)
        return next_fun(*args, **kwargs)

    with nn.intercept_methods(record):
        shapes = dict(init_shapes(module, *inputs))
    return shapes, order

def slots(shapes, order):
    \"\"\"(collection, layer path, leaf name, shape) of every variable, layer by layer in running order.\"\"\"
    out = []
    for path in order:
        for c in sorted(shapes):
            node = shapes[c]
            for part in path:
                node = node.get(part, {})
            out += [(c, path, leaf, node[leaf].shape) for leaf in sorted(node)]
    assert len(out) == len(jax.tree.leaves(shapes))
    return out

def shared_weights(mine, theirs, inputs):
    \"\"\"One set of random weights as both networks' variables, matched layer by layer in running order;
    asserts the layers and shapes agree in that order.\"\"\"
    sa, sb = slots(*layers(mine, *inputs)), slots(*layers(theirs, *inputs))
    assert [(c, leaf, shape) for c, _, leaf, shape in sa] == [(c, leaf, shape) for c, _, leaf, shape in sb]
    rng = np.random.default_rng(0)
    va, vb = {}, {}
    for (c, pa, leaf, shape), (_, pb, _, _) in zip(sa, sb, strict=True):
        if leaf == "var":
            w = rng.uniform(0.5, 1.5, shape)
        elif leaf == "scale":
            w = 1.0 + rng.normal(0.0, 0.1, shape)
        elif len(shape) > 1:
            w = rng.normal(0.0, 1.0 / np.sqrt(np.prod(shape[:-1])), shape)
        else:
            w = rng.normal(0.0, 0.1, shape)
        for tree, path in ((va, pa), (vb, pb)):
            node = tree.setdefault(c, {})
            for part in path:
                node = node.setdefault(part, {})
            node[leaf] = jnp.asarray(w, jnp.float32)
    return va, vb

def gap(x, y):
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    return float(np.abs(x - y).max() / np.abs(y).max())  # NaN (fails) if the reference were all zeros
"""

PARITY = """
import bare_jax_ssd300 as ssd, bare_jax_transformer as tr
from dlbench.backends.jax.family import Network
from dlbench.backends.jax.stats import model_stats
from dlbench.workloads.detection import jax as dl_ssd
from dlbench.workloads.detection.spec import DetectionConfig
from dlbench.workloads.translation import jax as dl_tr
from dlbench.workloads.translation.spec import TranslationConfig, model_size
from dlbench.workloads.translation.transformer import TransformerSize, param_count

out = {}
# SSD300: parameter counts at 300x300 and 32x32, and the forward pass on shared weights at 32x32
images = jnp.zeros((1, 300, 300, 3))
out["ssd300_300"] = [count(ssd.SSD300(), images), model_stats(DetectionConfig())["params"]]
images = jnp.zeros((1, 32, 32, 3))
out["ssd300_32"] = [count(ssd.SSD300(), images), count(dl_ssd.SSD300(image_size=32), images)]
mine, theirs = ssd.SSD300(), dl_ssd.SSD300(image_size=32)
images = jnp.asarray(np.random.default_rng(1).standard_normal((2, 32, 32, 3)), jnp.float32)
va, vb = shared_weights(mine, theirs, (images,))
(ml, mc), (tl, tc) = mine.apply(va, images), theirs.apply(vb, images)
out["ssd300_gap"] = [gap(ml, tl), gap(mc, tc)]
out["ssd300_boxes"] = [int(ml.shape[2]), len(ssd.default_boxes(ssd.feature_sizes(32), 32))]

# Transformer: base and the test's tiny size, logits and greedy decoding on shared weights
base = TranslationConfig()
ids = jnp.full((1, 2), 4, jnp.int32)
out["transformer_base"] = [count(tr.Transformer(), ids, ids), param_count(model_size(base)),
                           count(dl_tr.Transformer(model_size(base)), ids, ids)]
a = argparse.Namespace(vocab=1000, d_model=64, heads=4, d_ff=128, layers=1, dropout=0.1, min_len=3, max_len=7,
                       jit=True)
size = TransformerSize(64, 4, 128, 1, 1, vocab=1000)
mine, theirs = tr.build(a), dl_tr.Transformer(size)
out["transformer_tiny"] = [count(mine, ids, ids), count(theirs, ids, ids), param_count(size)]
src, tgt_in, _ = (jnp.asarray(x) for x in tr.sentence_pairs(3, a, np.random.default_rng(0)))
pa, pb = shared_weights(mine, theirs, (ids, ids))
out["transformer_gap"] = gap(mine.apply(pa, src, tgt_in), theirs.apply(pb, src, tgt_in))
cached = np.stack([np.asarray(x) for x in tr.greedy_decoder(mine, 6, 3, a)(pa["params"], src)], 1)
ref = dl_tr.translate(Network(theirs, pb), pb, src, 6, check_every=0)
out["decode_same"] = bool((cached[:, : ref.shape[1]] == ref).all() and (cached[:, ref.shape[1]:] == 0).all())
one_call = np.asarray(tr.device_loop_decoder(mine, 6)(pa["params"], src))  # --loop device
out["one_call_same"] = bool((one_call == cached).all())
print("STATS " + json.dumps(out))
"""


def test_ssd300_and_transformer_are_dlbench_networks():
    """The new yardsticks' networks are dlbench's Flax ones: the same trainable parameters (SSD300 at
    300x300 and 32x32; Transformer-base and the tiny size the script test runs), and on one set of random
    weights the same SSD300 loc/conf, the same Transformer logits and the same greedy decoding."""
    got = run_snippet(f"YARD = {str(YARD)!r}\n" + SHARED + PARITY, worker_env(), python=PYTHON)
    assert got["ssd300_300"] == [22_894_902, 22_894_902]
    assert got["ssd300_32"][0] == got["ssd300_32"][1]
    assert got["ssd300_boxes"][0] == got["ssd300_boxes"][1]
    assert max(got["ssd300_gap"]) < 1e-4, got["ssd300_gap"]
    assert got["transformer_base"] == [60_522_496] * 3
    assert got["transformer_tiny"] == [147_712] * 3
    assert got["transformer_gap"] < 1e-4 and got["decode_same"] and got["one_call_same"], got


VGG16 = """
import bare_jax_classification as cls
from dlbench.workloads.classification import jax as dl_cls

# 40x40: a 1x1 map before the pool, which spreads it over 7x7 (the 224x224 path skips the pool)
images = jnp.asarray(np.random.default_rng(1).standard_normal((2, 40, 40, 3)), jnp.float32)
mine, theirs = cls.VGG16(classes=10), dl_cls.VGG16(num_classes=10)
va, vb = shared_weights(mine, theirs, (images,))
print("STATS " + json.dumps(gap(mine.apply(va, images), theirs.apply(vb, images))))
"""


def test_vgg16_is_dlbench_network():
    """On one set of random weights (matched layer by layer in running order, so the classifier's first
    dense reads the pooled map in the same (C, H, W) order) the yardstick's VGG16 gives dlbench's logits."""
    got = run_snippet(f"YARD = {str(YARD)!r}\n" + SHARED + VGG16, worker_env(), python=PYTHON)
    assert got < 1e-5, got


@pytest.mark.parametrize(("precision", "mode"), [("fp32", "train"), ("amp", "infer")])
def test_vgg16_trains_and_infers(precision, mode):
    """One configuration a test: initialising VGG16's 134M weights (the 25088x4096 dense is there at any
    image size) is most of each run's time on this CPU. No warm-up, 2 windows of 1 step."""
    tiny = ["--model", "vgg16", "--batch", "2", "--image-size", "32", "--num-classes", "10"]
    lines = bare("bare_jax_classification.py", *tiny, "--precision", precision, "--mode", mode,
                 "--warmup", "0", "--steps", "1")  # fmt: skip
    check_lines(lines, [(precision, mode)], jit=True, params=134_301_514)  # 10 classes
    assert all(r["model"] == "vgg16" and r["batch"] == 2 and r["unit"] == "img/s" for r in lines)


def test_profile_records_one_window_after_the_timed_ones(tmp_path: Path) -> None:
    """--profile: the timed windows as without it, then one window under jax.profiler.trace, its trace and its
    kernel summary written under DIR/<precision>_<mode>/ (a CPU run: the host's jitted calls, no GPU kernels)."""
    tiny = ["--batch", "1000", "--users", "500", "--items", "300", "--precision", "fp32"]
    (r,) = bare("bare_jax_ncf.py", *tiny, "--profile", str(tmp_path))
    assert len(r["all"]) == 2 and r["profile"] == str(tmp_path)
    summary = json.loads((tmp_path / "fp32_train" / "profile.json").read_text())
    assert summary["steps"] == 2 and summary["kernels"] == []
    assert Path(summary["trace"]).is_relative_to(tmp_path / "fp32_train" / "plugins" / "profile")
    with gzip.open(summary["trace"], "rt") as f:
        names = {e.get("name", "") for e in json.load(f)["traceEvents"]}
    assert any(n.startswith("PjitFunction") for n in names), sorted(names)[:20]


def test_ssd300_trains():
    # train only: XLA compiling SSD300 on a CPU is most of this test's time (the forward pass, all that
    # infer runs, is checked against dlbench's above)
    tiny = ["--batch", "2", "--image-size", "32", "--precision", "fp32", "--mode", "train"]
    lines = bare("bare_jax_ssd300.py", *tiny)
    check_lines(lines, [("fp32", "train")], jit=True, params=22_894_902)
    for r in lines:
        assert r["model"] == "ssd300" and r["batch"] == 2 and r["unit"] == "img/s"
        assert r["default_boxes"] == 108 and r["positives_per_image"] >= 1
        assert r["matmul_precision"] == "highest"


def test_transformer_trains_and_decodes_jitted_and_op_by_op():
    tiny = ["--batch-tokens", "64", "--min-len", "4", "--max-len", "8", "--decode-len", "4", "--vocab", "1000",
            "--d-model", "64", "--heads", "4", "--d-ff", "128", "--layers", "1"]  # fmt: skip
    lines = bare("bare_jax_transformer.py", *tiny, "--precision", "amp", "--mode", "train,infer")
    check_lines(lines, [("amp", "train"), ("amp", "infer")], jit=True, params=147_712)  # 1 + 1 layers
    train, infer = lines
    assert train["model"] == infer["model"] == "transformer" and train["batch_tokens"] == 64
    assert train["sentences"] == 8 and train["unit"] == "target tokens/s"
    assert 8 * 4 <= train["target_tokens_per_batch"] <= 8 * 8
    assert infer["unit"] == "generated tokens/s" and infer["cache"] == "fixed"
    # dropout masks from XLA's RngBitGenerator, as dlbench's worker; --prng draws them from another generator
    assert train["prng"] == "rbg"
    (other,) = bare(
        "bare_jax_transformer.py", *tiny, "--precision", "amp", "--mode", "train", "--prng", "threefry2x32"
    )
    assert other["prng"] == "threefry2x32" and other["loss_last"] != train["loss_last"]
    eager = bare("bare_jax_transformer.py", *tiny, "--precision", "fp32", "--mode", "infer", "--no-jit")
    check_lines(eager, [("fp32", "infer")], jit=False, params=147_712)
