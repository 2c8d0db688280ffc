"""The TensorFlow yardsticks (yardsticks/bare_tf_*.py) on the CPU, with real TF at tiny shapes: each runs in a
subprocess and prints parseable BARE lines with finite losses, `--xla` really compiles with XLA, amp on the
CPU computes in bfloat16, and each network has exactly the trainable parameters of dlbench's TF model at the
same config (the yardsticks import nothing from dlbench, so only a count can tie them together)."""

from __future__ import annotations

import contextlib
import importlib
import json
import math
import os
import signal
import subprocess
import sys
import time
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
    from dlbench.workloads.classification.spec import ClassificationConfig
    from dlbench.workloads.classification.tensorflow import build_model

    theirs = count(build_model(ClassificationConfig(name=name, image_size=size, num_classes=classes)))
    mine = count(load("bare_tf_classification").MODELS[name](size, classes))
    keras.backend.clear_session()
    assert mine == theirs
    if params is not None:
        assert mine == params


def test_resnet50_graph_mode_runs_train_and_infer():
    tiny = ["--batch", "2", "--image-size", "32", "--num-classes", "10"]
    lines, _ = bare("bare_tf_classification.py", *tiny, "--precision", "amp", "--mode", "train,infer")
    check_lines(lines, [("amp", "train"), ("amp", "infer")], xla=False, params=23_528_522)  # 10 classes
    assert all(r["model"] == "resnet50" and r["batch"] == 2 and r["unit"] == "img/s" for r in lines)
    # each configuration in a process of its own: TF keeps what it autotuned for the first one
    assert len({r["pid"] for r in lines}) == 2


def test_sigterm_ends_the_configuration_running_too():
    """Several configurations run as child processes: SIGTERM to the parent (a job killed, `kill PID`) ends the
    running child as well, so no yardstick is left computing on the device."""
    psutil = pytest.importorskip("psutil")
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "TF_CPP_MIN_LOG_LEVEL": "2"}
    env.pop("PYTHONPATH", None)
    tiny = ["--batch", "2", "--image-size", "32", "--num-classes", "10", "--precision", "fp32,tf32"]
    cmd = [sys.executable, str(YARD / "bare_tf_classification.py"), *TIMING, *tiny]
    proc = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)  # fmt: skip
    try:
        parent = psutil.Process(proc.pid)
        for _ in range(600):
            children = parent.children()
            if children or proc.poll() is not None:
                break
            time.sleep(0.1)
        assert children, "the first configuration never started in a process of its own"
        proc.terminate()
        assert proc.wait(timeout=60) == 143, proc.stderr.read()[-2000:]
        gone, alive = psutil.wait_procs(children, timeout=30)
        assert not alive
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.stderr.close()


def test_resnet50_xla_compiles_with_xla():
    """Inference only (XLA's CPU compile of the training step takes a minute here; NCF and the Transformer
    test XLA training through the same bare_tf_common.function)."""
    tiny = ["--batch", "2", "--image-size", "32", "--num-classes", "10"]
    lines, err = bare("bare_tf_classification.py", *tiny, "--precision", "fp32", "--mode", "infer", "--xla",
                      xla_log=True)  # fmt: skip
    check_lines(lines, [("fp32", "infer")], xla=True, params=23_528_522)
    assert XLA_LOG in err


# ---- NCF -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("users", "items", "params"), [(None, None, 31_832_577), (500, 300, None)])
def test_ncf_params_equal_dlbench(tf_models, users, items, params):
    load, keras = tf_models
    from dlbench.workloads.recommendation.spec import RecommendationConfig, table_sizes
    from dlbench.workloads.recommendation.tensorflow import build_model

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

    from dlbench.workloads.recommendation.spec import RecommendationConfig, synthetic_pool

    ncf = tf_models[0]("bare_tf_ncf")
    theirs = synthetic_pool(RecommendationConfig(num_users=500, num_items=300))(1000, True)
    mine = ncf.id_pool(argparse.Namespace(users=500, items=300, pool=8), 200)
    assert len(mine) == len(theirs) == 8
    for (u, i), b in zip(mine, theirs, strict=True):
        assert (u == b.inputs["user"]).all() and (i == b.inputs["item"]).all()
        assert b.units == 5 * len(u)


