"""Every op of dlbench's TensorFlow steps has a GPU kernel for its dtypes, so that outside XLA (execution=eager,
TF's graph mode) no op of a step is placed on the host. An op TF has no GPU kernel for runs on the CPU, with
its inputs copied there and back every step: Keras's float16 loss-scale check did that to NCF's four embedding
tables (a bool TensorScatterUpdate each) and kept the GPU 5.7% busy.

The real bench builds each workload with the precision plan of a GPU (float16 with loss scaling for amp) and
its step is traced here on the CPU; each node of the graph, nested functions included, is matched against TF's
kernel registry, the same for every machine of one TF build. A control traces NCF with Keras's own
LossScaleOptimizer and must find its four host-only scatters, or the check itself is broken.

A GPU kernel can also keep some of its arguments in host memory: TF's int32 comparisons, arithmetic and
reshapes on a GPU run on the host, so an int32 tensor of the batch's size bound to one (Keras's negative-index
fix-up in every embedding lookup, SSD's label mask, the second argsort of its hard-negative ranking) is copied
off the GPU and back every step. No step may bind a tensor of more than 16 elements that way, nor may the
yardsticks' own pieces (their pairs would be like for like, but both slow); a plain Keras lookup on int32
ids is the control that must be caught. Graph-mode greedy decoding (a host loop of traced pieces, dlbench's and
the yardstick's) is held to the same rule.

TensorFlow runs in a subprocess, as in test_backend_tf.py (TF and torch's triton must not share a process).
"""

from __future__ import annotations

import importlib.util
import json
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.conftest import CONF
from tests.worker_jobs import ROOT, run_snippet, worker_env

if importlib.util.find_spec("tensorflow") is None:
    pytest.skip("tensorflow is not installed in this interpreter", allow_module_level=True)

MODELS = ("ncf", "transformer", "ssd300", "resnet50", "vgg16")
# mode=infer: the one-call steps (the Transformer decodes in graph mode as a host loop of traced pieces)
CELLS = [(m, p, "train") for m in MODELS for p in ("amp", "bf16", "fp32")] + [
    (m, "amp", "infer") for m in ("ncf", "ssd300", "resnet50", "vgg16")
]

