"""What the MLflow UI reads, written into a real sqlite store: the experiment's kind, a sweep's results
table, a dataset input."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
from mlflow.tracking import MlflowClient

from dlbench.data.validate import files_digest
from dlbench.tracking.run_logger import RunLogger
from dlbench.tracking.store import open_store
from dlbench.tracking.ui_records import (
    KIND_TAG,
    MODEL_TRAINING,
    RESULTS_TABLE,
    log_dataset_input,
    log_results_table,
)


def test_new_experiments_are_model_training(tmp_path: Path):
    client, eid = open_store(f"sqlite:///{tmp_path / 'mlflow.db'}", "dlbench")
    assert client.get_experiment(eid).tags[KIND_TAG] == MODEL_TRAINING


def test_an_older_experiment_gets_the_kind_and_a_chosen_kind_is_kept(tmp_path: Path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(uri)
    old = client.create_experiment("old")  # as dlbench made them before
    genai = client.create_experiment("genai", tags={KIND_TAG: "genai_development"})
    assert open_store(uri, "old")[1] == old
    assert client.get_experiment(old).tags[KIND_TAG] == MODEL_TRAINING
    open_store(uri, "genai")
    assert client.get_experiment(genai).tags[KIND_TAG] == "genai_development"


def test_results_table_is_an_mlflow_table(tmp_path: Path):
    client, eid = open_store(f"sqlite:///{tmp_path / 'mlflow.db'}", "dlbench")
    parent = RunLogger.create(client, eid, "sweep")
    table = pd.DataFrame(
        {
            "framework": ["torch", "tf"],
            "precision": ["fp32", "fp32"],
            "throughput": [100.0, float("nan")],
            "run_id": ["a", "b"],
        }
    )
    log_results_table(client, parent.run_id, table)
    logged = json.loads(client.get_run(parent.run_id).data.tags["mlflow.loggedArtifacts"])
    assert {"path": RESULTS_TABLE, "type": "table"} in logged  # what the UI's table views look for
    saved = json.loads(
        Path(client.download_artifacts(parent.run_id, RESULTS_TABLE, str(tmp_path))).read_text()
    )
    assert saved["columns"] == ["framework", "precision", "throughput", "run_id"]
    assert saved["data"][0] == ["torch", "fp32", 100.0, "a"]
    assert saved["data"][1][2] is None  # not measured stays empty, not 0


def test_dataset_input_names_digest_and_path(tmp_path: Path):
    data = tmp_path / "imgs"
    (data / "cat").mkdir(parents=True)
    files = []
    for i in range(3):
        f = data / "cat" / f"{i}.jpg"
        f.write_bytes(b"x" * (10 + i))
        files.append(str(f))
    digest = files_digest(str(data), files)
    client, eid = open_store(f"sqlite:///{tmp_path / 'mlflow.db'}", "dlbench")
    run = RunLogger.create(client, eid, "job")
    log_dataset_input(client, run.run_id, "imagenet", digest, str(data), "training", num_samples=3)
    (inp,) = client.get_run(run.run_id).inputs.dataset_inputs
    assert (inp.dataset.name, inp.dataset.digest) == ("imagenet", digest)
    assert json.loads(inp.dataset.source) == {"uri": str(data)}
    assert json.loads(inp.dataset.profile) == {"num_rows": 3}
    assert [(t.key, t.value) for t in inp.tags] == [("mlflow.data.context", "training")]


def test_digest_follows_the_files_not_where_they_are_mounted(tmp_path: Path):
    def tree(root: Path, sizes: list[int]) -> list[str]:
        (root / "a").mkdir(parents=True)
        out = []
        for i, n in enumerate(sizes):
            (root / "a" / f"{i}.jpg").write_bytes(b"x" * n)
            out.append(str(root / "a" / f"{i}.jpg"))
        return out

    one, two, changed = (
        tree(tmp_path / "m1", [5, 6]),
        tree(tmp_path / "m2", [5, 6]),
        tree(tmp_path / "m3", [5, 7]),
    )
    d1 = files_digest(str(tmp_path / "m1"), one)
    assert d1 == files_digest(str(tmp_path / "m2"), list(reversed(two)))  # other mount, other order
    assert d1 != files_digest(str(tmp_path / "m3"), changed)  # a file changed size
    assert files_digest(str(tmp_path / "m1"), one, stat_limit=1) == files_digest(
        str(tmp_path / "m3"), changed, stat_limit=1
    )  # past the limit only names count
    assert len(d1) == 16
