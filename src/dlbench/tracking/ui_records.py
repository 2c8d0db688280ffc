"""What the MLflow UI needs to show dlbench's runs the way its users know them.

- The experiment's kind: `mlflow.experimentKind=custom_model_development` (the "Model training" kind).
  MLflow 3.17.2's UI, though, takes the kind from its GenAI / Model training switch (GenAI unless the
  browser chose otherwise) and opens a plain experiment link on the GenAI traces overview ("Traces 0"),
  tag or not; a link with `?workflowType=machine_learning` opens the runs table. dlbench sets the tag (what
  MLflow's API defines the kind by) and gives such links (`ui_url`).
- Each sweep's tidy results table, logged with `log_table`, so the UI's artifact view shows it as a table
  and its evaluation/compare views can read it.
- Real datasets as run inputs (`log_inputs`: name, digest, source path), so the UI's dataset column and
  dataset view show what a job read, and runs on the same files share a digest (data/validate.py).
"""

from __future__ import annotations

import json
import urllib.parse
from typing import Any

from mlflow.entities import Dataset, DatasetInput, InputTag
from mlflow.tracking import MlflowClient

KIND_TAG = "mlflow.experimentKind"
MODEL_TRAINING = "custom_model_development"
EXPERIMENT_TAGS = {KIND_TAG: MODEL_TRAINING}
RESULTS_TABLE = "results_table.json"
LOCAL_UI = "http://127.0.0.1:5000"  # `make ui`: the UI over a sqlite store
DIGEST_STAT_LIMIT = (
    4096  # file sizes enter the digest up to this many files (a folder of 1.28M JPEGs: names only)
)


def mark_model_training(client: MlflowClient, experiment: Any) -> None:
    """Give an existing experiment (made before dlbench set the kind, or by `mlflow run`) the model-training
    kind; one that already has a kind keeps it. `experiment` is what get_experiment_by_name returned."""
    if KIND_TAG not in (experiment.tags or {}):
        client.set_experiment_tag(experiment.experiment_id, KIND_TAG, MODEL_TRAINING)


def ui_url(tracking_uri: str, experiment_id: str, run_id: str | None = None) -> str:
    """The UI page of an experiment's runs table (or of one run) in the Model training view. For a store
    that is not a server (sqlite), the address `make ui` serves it on."""
    base = (
        _without_credentials(tracking_uri) if tracking_uri.startswith(("http://", "https://")) else LOCAL_UI
    )
    page = f"#/experiments/{experiment_id}/runs" + (f"/{run_id}" if run_id else "")
    return f"{base}/{page}?workflowType=machine_learning"


def _without_credentials(uri: str) -> str:
    """The server's address a browser opens: no user:password (the browser asks), no query (tokens)."""
    parts = urllib.parse.urlsplit(uri)
    host = parts.hostname or ""
    netloc = f"[{host}]" if ":" in host else host
    netloc += f":{parts.port}" if parts.port else ""
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", "")).rstrip("/")


def log_results_table(client: MlflowClient, run_id: str, table: Any) -> None:
    """Log a sweep's results (a pandas DataFrame, one row per job) as an MLflow table on its parent run.
    MLflow appends to an existing table of that name, so call it once per run."""
    client.log_table(run_id, data=table, artifact_file=RESULTS_TABLE)


def log_dataset_input(
    client: MlflowClient,
    run_id: str,
    name: str,
    digest: str,
    path: str,
    context: str,
    num_samples: int | None = None,
) -> None:
    """Record a real dataset as an input of the run. context: MLflow's usage label, "training" or
    "evaluation" (mode=infer)."""
    dataset = Dataset(
        name=name,
        digest=digest,
        source_type="local",
        source=json.dumps({"uri": path}),
        profile=json.dumps({"num_rows": num_samples}) if num_samples is not None else None,
    )
    client.log_inputs(
        run_id, datasets=[DatasetInput(dataset, tags=[InputTag("mlflow.data.context", context)])]
    )
