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


def test_a_workload_contributes_its_data_format_from_its_folder(tmp_path):
    """The test-only workload registers `mlp_vectors` from tests/workloads/mlp/formats.py: the harness
    checks it, asks it whether DALI feeds it and opens it through the registry alone, with no edit of src/."""
    from dlbench.backends.skeleton import SpecBench
    from dlbench.config import JobConfig, validate
    from dlbench.data.registry import data_format, formats
    from dlbench.data.validate import check_dataset
    from dlbench.errors import ConfigError
    from dlbench.worker import fed_by_dali

    rng = np.random.default_rng(0)
    np.savez(tmp_path / "v.npz", x=rng.normal(size=(24, 16)), y=rng.integers(0, 2, 24))
    job = JobConfig.from_dict(
        {
            "model": {"name": "mlp", "task": "test_mlp"},
            "dataset": {"name": "vectors", "format": "mlp_vectors", "path": str(tmp_path / "v.npz")},
            "mode": "converge",
        }
    )
    assert formats()["mlp_vectors"] is data_format(job) and data_format(job).in_memory
    validate(job)  # mode=converge accepts it: the format is held in memory
    assert check_dataset(job) == {"dataset.resolved_format": "mlp_vectors", "dataset.found_samples": 24}
    assert fed_by_dali(job) is False
    bench = SpecBench(job)
    bench.open_source(lambda host: host)
    assert bench.in_memory.steps_per_epoch == 3 and bench.source.next().inputs["x"].shape == (8, 16)
    assert bench.units() == 8
    job.model.features = 5
    with pytest.raises(ConfigError, match="use model.features=16"):
        check_dataset(job)
    classifier = JobConfig.from_dict({"dataset": job.to_dict()["dataset"]})  # model=resnet50
    with pytest.raises(ConfigError, match="is test_mlp data: .* not model=resnet50") as err:
        check_dataset(classifier)
    assert "format folder (dataset=cifar10, dataset=imagenet)" in str(err.value) and "\n" not in str(
        err.value
    )


def test_an_unknown_format_is_one_line_listing_the_registered_ones():
    from dlbench.config import JobConfig, validate
    from dlbench.data.registry import formats
    from dlbench.errors import ConfigError

    job = JobConfig.from_dict({"dataset": {"name": "x", "format": "parquet", "path": "/tmp"}})
    with pytest.raises(ConfigError) as err:
        validate(job)
    message = str(err.value)
    assert "dataset.format='parquet'" in message and "\n" not in message
    assert all(name in message for name in formats() if name != "synthetic")


RACE = """
import threading
from dlbench.config import JobConfig
barrier, seen = threading.Barrier(8), []
def build():
    barrier.wait()  # all eight ask the registry at once, before any workload package is imported
    seen.append(type(JobConfig.from_dict({"model": {"name": "transformer", "task": "translation"}}).model).__name__)
threads = [threading.Thread(target=build) for _ in range(8)]
[t.start() for t in threads]; [t.join() for t in threads]
print(",".join(sorted(set(seen))))
"""


def test_threads_building_jobs_at_once_all_get_the_tasks_own_model_schema():
    """The registry imports the workload packages on first use; a thread asking meanwhile must wait for it,
    not read half a registry (a translation job then lost its model fields to the base schema)."""
    import subprocess
    import sys

    from tests.worker_jobs import worker_env

    proc = subprocess.run(
        [sys.executable, "-c", RACE], capture_output=True, text=True, env=worker_env(), timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "TranslationConfig"
