"""One MLflow run as dlbench logs it: params, tags, metrics, series and artifacts, in batches.

Everything goes through MlflowClient with an explicit run id (never the fluent API's active run),
so a run started by `mlflow run` or by another job cannot be written to by mistake. Every param, tag
and text goes through `mask`: a password in a URI never reaches the store.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from mlflow.entities import Metric, Param, RunStatus, RunTag
from mlflow.tracking import MlflowClient
from mlflow.utils.validation import MAX_METRICS_PER_BATCH, MAX_PARAM_VAL_LENGTH, MAX_PARAMS_TAGS_PER_BATCH

from dlbench.core.names import PARENT_TAG
from dlbench.core.secrets import mask
from dlbench.tracking.bulk_metrics import bulk_log_metrics


def flatten(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """{"a": {"b": 1}} -> {"a.b": 1}: MLflow params are flat."""
    out: dict[str, Any] = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, f"{name}."))
        else:
            out[name] = value
    return out


def _chunks(items: list, size: int) -> Iterable[list]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


class RunLogger:
    def __init__(self, client: MlflowClient, run_id: str) -> None:
        self.client = client
        self.run_id = run_id

    @classmethod
    def create(
        cls,
        client: MlflowClient,
        experiment_id: str,
        name: str,
        parent_id: str | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> RunLogger:
        all_tags = dict(tags or {})
        if parent_id:
            all_tags[PARENT_TAG] = parent_id
        run = client.create_run(experiment_id, run_name=name, tags=all_tags)
        return cls(client, run.info.run_id)

    def params(self, values: Mapping[str, Any]) -> None:
        items = [Param(k, mask(_text(v))[:MAX_PARAM_VAL_LENGTH]) for k, v in values.items()]
        for chunk in _chunks(items, MAX_PARAMS_TAGS_PER_BATCH):
            self.client.log_batch(self.run_id, params=chunk)

    def tags(self, values: Mapping[str, Any]) -> None:
        items = [RunTag(k, mask(_text(v))) for k, v in values.items() if v is not None]
        for chunk in _chunks(items, MAX_PARAMS_TAGS_PER_BATCH):
            self.client.log_batch(self.run_id, tags=chunk)

    def metrics(self, values: Mapping[str, float], step: int = 0, timestamp: float | None = None) -> None:
        ms = int((timestamp or time.time()) * 1000)
        items = [Metric(k, float(v), ms, step) for k, v in values.items() if v is not None]
        self._log_metrics(items)

    def series(self, rows: list[dict[str, float]], time_key: str = "t") -> int:
        """Log each row's values as one point per series (step = row index, timestamp = row time)."""
        items = [
            Metric(k, float(v), int(row[time_key] * 1000), step)
            for step, row in enumerate(rows)
            for k, v in row.items()
            if k != time_key and v is not None
        ]
        if not bulk_log_metrics(self.client, self.run_id, items):
            self._log_metrics(items)
        return len(items)

    def _log_metrics(self, items: list[Metric]) -> None:
        for chunk in _chunks(items, MAX_METRICS_PER_BATCH):
            self.client.log_batch(self.run_id, metrics=chunk, synchronous=True)

    def artifact(self, path: Path, artifact_path: str | None = None) -> None:
        if path.exists():
            self.client.log_artifact(self.run_id, str(path), artifact_path)

    def text(self, text: str, name: str) -> None:
        self.client.log_text(self.run_id, mask(text), name)

    def finish(self, status: str) -> None:
        """status: FINISHED | FAILED | KILLED."""
        self.client.set_terminated(self.run_id, RunStatus.to_string(RunStatus.from_string(status)))


def _text(value: Any) -> str:
    return "null" if value is None else str(value)
