"""The Transformer is one network in torch, Keras, Gluon and Flax: equal parameter counts at base size,
the same logits, loss, gradients and greedy translations for the same (neutral) weights on the tiny size.

Each framework runs in its own subprocess (they never share one; JAX under its own interpreter, whose
numpy is 2) and writes its outputs to an .npz; the comparisons happen here, with numpy only."""

from __future__ import annotations

import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from dlbench.workloads.translation.transformer import (
    BOS,
    EOS,
    PAD,
    SIZES,
    param_count,
    random_weights,
    size,
    weight_shapes,
)
from tests.worker_jobs import framework_pythons, run_snippet, worker_env

MAX_LEN = 12

# The same inputs for every framework: right-padded source, a target with padding, labels shifted.
_INPUTS = """
import json, sys
import numpy as np
from dlbench.workloads.translation.transformer import BOS, PAD, param_count, random_weights, size, weight_shapes
tiny = size("tiny")
rng = np.random.default_rng(0)
src = rng.integers(4, tiny.vocab, (3, 7)).astype("int32"); src[0, 5:] = PAD
tgt = rng.integers(4, tiny.vocab, (3, 6)).astype("int32"); tgt[:, 0] = BOS; tgt[1, 4:] = PAD
labels = np.concatenate([tgt[:, 1:], np.zeros((3, 1), "int32")], 1)
weights = random_weights(tiny)
out = {}
"""

