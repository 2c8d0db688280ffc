"""Task specs as data: synthetic batches drawn from a spec, unit counting on the host, the shared
learning-rate schedule, and the registry (no framework involved)."""

from __future__ import annotations

import numpy as np
import pytest

from dlbench.core.spec import OptimizerSpec, TaskSpec, TensorSpec, count_nonzero
from dlbench.data.synthetic import synthetic_batch
from dlbench.workloads.classification.spec import ClassificationConfig
from dlbench.workloads.registry import task_spec, unknown_task, workloads
from tests.conftest import ROOT

TASKS = workloads()  # every registered workload, the test-only one included (tests/conftest.py)


def test_classification_batch_follows_the_spec_and_is_the_same_every_time():
    spec = task_spec(ClassificationConfig(image_size=16, num_classes=5))
    a, b = synthetic_batch(spec, 4), synthetic_batch(spec, 4)
    assert a.inputs["image"].shape == (4, 3, 16, 16) and a.inputs["image"].dtype == np.float32
    labels = a.targets["label"]
    assert labels.dtype == np.int64 and labels.min() >= 0 and labels.max() < 5
    assert np.array_equal(a.inputs["image"], b.inputs["image"])  # seed 0: identical in every framework
    assert a.units == 4 and spec.unit == "images"


def test_variable_axes_and_token_counts():
    # What a translation spec looks like: ids with padding 0 at the end, units = non-padding targets.
    spec = TaskSpec(
        task="toy",
        inputs={"src": TensorSpec(("src_len",), "int64", 1, 100)},
        targets={"tgt": TensorSpec(("tgt_len",), "int64", 0, 100)},
        loss="x",
        metric="y",
        optimizer=OptimizerSpec(),
        unit="target tokens",
        count_units=count_nonzero("tgt"),
        axes={"src_len": 7, "tgt_len": 5},
    )
    batch = synthetic_batch(spec, 3)
    assert batch.inputs["src"].shape == (3, 7) and batch.targets["tgt"].shape == (3, 5)
    assert batch.units == int(np.count_nonzero(batch.targets["tgt"]))
    padded = {"tgt": np.array([[5, 6, 0, 0], [7, 0, 0, 0]])}
    assert count_nonzero("tgt")(padded) == 3


def test_lr_factor_is_the_transformer_schedule():
    opt = OptimizerSpec("adam", lr=1.0, warmup_steps=4, decay="inverse_sqrt")
    assert [opt.lr_factor(s) for s in range(4)] == pytest.approx([0.25, 0.5, 0.75, 1.0])
    assert opt.lr_factor(15) == pytest.approx((4 / 16) ** 0.5)
    assert OptimizerSpec("sgd", lr=0.01, momentum=0.9).lr_factor(1000) == 1.0


def test_registry():
    assert {"classification", "test_mlp"} <= set(TASKS) and TASKS["test_mlp"].test_only
    message = unknown_task("detection3d")
    assert "model.task='detection3d'" in message and "test_mlp" not in message and "\n" not in message
    assert unknown_task("classification") is None
    for name, task in TASKS.items():
        assert task.config().task == name  # a family's config defaults to its own task


def test_the_test_only_workload_is_one_folder_under_tests_that_src_never_names():
    """A workload is one folder: the test-only one lives in tests/workloads/mlp/ and is registered from
    there (tests/conftest.py in this process, $DLBENCH_WORKLOADS in the workers), so the registry, the
    contract test and the worker find it in every framework although no file under src/ names it."""
    assert TASKS["test_mlp"].package == "tests.workloads.mlp"
    sources = sorted((ROOT / "src").rglob("*.py"))
    assert [
        p.name for p in sources if "test_mlp" in p.read_text() or "tests.workloads" in p.read_text()
    ] == []
