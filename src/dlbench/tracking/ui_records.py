"""What the MLflow UI needs to show dlbench's runs the way its users know them.

- The experiment's kind: `mlflow.experimentKind=custom_model_development` (the "Model training" kind).
  MLflow 3.17.2's UI, though, takes the kind from its GenAI / Model training switch (GenAI unless the
  browser chose otherwise) and opens a plain experiment link on the GenAI traces overview ("Traces 0"),
  tag or not; a link with `?workflowType=machine_learning` opens the runs table. dlbench sets the tag (what
  MLflow's API defines the kind by) and gives such links (`ui_url`).
- Each sweep's view of that table: the UI opens a link with `?viewStateShareKey=<key>` with the view state
  stored as the experiment tag `mlflow.sharedViewState.<key>` (what its "Share" button writes): this
  sweep's jobs only, fastest first, with the result columns shown (a plain runs table shows no metric or
  parameter column at all) and room for the run names (`share_sweep_view`).
- Each sweep's tidy results table, logged with `log_table`, so the UI's artifact view shows it as a table
  and its evaluation/compare views can read it.
- Real datasets as run inputs (`log_inputs`: name, digest, source path), so the UI's dataset column and
  dataset view show what a job read, and runs on the same files share a digest (data/validate.py).
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Iterable
from typing import Any

from mlflow.entities import Dataset, DatasetInput, InputTag
from mlflow.tracking import MlflowClient

from dlbench.core.names import (
    EXECUTION_TAG,
    PARENT_TAG,
    SERVE_SCENARIO_TAG,
    SERVE_VALID_TAG,
    STATUS_TAG,
    THROUGHPUT,
)

KIND_TAG = "mlflow.experimentKind"
MODEL_TRAINING = "custom_model_development"
EXPERIMENT_TAGS = {KIND_TAG: MODEL_TRAINING}
RESULTS_TABLE = "results_table.json"
LOCAL_UI = "http://127.0.0.1:5000"  # `make ui`: the UI over a sqlite store
VIEW_TAG_PREFIX = "mlflow.sharedViewState."  # + key: a view state the UI loads for ?viewStateShareKey=key
VIEW_KEY_PARAM = "viewStateShareKey"
# A sweep view's columns: the headline and its spread, what the job was (config params the job run logs,
# dlbench.recording), how it ran and how it ended (tags).
VIEW_METRICS = (THROUGHPUT, "throughput_cv", "step_time_ms")
VIEW_PARAMS = ("framework.name", "model.name", "precision.name", "mode", "batch_size")
VIEW_TAGS = (EXECUTION_TAG, STATUS_TAG)
# mode=serve logs LoadGen's figures, no throughput: a serving sweep's view shows those, lowest p90 first
SERVE_METRICS = ("latency_p90_ms", "latency_p99_ms", "qps", "samples_per_s")
SERVE_TAGS = (SERVE_SCENARIO_TAG, SERVE_VALID_TAG)
# The UI's own column ids before the result columns (run name, "Created", "Duration"): a view's column
# widths apply only to the columns its columnOrder lists, so the run name's width needs it listed.
RUN_NAME_COLUMN = "attributes.`Run Name`"
LEADING_COLUMNS = (RUN_NAME_COLUMN, "runDateAndNestInfo", "duration")
RUN_NAME_WIDTH = 320  # pixels: "torch-resnet_cifar-bf16-converge-seed2" whole (the UI's default: 190)
RESULT_WIDTH = 130  # pixels: "framework.name", "293.4794223" (the UI's default: 100)
DIGEST_STAT_LIMIT = (
    4096  # file sizes enter the digest up to this many files (a folder of 1.28M JPEGs: names only)
)


def mark_model_training(client: MlflowClient, experiment: Any) -> None:
    """Give an existing experiment (made before dlbench set the kind, or by `mlflow run`) the model-training
    kind; one that already has a kind keeps it. `experiment` is what get_experiment_by_name returned."""
    if KIND_TAG not in (experiment.tags or {}):
        client.set_experiment_tag(experiment.experiment_id, KIND_TAG, MODEL_TRAINING)


def ui_url(
    tracking_uri: str, experiment_id: str, run_id: str | None = None, view_key: str | None = None
) -> str:
    """The UI page of an experiment's runs table (or of one run) in the Model training view; `view_key`:
    the table as that shared view state shows it (`share_sweep_view`). For a store that is not a server
    (sqlite), the address `make ui` serves it on."""
    base = (
        _without_credentials(tracking_uri) if tracking_uri.startswith(("http://", "https://")) else LOCAL_UI
    )
    page = f"#/experiments/{experiment_id}/runs" + (f"/{run_id}" if run_id else "")
    query = {"workflowType": "machine_learning"} | ({VIEW_KEY_PARAM: view_key} if view_key else {})
    return f"{base}/{page}?{urllib.parse.urlencode(query)}"


def column_key(kind: str, name: str) -> str:
    """The UI's column id, its "canonical sort key": metrics.`throughput`, params.`framework.name`."""
    return f"{kind}.`{name}`"


def sweep_view(parent_run_id: str, modes: Iterable[str] = ()) -> dict[str, Any]:
    """The view state of one sweep's runs table: its jobs (they carry the parent's id), the fastest first,
    with the result columns in this order. `modes`: the sweep's job modes seen so far; with mode=serve
    among them LoadGen's columns join (and lead, lowest p90 first, when every job serves). The UI keeps its
    defaults for the keys not given here."""
    modes = set(modes)
    serve, only_serve = "serve" in modes, modes == {"serve"}
    metrics = (SERVE_METRICS if serve else ()) + (() if only_serve else VIEW_METRICS)
    columns = [column_key("metrics", m) for m in metrics]
    columns += [column_key("params", p) for p in VIEW_PARAMS]
    columns += [column_key("tags", t) for t in VIEW_TAGS + (SERVE_TAGS if serve else ())]
    first = (SERVE_METRICS[0], True) if only_serve else (THROUGHPUT, False)
    return {
        "searchFilter": f"tags.`{PARENT_TAG}` = '{parent_run_id}'",
        "orderByKey": column_key("metrics", first[0]),
        "orderByAsc": first[1],
        "selectedColumns": columns,
        "columnOrder": [*LEADING_COLUMNS, *columns],
        "columnWidths": {RUN_NAME_COLUMN: RUN_NAME_WIDTH} | {c: RESULT_WIDTH for c in columns},
    }


def sweep_view_key(parent_run_id: str) -> str:
    """The key of a sweep's view: its parent's run id, so the link needs nothing but the parent to build."""
    return parent_run_id


def share_sweep_view(
    client: MlflowClient, experiment_id: str, parent_run_id: str, modes: Iterable[str] = ()
) -> str:
    """Store the sweep's view as an experiment tag, through the tracking API as the UI's own "Share" does,
    and return its key. Written when the parent is made, so the view already shows a sweep still running,
    and again when a job of a mode not seen before joins (its columns differ: mode=serve)."""
    key = sweep_view_key(parent_run_id)
    view = json.dumps(sweep_view(parent_run_id, modes))
    client.set_experiment_tag(experiment_id, f"{VIEW_TAG_PREFIX}{key}", view)
    return key


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