_SNIPPETS = {
    "torch": """
import torch
from dlbench.workloads.translation.torch import (
    ATTENTION, build_transformer, label_smoothed_ce, load_neutral, neutral_weights)
base = build_transformer(**size("base").kwargs())
out["params"] = sum(p.numel() for p in base.parameters())
out["names"] = sorted(neutral_weights(base)) == sorted(weight_shapes(size("base")))
m = build_transformer(**tiny.kwargs()).eval()
load_neutral(m, weights)
T = lambda a: torch.from_numpy(a).long()
with torch.no_grad():
    logits = m(T(src), T(tgt))
    loss = float(label_smoothed_ce(logits, T(labels)))
    ids = m.translate(T(src), MAX_LEN)
    out["check_every_same"] = bool(np.array_equal(m.translate(T(src), MAX_LEN, check_every=5), ids))
    prefix = np.concatenate([np.full((3, 1), BOS), ids[:, :-1]], 1)
    forced = m(T(src), T(prefix)).argmax(-1).numpy()
    from dlbench.workloads.translation.torch import infer
    on_device = infer(m, (T(src), T(np.zeros((3, MAX_LEN), "int32"))))  # the bench's infer step
out["infer_host_on_device"] = isinstance(on_device, torch.Tensor)  # not a numpy copy
arrays = dict(logits=logits.numpy(), ids=ids, forced=forced, infer_host=on_device.numpy())
out["attention"] = ATTENTION
# one plain SGD step at lr 1 without dropout: the weight change is minus the gradient
m = build_transformer(**{**tiny.kwargs(), "dropout": 0.0}).train()
load_neutral(m, weights)
label_smoothed_ce(m(T(src), T(tgt)), T(labels)).backward()
torch.optim.SGD(m.parameters(), lr=1.0).step()
arrays.update({"grad:" + k: weights[k] - v for k, v in neutral_weights(m).items()})
""",
    "tf": """
from keras import ops
from dlbench.workloads.translation.tensorflow import (
    ATTENTION, build_transformer, label_smoothed_ce, load_neutral, neutral_weights)
base = build_transformer(**size("base").kwargs())
out["params"] = sum(int(np.prod(w.shape)) for w in base.trainable_weights)
out["names"] = sorted(neutral_weights(base)) == sorted(weight_shapes(size("base")))
m = build_transformer(**tiny.kwargs())
load_neutral(m, weights)
logits = m((src, tgt))
loss = float(label_smoothed_ce(logits, labels))
ids = m.translate(src, MAX_LEN)
step = m._decode_fns[False][1]  # graph mode's step, every trace of it
out["step_ops"] = sorted({op.type for f in step._list_all_concrete_functions_for_serialization()
                          for op in f.graph.get_operations()})
out["xla_same"] = bool(np.array_equal(m.translate(src, MAX_LEN, jit_compile=True), ids))
out["xla_fixed_same"] = bool(np.array_equal(
    m.translate(src, MAX_LEN, check_every=0, jit_compile=True), m.translate(src, MAX_LEN, check_every=0)))
import tensorflow as tf
from dlbench.workloads.translation.tensorflow import infer
host_loop = infer(m, (src, np.zeros((3, MAX_LEN), "int32")))  # the bench's infer step, graph mode
out["infer_host_on_device"] = isinstance(host_loop, tf.Tensor)  # not a numpy copy
m.decode_loop, m.decode_jit_compile = "device", True  # the bench's infer step: ids left on the device
on_device = infer(m, (src, np.zeros((3, MAX_LEN), "int32")))
out["infer_on_device"] = isinstance(on_device, tf.Tensor)
import re
hlo = m._decode_all_fn.experimental_get_compiler_ir(tf.constant(src), MAX_LEN)(stage="optimized_hlo")
body = next(c for c in re.split(r"\\n(?=\\S.*\\{\\n)", hlo) if "while_body" in c.split("\\n", 1)[0])
out["while_body_copies"] = re.findall(r"= (\\S+) copy\\(", body)
arrays_one_call = {
    "one_call": m.translate(src, MAX_LEN, jit_compile=True, loop="device"),
    "infer_one_call": on_device.numpy(),
    "infer_host": host_loop.numpy(),
    "one_call_short": m.translate(src, 3, jit_compile=True, loop="device"),
    "host_short": m.translate(src, 3, check_every=0),
}
prefix = np.concatenate([np.full((3, 1), BOS), ids[:, :-1]], 1).astype("int32")
forced = ops.convert_to_numpy(ops.argmax(m((src, prefix)), -1))
arrays = dict(logits=ops.convert_to_numpy(logits), ids=ids, forced=forced, **arrays_one_call)
out["attention"] = ATTENTION
import keras, tensorflow as tf
m = build_transformer(**{**tiny.kwargs(), "dropout": 0.0})
load_neutral(m, weights)
with tf.GradientTape() as tape:
    loss_t = label_smoothed_ce(m((src, tgt), training=True), labels)
grads = tape.gradient(loss_t, m.trainable_variables)
keras.optimizers.SGD(1.0).apply_gradients(zip(grads, m.trainable_variables))
arrays.update({"grad:" + k: weights[k] - v for k, v in neutral_weights(m).items()})
""",
    "mxnet": """
from dlbench.backends.mxnet._compat import mx
from dlbench.workloads.translation.mxnet import (
    attention_impl, build_transformer, label_smoothed_ce, load_neutral, neutral_weights, trainable_count)
base = build_transformer(**size("base").kwargs())
out["params"] = trainable_count(base)
out["names"] = sorted(neutral_weights(base)) == sorted(weight_shapes(size("base")))
A = lambda a: mx.nd.array(a, dtype="int32")
arrays = {}
for fused in (True, False):
    m = build_transformer(fused_attention=fused, **tiny.kwargs())
    load_neutral(m, weights)
    tag = "" if fused else "_unfused"
    out["attention" + tag] = attention_impl(m)
    m.hybridize()
    logits = m(A(src), A(tgt))
    if fused:
        loss = float(label_smoothed_ce(mx.nd, logits, A(labels)).asscalar())
    ids = m.translate(A(src), MAX_LEN)
    prefix = np.concatenate([np.full((3, 1), BOS), ids[:, :-1]], 1)
    arrays.update({"logits" + tag: logits.asnumpy(), "ids" + tag: ids,
                   "forced" + tag: m(A(src), A(prefix)).argmax(axis=-1).asnumpy()})
    if fused:  # the bench's infer step
        from dlbench.workloads.translation.mxnet import infer
        on_device = infer(m, (A(src), A(np.zeros((3, MAX_LEN), "int32"))))
        out["infer_host_on_device"] = isinstance(on_device, mx.nd.NDArray)  # not a numpy copy
        arrays["infer_host"] = on_device.asnumpy()
m = build_transformer(**{**tiny.kwargs(), "dropout": 0.0})
load_neutral(m, weights)
m.hybridize()
trainer = mx.gluon.Trainer(m.collect_params(), "sgd", {"learning_rate": 1.0})
with mx.autograd.record():
    loss_t = label_smoothed_ce(mx.nd, m(A(src), A(tgt)), A(labels))
loss_t.backward()
trainer.step(1)
arrays.update({"grad:" + k: weights[k] - v for k, v in neutral_weights(m).items()})
""",
    "jax": """
import jax, jax.numpy as jnp
from dlbench.backends.jax.family import Network
from dlbench.workloads.translation.jax import (
    ATTENTION, Transformer, _path, build_transformer, label_smoothed_ce, load_neutral, neutral_weights,
    translate)
ids0 = jnp.ones((1, 2), jnp.int32)
base = jax.eval_shape(lambda: Transformer(size("base")).init(jax.random.key(0), ids0, ids0))  # no arrays made
leaves = jax.tree_util.tree_flatten_with_path(base["params"])[0]
out["params"] = sum(int(np.prod(leaf.shape)) for _, leaf in leaves)
out["names"] = {tuple(k.key for k in kp) for kp, _ in leaves} == {
    _path(n)[0] for n in weight_shapes(size("base"))}
m = build_transformer(tiny)
load_neutral(m, weights)
A = lambda a: jnp.asarray(a, jnp.int32)
logits = m.module.apply(m.variables, A(src), A(tgt))
loss = float(label_smoothed_ce(logits, A(labels)))
ids = translate(m, m.variables, A(src), MAX_LEN)
out["check_every_same"] = bool(np.array_equal(translate(m, m.variables, A(src), MAX_LEN, check_every=5), ids))
out["eager_same"] = bool(np.array_equal(translate(m, m.variables, A(src), MAX_LEN, jit=False), ids))
prefix = np.concatenate([np.full((3, 1), BOS), ids[:, :-1]], 1)
forced = np.asarray(m.module.apply(m.variables, A(src), A(prefix)).argmax(-1))
from dlbench.workloads.translation.jax import TranslationJax
family = TranslationJax()
family.compile_infer(True)
host_loop = family.infer(m, m.variables, (A(src), A(np.zeros((3, MAX_LEN), "int32"))))  # the bench's step
out["infer_host_on_device"] = isinstance(host_loop, jax.Array)  # not a numpy copy
family.decode_loop = "device"
on_device = family.infer(m, m.variables, (A(src), A(np.zeros((3, MAX_LEN), "int32"))))
out["infer_on_device"] = isinstance(on_device, jax.Array)
arrays = dict(logits=np.asarray(logits), ids=ids, forced=forced, infer_one_call=np.asarray(on_device),
              infer_host=np.asarray(host_loop),
              one_call=translate(m, m.variables, A(src), MAX_LEN, loop="device"),
              one_call_short=translate(m, m.variables, A(src), 3, loop="device"),
              host_short=translate(m, m.variables, A(src), 3, check_every=0))
out["attention"] = ATTENTION
m = build_transformer(size("tiny", dropout=0.0))
load_neutral(m, weights)
def train_loss(p):
    z = m.module.apply({"params": p}, A(src), A(tgt), train=True, rngs={"dropout": jax.random.key(1)})
    return label_smoothed_ce(z, A(labels))
grads = jax.grad(train_loss)(m.params)
arrays.update({"grad:" + k: v for k, v in neutral_weights(Network(m.module, {"params": grads})).items()})
""",
}
# the interpreter each framework's snippet runs under (JAX: .venv-jax unless this one imports jax)
PYTHONS = framework_pythons(_SNIPPETS)
OTHERS = [fw for fw in ("tf", "mxnet", "jax") if fw in PYTHONS]

