"""Where runs go: the MLflow tracking URI, its experiment, and where artifacts are kept.

Default store: sqlite:///<project root>/mlflow.db, artifacts in <project root>/mlartifacts (beside
the database, for every experiment including MLflow's "Default"). A new sqlite database is created
(migrated: ~65 tables) by one process at a time, under a file lock beside it, into a temporary file
that is renamed into place, so neither two sweeps started together nor a signal or a kill during the
migration can leave a half-made store.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

from filelock import FileLock
from mlflow.tracking import MlflowClient

from dlbench.core.names import PROJECT_ROOT
from dlbench.core.secrets import mask
from dlbench.errors import ConfigError
from dlbench.tracking.ui_records import EXPERIMENT_TAGS, mark_model_training

SQLITE = "sqlite:///"
LOCK_TIMEOUT_S = 600
CONNECT_TIMEOUT_S = 5.0
# MLflow retries a failed HTTP request 7 times with back-off (3 to 120 s: over four minutes for a dead server)
# and waits 120 s for an answer; a benchmark should learn in seconds that its store is gone. A user's own
# setting of these variables wins.
HTTP_LIMITS = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "30",
}


class StoreError(ConfigError):
    """The store cannot be used as it is; the message names the file and the fix."""


def resolve_uri(configured: str | None) -> str:
    """tracking.uri, else $MLFLOW_TRACKING_URI, else the project's sqlite file."""
    return configured or os.environ.get("MLFLOW_TRACKING_URI") or f"{SQLITE}{PROJECT_ROOT / 'mlflow.db'}"


def artifact_location(uri: str) -> str | None:
    """For a sqlite store, keep artifacts beside the database (not in whatever the cwd is)."""
    if uri.startswith(SQLITE):
        db = Path(uri.removeprefix(SQLITE))
        return (db.parent / "mlartifacts").resolve().as_uri()
    return None


def create_sqlite_store(db: Path) -> None:
    """Make the database at `db` once, whoever else tries at the same time: the first process to get
    the lock migrates a temporary copy and renames it into place; the others find it there."""
    db.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(f"{db}.lock", timeout=LOCK_TIMEOUT_S):
        if db.exists() and db.stat().st_size > 0:
            return
        from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

        for stale in db.parent.glob(f".{db.name}.*.creating"):  # left by a process killed meanwhile
            stale.unlink(missing_ok=True)
        tmp = db.with_name(f".{db.name}.{os.getpid()}.creating")
        try:
            store = SqlAlchemyStore(f"{SQLITE}{tmp}", artifact_location(f"{SQLITE}{db}"))
            store.engine.dispose()
            os.replace(tmp, db)
        finally:
            tmp.unlink(missing_ok=True)


def check_server(uri: str) -> None:
    """An http(s) tracking server must accept a connection within seconds; else StoreError, one line."""
    parts = urlsplit(uri)
    if parts.scheme not in ("http", "https"):
        return
    for name, value in HTTP_LIMITS.items():
        os.environ.setdefault(name, value)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        socket.create_connection((parts.hostname or "localhost", port), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise StoreError(
            f"the MLflow tracking server {mask(uri)} is not reachable ({reason}); start it (make server) or "
            "check tracking.uri"
        ) from None


def open_store(uri: str, experiment: str) -> tuple[MlflowClient, str]:
    """Create the store if needed and return (client, experiment id)."""
    if uri.startswith(SQLITE):
        create_sqlite_store(Path(uri.removeprefix(SQLITE)))
    check_server(uri)
    try:
        with _quiet_mlflow():  # MLflow prints a damaged store's traceback itself before raising
            client = MlflowClient(tracking_uri=uri)
            found = client.get_experiment_by_name(experiment)
    except Exception as exc:
        raise StoreError(_broken(uri, exc)) from None
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


@contextlib.contextmanager
def _quiet_mlflow() -> Iterator[None]:
    logger = logging.getLogger("mlflow")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)


def _broken(uri: str, exc: Exception) -> str:
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
    if uri.startswith(SQLITE):
        db = uri.removeprefix(SQLITE)
        return (
            f"the MLflow store {db} cannot be opened ({first}); it is probably half-created by an "
            f"interrupted first run: move it away (mv {db} {db}.broken) and run again, or repair it with "
            f"`mlflow db upgrade {SQLITE}{db}`"
        )
    if uri.startswith("postgresql://") and "No module named 'psycopg'" in first:
        # SQLAlchemy's default PostgreSQL driver is psycopg (3); dlbench installs psycopg2
        fixed = mask(uri).replace("postgresql://", "postgresql+psycopg2://", 1)
        return (
            f"the MLflow store {mask(uri)} cannot be opened: a plain postgresql:// URI asks SQLAlchemy for the "
            f"psycopg 3 driver, which is not installed; the installed driver is psycopg2: use {fixed}"
        )
    return f"the MLflow store {mask(uri)} cannot be opened ({mask(first)}); check tracking.uri"