def test_ncf_xla_runs():
    """XLA only: graph mode is what the ResNet-50 and SSD300 runs test, through the same common code."""
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
    lines, err = bare("bare_tf_ncf.py", *tiny, "--xla", "--min-window-s", "0.2", xla_log=True)
    pairs = [("fp32", "train"), ("fp32", "infer"), ("amp", "train"), ("amp", "infer")]
    check_lines(lines, pairs, xla=True, params=260_673)
    assert [r["batch"] for r in lines] == [1000] * 4 and all(r["unit"] == "samples/s" for r in lines)
    for r in lines:  # --min-window-s stretched each configuration's windows to about 0.2 s
        assert r["steps"] > 2 and all(r["steps"] * 1000 / rate > 0.1 for rate in r["all"]), r
    assert XLA_LOG in err


# ---- Transformer -----------------------------------------------------------------------------------------

TINY_TRANSFORMER = ["--vocab", "1000", "--d-model", "64", "--heads", "4", "--d-ff", "128", "--layers", "1"]


@pytest.mark.parametrize(("size", "vocab", "params"), [("base", 32000, 60_522_496), ("tiny", 1000, None)])
def test_transformer_params_equal_dlbench(tf_models, size, vocab, params):
    """Against dlbench's TF model at the tiny size, and dlbench's framework-neutral count at base (building
    its 60 M-parameter TF model too would add 8 s here for the same number)."""
    import argparse

    load, keras = tf_models
    from dlbench.workloads.translation.spec import TranslationConfig, model_size
    from dlbench.workloads.translation.transformer import SIZES, param_count

    cfg = TranslationConfig(size=size, vocab=vocab)
    if params is None:
        from dlbench.workloads.translation.tensorflow import build_model

        theirs = count(build_model(cfg))
        assert theirs == param_count(model_size(cfg))
    else:
        theirs = param_count(model_size(cfg))
    s = SIZES[size]
    assert s.encoder_layers == s.decoder_layers  # the yardstick's --layers sets both
    a = argparse.Namespace(vocab=vocab, d_model=s.d_model, heads=s.heads, d_ff=s.ffn, layers=s.encoder_layers,
                           dropout=0.1, decode_len=64)  # fmt: skip
    mine = count(load("bare_tf_transformer").build(a))
    keras.backend.clear_session()
    assert mine == theirs
    if params is not None:
        assert mine == params


@pytest.mark.parametrize("fixed", [False, True])
def test_transformer_cached_decoding_equals_full_recompute(tf_models, fixed):
    """The key/value-cached greedy decoder gives the ids of re-running the whole decoder on the prefix."""
    import argparse

    import numpy as np
    import tensorflow as tf

    load, keras = tf_models
    tr = load("bare_tf_transformer")
    a = argparse.Namespace(vocab=50, d_model=32, heads=4, d_ff=64, layers=2, dropout=0.0, decode_len=6,
                           max_len=7, min_len=3, seed=0)  # fmt: skip
    keras.utils.set_random_seed(1)
    model = tr.build(a)
    src = tf.constant(tr.sentence_pairs(3, a, np.random.default_rng(0))[0])
    encode = tf.function(lambda s: model.encode(s, True))
    decode = tf.function(model.decode_step, reduce_retracing=True)
    cached = np.stack([x.numpy() for x in tr.greedy(model, src, a.decode_len, encode, decode, fixed)], 1)
    # --loop device: the encoder and every position in one XLA function
    one_call = tf.function(lambda s: tr.decode_all(model, s, a.decode_len, True), jit_compile=True)(src)
    prefix = np.full((3, 1), tr.BOS, np.int32)
    for _ in range(a.decode_len):
        last = model((src, tf.constant(prefix)), training=False)[:, -1]
        prefix = np.concatenate([prefix, np.argmax(last.numpy(), -1)[:, None].astype(np.int32)], 1)
    full = prefix[:, 1:]
    done = np.cumsum(full == tr.EOS, 1) - (full == tr.EOS) > 0  # after a sentence's first EOS: PAD
    full[done] = tr.PAD
    keras.backend.clear_session()
    assert cached.shape == (3, a.decode_len)
    assert (cached == full).all(), (cached, full)
    assert (one_call.numpy() == full).all(), (one_call, full)


@pytest.mark.parametrize(("cache", "xla", "fixed"), [("auto", True, True), ("auto", False, False),
                                                  ("grow", True, False), ("fixed", False, True)])  # fmt: skip
def test_transformer_cache_follows_execution_mode_by_default(tf_models, cache, xla, fixed):
    """Decoding under --xla preallocates its caches unless told otherwise, as dlbench's TF model does: grown
    caches there would make XLA compile the step once per length (minutes at 64 positions)."""
    import argparse

    load, _ = tf_models
    assert load("bare_tf_transformer").fixed_cache(argparse.Namespace(cache=cache, xla=xla)) is fixed