_SAVE = """
out["loss"] = loss
np.savez(OUT, **arrays)
print("STATS " + json.dumps(out))
"""


def _run(framework: str, tmp: Path) -> tuple[dict, dict]:
    path = tmp / f"{framework}.npz"
    script = "\n".join(
        [f"MAX_LEN = {MAX_LEN}\nOUT = {str(path)!r}", textwrap.dedent(_INPUTS), _SNIPPETS[framework], _SAVE]
    )
    env = worker_env(OMP_NUM_THREADS="1", TF_NUM_INTRAOP_THREADS="1", TF_NUM_INTEROP_THREADS="1")
    stats = run_snippet(script, env, python=PYTHONS[framework])
    return stats, dict(np.load(path))


@pytest.fixture(scope="module")
def outputs(tmp_path_factory) -> dict[str, tuple[dict, dict]]:
    tmp = tmp_path_factory.mktemp("transformer")
    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = {fw: pool.submit(_run, fw, tmp) for fw in PYTHONS}
        return {fw: f.result() for fw, f in futures.items()}


def test_base_size_has_60522496_parameters_in_every_framework(outputs):
    assert param_count(SIZES["base"]) == 60_522_496
    for fw, (stats, _) in outputs.items():
        assert stats["params"] == 60_522_496, fw
        assert stats["names"], f"{fw}: its weights do not map one-to-one onto the neutral names"