SCRIPT = r"""
import json
import keras
import tensorflow as tf
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
from tensorflow.python.framework import kernels
import sys
import dlbench.backends.tensorflow.bench as bench_module
from dlbench.backends.tensorflow.precision import TFPrecision
from dlbench.config import JobConfig, register_configs
from dlbench.core.precision import plan_precision

CONF, CELLS, EXTRAS = __CONF__, json.loads(__CELLS__), __EXTRAS__
sys.path.insert(0, __YARDSTICKS__)
# the plan a GPU gets (amp: float16 and dynamic loss scaling), for a bench built on this CPU
bench_module.plan_precision = lambda cfg, kind: plan_precision(cfg, "cuda")
register_configs()

GPU_KERNELS = {}

def gpu_kernels(op):
    if op not in GPU_KERNELS:
        GPU_KERNELS[op] = [k for k in kernels.get_registered_kernels_for_op(op).kernel
                           if k.device_type in ("GPU", "DEFAULT")]
    return GPU_KERNELS[op]

def fits(node, kernel):
    for c in kernel.constraint:
        allowed = c.allowed_values.list.type
        if allowed and c.name in node.attr:
            a = node.attr[c.name]
            if any(t not in allowed for t in ([a.type] if a.type else a.list.type)):
                return False
    return True

def host_only(graph_def):
    nodes = list(graph_def.node) + [n for f in graph_def.library.function for n in f.node_def]
    found = sorted({
        n.op + "(" + ",".join(sorted({tf.as_dtype(a.type).name for a in n.attr.values() if a.type})) + ")"
        for n in nodes
        if n.op not in ("_Arg", "_Retval", "NoOp") and not any(fits(n, k) for k in gpu_kernels(n.op))
    })
    return found, len(nodes)

def graphs(g):
    yield g
    for f in g._functions.values():
        inner = getattr(f, "graph", None)
        if inner is not None:
            yield from graphs(inner)

def bound(op, arg):
    # the tensors of op bound to its op-def argument `arg` (an input or an output, lists included)
    for args, tensors in ((op.op_def.input_arg, list(op.inputs)), (op.op_def.output_arg, list(op.outputs))):
        at = 0
        for a in args:
            n = op.get_attr(a.number_attr) if a.number_attr else (
                len(op.get_attr(a.type_list_attr)) if a.type_list_attr else 1)
            if a.name == arg:
                return tensors[at:at + n]
            at += n
    return []

def host_memory(graph):
    found = set()
    for g in graphs(graph):
        for op in g.get_operations():
            ks = [k for k in gpu_kernels(op.type) if fits(op.node_def, k)]
            ks = [k for k in ks if k.device_type == "GPU"] or ks
            for arg in (ks[0].host_memory_arg if ks else ()):
                for t in bound(op, arg):
                    n = t.shape.num_elements()
                    if n is not None and n > 16:
                        found.add(f"{op.type}({t.dtype.name}{t.shape.as_list()}:{arg})")
    return sorted(found)

def trace(model, precision, mode):
    overrides = [f"model={model}", "framework=tf", "+experiment=smoke", "device=cpu", f"precision={precision}",
                 f"mode={mode}"]
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        job = JobConfig.from_dict(OmegaConf.to_container(compose("config", overrides=overrides), resolve=True))
    bench = bench_module.TFBench(job)
    batch = bench.source.next()
    with bench._placed():
        fn_graph = bench._step.get_concrete_function(batch.inputs, batch.targets).graph
    found, nodes = host_only(fn_graph.as_graph_def())
    keras.backend.clear_session()
    return {"host_only": found, "host_memory": host_memory(fn_graph), "nodes": nodes, "policy": bench.prec.policy,
            "optimizer": type(bench.opt).__name__ if bench.opt is not None else None}

out = {"/".join(cell): trace(*cell) for cell in CELLS}
if not EXTRAS:  # the other process traces the controls, the yardsticks and the decoders
    print("STATS " + json.dumps(out))
    raise SystemExit
TFPrecision.wrap_optimizer = (
    lambda self, opt: keras.optimizers.LossScaleOptimizer(opt) if self.loss_scaling else opt)
out["control"] = trace("ncf", "amp", "train")

def traced_graph(fn, *specs):
    return tf.function(fn).get_concrete_function(*specs).graph

import bare_tf_ncf, bare_tf_ssd300, bare_tf_transformer
ids = tf.TensorSpec([64], tf.int32)
ncf = bare_tf_ncf.neumf(100, 50)
tr = bare_tf_transformer.Transformer(vocab=64, d=16, heads=2, d_ff=32, layers_=1, max_len=32)
toks = tf.TensorSpec([4, 16], tf.int32)
lookup = keras.layers.Embedding(100, 8)
out["yardsticks"] = {
    "ncf": host_memory(traced_graph(lambda u, i: ncf([u, i], training=False), ids, ids)),
    "ssd300": host_memory(traced_graph(
        bare_tf_ssd300.multibox_loss, tf.TensorSpec([2, 4, 108]), tf.TensorSpec([2, 81, 108]),
        tf.TensorSpec([2, 4, 108]), tf.TensorSpec([2, 108], tf.int32))),
    "transformer": host_memory(traced_graph(
        lambda s, t, l: bare_tf_transformer.label_smoothed_ce(tr((s, t), training=True), l), toks, toks, toks)),
    "control": host_memory(traced_graph(lambda u: lookup(u), ids)),
}

# graph-mode greedy decoding: a host loop of traced pieces (the encoder, then one call per position), the
# pieces traced by decoding 32 sentences (a smoke batch holds fewer than the check's 16 ids) at amp
def concrete(fns):
    return sorted({e for f in fns for c in f._list_all_concrete_functions() for e in host_memory(c.graph)})

from dlbench.workloads.translation.tensorflow import build_transformer
keras.mixed_precision.set_global_policy("mixed_float16")
src = tf.fill([32, 8], 5)
model = build_transformer(vocab=64, d_model=16, heads=2, ffn=32, encoder_layers=1, decoder_layers=1)
model.translate(src, 4, check_every=0, read_back=False)
tr = bare_tf_transformer.Transformer(vocab=64, d=16, heads=2, d_ff=32, layers_=1, max_len=32)
encode = tf.function(lambda s: tr.encode(s, masked=True))
decode = tf.function(tr.decode_step, reduce_retracing=True)
bare_tf_transformer.greedy(tr, src, 4, encode, decode)
out["decode"] = {"dlbench": concrete(model._decode_fns[False]), "yardstick": concrete([encode, decode])}
print("STATS " + json.dumps(out))
"""