def test_transformer_tied_projection_is_one_matmul_as_dlbench(tf_models):
    """The output projection of (B, T, d) states against the (V, d) embedding, and its gradient, have the
    op types of dlbench's TF model: no BatchMatMulV2, which broadcasts the table over the batch and whose
    gradient makes a (B, V, d) tensor summed over B (the same FLOPs, far more memory traffic: the yardstick
    ran 15% below dlbench's XLA step on an H200 while it did that)."""
    import argparse

    import tensorflow as tf

    load, keras = tf_models
    from dlbench.workloads.translation.tensorflow import build_transformer

    a = argparse.Namespace(vocab=50, d_model=16, heads=2, d_ff=32, layers=1, dropout=0.0, decode_len=4)
    mine = load("bare_tf_transformer").build(a)
    theirs = build_transformer(vocab=50, d_model=16, heads=2, ffn=32, encoder_layers=1, decoder_layers=1)

    def op_types(logits, table) -> set[str]:
        def fn(x):
            with tf.GradientTape() as tape:
                y = tf.reduce_sum(logits(x))
            return tape.gradient(y, table)

        graph = tf.function(fn).get_concrete_function(tf.TensorSpec((3, 5, 16), tf.float32)).graph
        return {op.type for op in graph.get_operations()} - {"Placeholder", "ReadVariableOp", "Identity"}

    ours = op_types(mine.logits, mine.embed.embeddings)
    dlbench = op_types(theirs._logits, theirs.embed.embeddings)
    keras.backend.clear_session()
    assert "BatchMatMulV2" not in ours
    assert {t for t in ours if "MatMul" in t} == {t for t in dlbench if "MatMul" in t}


def test_transformer_xla_trains_and_decodes():
    tiny = [
        "--batch-tokens",
        "64",
        "--min-len",
        "4",
        "--max-len",
        "8",
        "--decode-len",
        "4",
        *TINY_TRANSFORMER,
    ]
    lines, err = bare("bare_tf_transformer.py", *tiny, "--precision", "amp", "--mode", "train,infer", "--xla",
                      xla_log=True)  # fmt: skip
    check_lines(lines, [("amp", "train"), ("amp", "infer")], xla=True, params=147_712)  # 1 + 1 layers
    assert XLA_LOG in err
    train, infer = lines
    assert train["sentences"] == 8 and train["unit"] == "target tokens/s"
    assert 8 * 4 <= train["target_tokens_per_batch"] <= 8 * 8
    assert infer["unit"] == "generated tokens/s"


# ---- SSD300 ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("size", "params"), [(300, 22_894_902), (32, None)])
def test_ssd300_params_and_default_boxes_equal_dlbench(tf_models, size, params):
    import numpy as np

    load, keras = tf_models
    from dlbench.workloads.detection.boxes import default_boxes_for
    from dlbench.workloads.detection.spec import DetectionConfig
    from dlbench.workloads.detection.tensorflow import build_model

    theirs = build_model(DetectionConfig(image_size=size))
    ssd = load("bare_tf_ssd300")
    mine = ssd.ssd300(size, 81)
    assert count(mine) == count(theirs)
    assert [tuple(t.shape) for t in mine.outputs] == [tuple(t.shape) for t in theirs.outputs]
    keras.backend.clear_session()
    if params is not None:
        assert count(mine) == params
        boxes = ssd.default_boxes(mine.feature_sizes, size)
        assert boxes.shape == (8732, 4)
        np.testing.assert_allclose(boxes, default_boxes_for(size).xywh, atol=1e-6)


def test_ssd300_targets_have_positives_and_finite_offsets(tf_models):
    import numpy as np

    ssd = tf_models[0]("bare_tf_ssd300")
    dboxes = ssd.default_boxes([38, 19, 10, 5, 3, 1], 300)
    gloc, glabel = ssd.encoded_targets(4, dboxes, 81, np.random.default_rng(0))
    assert gloc.shape == (4, 4, 8732) and glabel.shape == (4, 8732) and glabel.dtype == np.int32
    assert ((glabel > 0).sum(1) >= 1).all() and np.isfinite(gloc).all()
    assert (gloc[np.broadcast_to((glabel == 0)[:, None], gloc.shape)] == 0).all()


def test_ssd300_trains():
    lines, _ = bare("bare_tf_ssd300.py", "--batch", "2", "--image-size", "32", "--precision", "amp")
    check_lines(lines, [("amp", "train")], xla=False, params=22_894_902)
    assert lines[0]["positives_per_image"] >= 1 and lines[0]["unit"] == "img/s"
