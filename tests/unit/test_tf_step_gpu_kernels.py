"""Every op of dlbench's TensorFlow steps has a GPU kernel for its dtypes, so that outside XLA (execution=eager,
TF's graph mode) no op of a step is placed on the host. An op TF has no GPU kernel for runs on the CPU, with
its inputs copied there and back every step: Keras's float16 loss-scale check did that to NCF's four embedding
tables (a bool TensorScatterUpdate each) and kept the GPU 5.7% busy.

The real bench builds each workload with the precision plan of a GPU (float16 with loss scaling for amp) and
its step is traced here on the CPU; each node of the graph, nested functions included, is matched against TF's
kernel registry, the same for every machine of one TF build. A control traces NCF with Keras's own
LossScaleOptimizer and must find its four host-only scatters, or the check itself is broken.

TensorFlow runs in a subprocess, as in test_backend_tf.py (TF and torch's triton must not share a process).
"""

from __future__ import annotations

import importlib.util
import json

import pytest

from tests.conftest import CONF
from tests.worker_jobs import run_snippet, worker_env

if importlib.util.find_spec("tensorflow") is None:
    pytest.skip("tensorflow is not installed in this interpreter", allow_module_level=True)

MODELS = ("ncf", "transformer", "ssd300", "resnet50")
# mode=infer: the one-call steps (the Transformer decodes in graph mode as a host loop of traced pieces)
CELLS = [(m, p, "train") for m in MODELS for p in ("amp", "bf16", "fp32")] + [
    (m, "amp", "infer") for m in ("ncf", "ssd300", "resnet50")
]

SCRIPT = r"""
import json
import keras
import tensorflow as tf
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
from tensorflow.python.framework import kernels
import dlbench.backends.tensorflow.bench as bench_module
from dlbench.backends.tensorflow.precision import TFPrecision
from dlbench.config import JobConfig, register_configs
from dlbench.core.precision import plan_precision

CONF, CELLS = __CONF__, json.loads(__CELLS__)
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

def trace(model, precision, mode):
    overrides = [f"model={model}", "framework=tf", "+experiment=smoke", "device=cpu", f"precision={precision}",
                 f"mode={mode}"]
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        job = JobConfig.from_dict(OmegaConf.to_container(compose("config", overrides=overrides), resolve=True))
    bench = bench_module.TFBench(job)
    batch = bench.source.next()
    with bench._placed():
        graph = bench._step.get_concrete_function(batch.inputs, batch.targets).graph.as_graph_def()
    found, nodes = host_only(graph)
    keras.backend.clear_session()
    return {"host_only": found, "nodes": nodes, "policy": bench.prec.policy,
            "optimizer": type(bench.opt).__name__ if bench.opt is not None else None}

out = {"/".join(cell): trace(*cell) for cell in CELLS}
TFPrecision.wrap_optimizer = (
    lambda self, opt: keras.optimizers.LossScaleOptimizer(opt) if self.loss_scaling else opt)
out["control"] = trace("ncf", "amp", "train")
print("STATS " + json.dumps(out))
"""


@pytest.fixture(scope="module")
def traced() -> dict:
    env = worker_env(OMP_NUM_THREADS="1", TF_NUM_INTRAOP_THREADS="1", TF_NUM_INTEROP_THREADS="1")
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    script = SCRIPT.replace("__CONF__", repr(str(CONF))).replace("__CELLS__", repr(json.dumps(CELLS)))
    return run_snippet(script, env)


def test_the_check_finds_keras_host_only_scatters(traced: dict) -> None:
    control = traced["control"]
    assert control["optimizer"] == "LossScaleOptimizer"
    assert control["host_only"] == ["TensorScatterUpdate(bool,int32)"]


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