@pytest.fixture(scope="module")
def traced() -> dict:
    """Every cell traced in two single-threaded processes at once (half the cells each, the controls,
    yardsticks and decoders in the second), one per core: tracing is a single-threaded host job."""
    env = worker_env(OMP_NUM_THREADS="1", TF_NUM_INTRAOP_THREADS="1", TF_NUM_INTEROP_THREADS="1")
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"

    def script(cells: list[tuple[str, str, str]], extras: bool) -> str:
        return (
            SCRIPT.replace("__CONF__", repr(str(CONF)))
            .replace("__CELLS__", repr(json.dumps(cells)))
            .replace("__EXTRAS__", repr(extras))
            .replace("__YARDSTICKS__", repr(str(ROOT / "yardsticks")))
        )

    with ThreadPoolExecutor(max_workers=2) as pool:
        parts = [pool.submit(run_snippet, script(CELLS[i::2], extras=i == 1), env) for i in (0, 1)]
        return {k: v for part in parts for k, v in part.result().items()}


def test_the_check_finds_keras_host_only_scatters(traced: dict) -> None:
    control = traced["control"]
    assert control["optimizer"] == "LossScaleOptimizer"
    assert control["host_only"] == ["TensorScatterUpdate(bool,int64)"]  # the int64 ids the model looks up


@pytest.mark.parametrize(("model", "precision", "mode"), CELLS)
def test_every_op_of_the_step_has_a_gpu_kernel(traced: dict, model: str, precision: str, mode: str) -> None:
    cell = traced[f"{model}/{precision}/{mode}"]
    assert cell["nodes"] > 100
    assert cell["host_only"] == [], (
        f"{model} {precision} {mode} on a GPU would run on the host: {cell['host_only']}"
    )
    if precision == "amp":
        assert cell["policy"] == "mixed_float16"
        assert mode == "infer" or cell["optimizer"] == "SparseLossScaleOptimizer"
    assert cell["host_memory"] == [], (
        f"{model} {precision} {mode} on a GPU would copy these to the host every step: {cell['host_memory']}"
    )


def test_the_check_finds_a_keras_lookup_of_int32_ids_in_host_memory(traced: dict) -> None:
    control = traced["yardsticks"]["control"]
    assert "Less(int32[64]:x)" in control and "AddV2(int32[64]:z)" in control, control


@pytest.mark.parametrize("harness", ["dlbench", "yardstick"])
def test_graph_mode_decoding_keeps_no_id_in_host_memory(traced: dict, harness: str) -> None:
    """Each position of the host loop is one call; an id tensor in host memory would make it copy the
    position's argmax to the host, and so wait for the GPU, before the next position is launched."""
    assert traced["decode"][harness] == []


@pytest.mark.parametrize("workload", ["ncf", "ssd300", "transformer"])
def test_the_yardsticks_keep_no_batch_tensor_in_host_memory(traced: dict, workload: str) -> None:
    assert traced["yardsticks"][workload] == []
