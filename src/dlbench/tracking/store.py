"""Where runs go: the MLflow tracking URI, its experiment, and where artifacts are kept.

Default store: sqlite:///<project root>/mlflow.db, artifacts in <project root>/mlartifacts. A sqlite
database must be created (migrated) by one process before several can use it; `open_store` does that.
"""

from __future__ import annotations

import os
from pathlib import Path

from mlflow.tracking import MlflowClient

from dlbench.tracking.ui_records import EXPERIMENT_TAGS, mark_model_training

PROJECT_ROOT = Path(__file__).resolve().parents[3]


def resolve_uri(configured: str | None) -> str:
    """tracking.uri, else $MLFLOW_TRACKING_URI, else the project's sqlite file."""
    return configured or os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{PROJECT_ROOT / 'mlflow.db'}"


def artifact_location(uri: str) -> str | None:
    """For a sqlite store, keep artifacts beside the database (not in whatever the cwd is)."""
    if uri.startswith("sqlite:///"):
        db = Path(uri.removeprefix("sqlite:///"))
        return (db.parent / "mlartifacts").resolve().as_uri()
    return None


def open_store(uri: str, experiment: str) -> tuple[MlflowClient, str]:
    """Create the store if needed and return (client, experiment id)."""
    if uri.startswith("sqlite:///"):
        Path(uri.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    client = MlflowClient(tracking_uri=uri)
    found = client.get_experiment_by_name(experiment)
    if found is not None:
        mark_model_training(client, found)
        return client, found.experiment_id
    try:
        return client, client.create_experiment(
            experiment, artifact_location=artifact_location(uri), tags=EXPERIMENT_TAGS
        )
    except Exception:  # created meanwhile by another process
        found = client.get_experiment_by_name(experiment)
        if found is None:
            raise
        return client, found.experiment_id