def test_same_weights_give_the_same_logits_and_loss(outputs):
    ref_stats, ref = outputs["torch"]
    for fw in OTHERS:
        stats, arrays = outputs[fw]
        np.testing.assert_allclose(arrays["logits"], ref["logits"], atol=2e-4, rtol=1e-4, err_msg=fw)
        assert stats["loss"] == pytest.approx(ref_stats["loss"], abs=1e-4), fw
    # MXNet's batch_dot fallback computes the same attention as its interleaved kernels
    mx_arrays = outputs["mxnet"][1]
    np.testing.assert_allclose(mx_arrays["logits_unfused"], mx_arrays["logits"], atol=2e-4, rtol=1e-4)


def test_loss_is_label_smoothed_cross_entropy_over_non_pad_labels(outputs):
    """The frameworks' loss against the formula written in numpy on torch's logits."""
    stats, arrays = outputs["torch"]
    rng = np.random.default_rng(0)  # the snippet's inputs, regenerated
    tiny = size("tiny")
    rng.integers(4, tiny.vocab, (3, 7))
    tgt = rng.integers(4, tiny.vocab, (3, 6)).astype("int32")
    tgt[:, 0], tgt[1, 4:] = BOS, PAD
    labels = np.concatenate([tgt[:, 1:], np.zeros((3, 1), "int32")], 1)
    z = arrays["logits"].astype(np.float64)
    logp = z - z.max(-1, keepdims=True)
    logp -= np.log(np.exp(logp).sum(-1, keepdims=True))
    nll = -np.take_along_axis(logp, labels[..., None], -1)[..., 0]
    per_token = 0.9 * nll + 0.1 * (-logp.mean(-1))
    keep = labels != PAD
    assert keep.sum() < labels.size  # the batch really has padding to ignore
    assert stats["loss"] == pytest.approx(per_token[keep].mean(), rel=1e-5)


def test_one_training_step_gives_the_same_gradients(outputs):
    """Backward through each framework's attention, norms, tied embedding and loss agrees: a plain SGD
    step at learning rate 1 (dropout off) changes every neutral weight by the same -gradient."""
    ref = {k: v for k, v in outputs["torch"][1].items() if k.startswith("grad:")}
    assert len(ref) == len(weight_shapes(size("tiny")))
    assert all(np.abs(g).max() > 0 for g in ref.values())  # every tensor takes part
    for fw in OTHERS:
        arrays = outputs[fw][1]
        for name, g in ref.items():
            np.testing.assert_allclose(arrays[name], g, atol=2e-5, rtol=1e-3, err_msg=f"{fw} {name}")


def test_greedy_decoding_gives_the_same_tokens_in_every_framework(outputs):
    ref = outputs["torch"][1]["ids"]
    assert ref.shape == (3, MAX_LEN) and (ref >= 0).all()
    assert len(np.unique(ref)) > 1
    for fw in OTHERS:
        np.testing.assert_array_equal(outputs[fw][1]["ids"], ref, err_msg=fw)
    np.testing.assert_array_equal(outputs["mxnet"][1]["ids_unfused"], ref)
    assert outputs["torch"][0]["check_every_same"]
    # TF with framework.xla: the XLA-compiled step over fixed-length caches decodes the same tokens
    assert outputs["tf"][0]["xla_same"] and outputs["tf"][0]["xla_fixed_same"]
    if "jax" in outputs:  # the early-stop check and the unjitted step change nothing either
        assert outputs["jax"][0]["check_every_same"] and outputs["jax"][0]["eager_same"]


