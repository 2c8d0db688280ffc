"""Float16 loss scaling in TensorFlow with an embedding's sparse gradient: dlbench's LossScaleOptimizer checks
the looked-up rows only, so a graph-mode NCF step has no bool `TensorScatterUpdate` (an op TF can run only on
the host: Keras's own check puts one per embedding table in every step), and its verdict on finite and
non-finite gradients is Keras's. The TF yardsticks' optimizer is held to the same.

TensorFlow runs in a subprocess, as in test_backend_tf.py (TF and torch's triton must not share a process).
"""

from __future__ import annotations

import importlib.util

import pytest

from tests.worker_jobs import ROOT, run_snippet, worker_env

if importlib.util.find_spec("tensorflow") is None:
    pytest.skip("tensorflow is not installed in this interpreter", allow_module_level=True)

SCRIPT = r"""
import json, sys
import numpy as np
import keras
import tensorflow as tf
from tensorflow.python.framework import kernels
sys.path.insert(0, sys.argv[1])
import bare_tf_common
from dlbench.backends.tensorflow.losses import make_loss
from dlbench.backends.tensorflow.precision import TFPrecision
from dlbench.config import PrecisionConfig
from dlbench.core.precision import plan_precision
from dlbench.workloads.recommendation.spec import RecommendationConfig, spec as task_spec
from dlbench.workloads.recommendation.tensorflow import add_negatives, build_model

AMP = PrecisionConfig(name="amp", autocast=True, dtype="float16", cpu_dtype="bfloat16", loss_scale="dynamic")
prec = TFPrecision(plan_precision(AMP, "cuda"))  # float16 and loss scaling, as on a GPU
cfg = RecommendationConfig(num_users=50, num_items=30, factors=8, mlp_layers=[16, 8])
spec = task_spec(cfg)
keras.utils.set_random_seed(0)
model = build_model(cfg)
variables = model.trainable_variables
loss_fn = make_loss(spec)

def adam():
    return keras.optimizers.Adam(learning_rate=1e-3)

def bool_scatters(opt):
    # dlbench's train step (backends/tensorflow/bench.py) traced: bool TensorScatterUpdate nodes, nested
    # functions (the optimizer's cond branches) included
    opt.build(variables)
    def step(users, items):
        inputs, targets = add_negatives((users, items), spec)
        with tf.GradientTape() as tape:
            loss = loss_fn(model(list(inputs), training=True), *targets)
            scaled = opt.scale_loss(loss)
        opt.apply(tape.gradient(scaled, variables), variables)
        return loss
    ids = tf.TensorSpec([None], tf.int32)
    graph = tf.function(step).get_concrete_function(ids, ids).graph.as_graph_def()
    nodes = list(graph.node) + [n for f in graph.library.function for n in f.node_def]
    return sum(n.op == "TensorScatterUpdate" and n.attr["T"].type == tf.bool.as_datatype_enum for n in nodes)

gpu_bool = [k for k in kernels.get_registered_kernels_for_op("TensorScatterUpdate").kernel
            if k.device_type == "GPU" and any(c.name == "T" and tf.bool.as_datatype_enum in c.allowed_values.list.type
                                              for c in k.constraint)]
out = {
    "keras_scatters": bool_scatters(keras.optimizers.LossScaleOptimizer(adam())),
    "dlbench_scatters": bool_scatters(prec.wrap_optimizer(adam())),
    "yardstick_scatters": bool_scatters(bare_tf_common.SparseLossScaleOptimizer(adam())),
    "gpu_bool_kernels": len(gpu_bool),
}

# verdicts: dlbench's check against Keras's own on the same gradients
table = tf.zeros([6, 4])
def sparse(value):
    return tf.IndexedSlices(tf.constant([[1.0, 2.0, value, 0.0]] * 2), tf.constant([1, 4]), tf.shape(table))
cases = {
    "finite": [sparse(3.0), tf.ones([4])],
    "sparse_inf": [sparse(np.inf), tf.ones([4])],
    "sparse_nan": [sparse(np.nan), tf.ones([4])],
    "dense_nan": [sparse(3.0), tf.constant([1.0, np.nan, 0.0, 0.0])],
    "with_none": [None, sparse(3.0)],
}
keras_check = keras.optimizers.LossScaleOptimizer(adam())
mine = prec.wrap_optimizer(adam())
out["verdicts"] = {
    name: [bool(keras_check.check_finite(g)), bool(mine.check_finite(g)),
           bool(bare_tf_common.SparseLossScaleOptimizer(adam()).check_finite(g))]
    for name, g in cases.items()
}

# a non-finite sparse gradient skips the update and halves the scale; a finite one updates the rows
var = tf.Variable(tf.zeros([6, 4]))
opt = prec.wrap_optimizer(keras.optimizers.SGD(learning_rate=1.0))
opt.build([var])
scale0 = float(opt.dynamic_scale.numpy())
opt.apply([sparse(np.inf)], [var])
out["skipped"] = {"unchanged": bool(tf.reduce_all(var == 0.0)), "scale_ratio": float(opt.dynamic_scale.numpy()) / scale0}
opt.apply([sparse(3.0)], [var])
out["rows_changed"] = sorted(int(i) for i in np.flatnonzero(np.abs(var.numpy()).sum(1)))
print("STATS " + json.dumps(out))
"""


@pytest.fixture(scope="module")
def stats() -> dict:
    env = worker_env(OMP_NUM_THREADS="1", TF_NUM_INTRAOP_THREADS="1", TF_NUM_INTEROP_THREADS="1")
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    return run_snippet(SCRIPT.replace("sys.argv[1]", repr(str(ROOT / "yardsticks"))), env)


def test_keras_check_puts_a_host_only_scatter_per_table_and_dlbench_none(stats: dict) -> None:
    # TF registers no GPU kernel for a bool TensorScatterUpdate: outside XLA each one runs on the host
    assert stats["gpu_bool_kernels"] == 0
    assert stats["keras_scatters"] == 4  # NCF's four embedding tables
    assert stats["dlbench_scatters"] == 0
    assert stats["yardstick_scatters"] == 0


def test_verdicts_equal_keras_on_finite_and_non_finite_gradients(stats: dict) -> None:
    expected = {
        "finite": True,
        "sparse_inf": False,
        "sparse_nan": False,
        "dense_nan": False,
        "with_none": True,
    }
    for case, verdict in expected.items():
        assert stats["verdicts"][case] == [verdict] * 3, case


def test_non_finite_sparse_gradient_skips_the_step_and_halves_the_scale(stats: dict) -> None:
    assert stats["skipped"] == {"unchanged": True, "scale_ratio": 0.5}
    assert stats["rows_changed"] == [1, 4]