def test_decoding_every_position_in_one_compiled_call_gives_the_host_loops_tokens(outputs):
    """model.decode_loop=device (TF under XLA, JAX under jit): the encoder and every position in one call
    decode what the host loop decodes, once the PAD columns are cut as the host loop cuts them, at the
    full length and at a length shorter than the sentences."""
    ref = outputs["torch"][1]["ids"]
    for fw in ("tf", "jax"):
        if fw not in outputs:
            continue
        stats, arrays = outputs[fw]
        np.testing.assert_array_equal(arrays["one_call"], ref, err_msg=fw)
        # the bench's infer step leaves the (untrimmed) ids on the device instead of reading them back
        assert stats["infer_on_device"], fw
        np.testing.assert_array_equal(arrays["infer_one_call"], ref, err_msg=fw)
        assert arrays["host_short"].shape == (3, 3)
        np.testing.assert_array_equal(arrays["one_call_short"], arrays["host_short"], err_msg=fw)
        np.testing.assert_array_equal(arrays["one_call_short"], ref[:, :3], err_msg=fw)


def test_the_inference_step_leaves_the_host_loops_ids_on_the_device(outputs):
    """Every framework's infer step (the host loop, a call per position) returns the ids it stacked on the
    device, not a numpy copy: reading them back would make the host wait for the whole decode before it
    queues the next batch, which the hand-written loops never do. They are the tokens translate() gives."""
    ref = outputs["torch"][1]["ids"]
    for fw, (stats, arrays) in outputs.items():
        assert stats["infer_host_on_device"], fw
        np.testing.assert_array_equal(arrays["infer_host"], ref, err_msg=fw)


def test_tf_one_call_decode_copies_no_cache_per_position(outputs):
    """The decoding loop's body, as XLA optimised it, copies no key/value cache: with a select as the
    cache write, XLA fused the select into both of its readers and copied the old cache of every layer in
    every iteration (4 copies of (3, 12, 4, 32) here, 12 at base size), which the hand-written decoder's
    masked blend does not."""
    copies = outputs["tf"][0]["while_body_copies"]
    assert not [shape for shape in copies if "[]" not in shape], copies  # scalars only (the counter)


def test_tf_graph_mode_step_has_no_host_bound_argmax(outputs):
    """keras.ops.argmax's -0.0 rewrite (an int32 bitwise test over the logits) ran on the host in graph
    mode, copying (B, vocab) values off the GPU at every position; the step takes tf.argmax instead."""
    step_ops = set(outputs["tf"][0]["step_ops"])
    assert {"ArgMax", "MatMul"} <= step_ops
    assert not step_ops & {"BitwiseAnd", "Bitcast"}


def test_cached_decoding_equals_teacher_forcing_on_its_own_output(outputs):
    """Each decoded token is the argmax the full (uncached) decoder gives for the decoded prefix, so
    the key/value caches hold exactly what recomputation would."""
    for fw, (_, arrays) in outputs.items():
        for tag in ("", "_unfused") if fw == "mxnet" else ("",):
            ids, forced = arrays["ids" + tag], arrays["forced" + tag]
            live = np.cumsum(ids == EOS, 1) - (ids == EOS) == 0  # up to and including the first EOS
            np.testing.assert_array_equal(forced[live], ids[live], err_msg=fw + tag)


def test_each_framework_names_its_attention_kernels(outputs):
    assert "scaled_dot_product_attention" in outputs["torch"][0]["attention"]
    assert "dot_product_attention" in outputs["tf"][0]["attention"]
    assert "interleaved_matmul" in outputs["mxnet"][0]["attention"]
    assert "batch_dot" in outputs["mxnet"][0]["attention_unfused"]
    if "jax" in outputs:
        assert outputs["jax"][0]["attention"] == "jax.nn.dot_product_attention"


def test_random_weights_cover_every_neutral_name():
    tiny = size("tiny")
    weights = random_weights(tiny)
    assert {k: v.shape for k, v in weights.items()} == weight_shapes(tiny)
