"""A real `mlflow server` over a fresh sqlite store on a free loopback port, for end-to-end tests."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from mlflow.tracking import MlflowClient

MLFLOW = Path(sys.executable).parent / "mlflow"
START_TIMEOUT_S = 90  # usually 5-15 s; measured 36 s on a 2-core machine shared with other jobs


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def mlflow_server(tmp_path: Path) -> Iterator[dict]:
    """mlflow server over tmp/mlflow.db; artifacts proxied (mlflow-artifacts:/) into tmp/art. The server
    runs in its own process group, terminated whatever the test did. Yields {"url", "art", "db"}."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    art = tmp_path / "art"
    db = f"sqlite:///{tmp_path / 'mlflow.db'}"
    log_path = tmp_path / "server.log"
    cmd = [
        str(MLFLOW), "server",
        "--backend-store-uri", db,
        "--default-artifact-root", "mlflow-artifacts:/",  # clients upload through the server ...
        "--artifacts-destination", str(art),  # ... which stores the files here
        "--serve-artifacts",
        "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
    ]  # fmt: skip
    # Migrate the new database here (mlflow is imported already) rather than in the server's start-up,
    # and skip the server's background job runners (several more processes importing mlflow).
    MlflowClient(db).search_experiments()
    env = os.environ | {"MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path, env=env, start_new_session=True
        )
        try:
            _wait_healthy(proc, url, log_path)
            yield {"url": url, "art": art, "db": db}
        finally:
            try:
                os.killpg(proc.pid, signal.SIGTERM)  # the server and its uvicorn worker
                proc.wait(timeout=20)
            except ProcessLookupError:
                pass
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)


def _wait_healthy(proc: subprocess.Popen, url: str, log_path: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        if proc.poll() is not None:
            pytest.fail(f"mlflow server exited ({proc.returncode}): {log_path.read_text()[-2000:]}")
        try:
            if requests.get(f"{url}/health", timeout=2).status_code == 200:
                return
        except requests.RequestException:  # not listening yet, or busy starting
            pass
        if time.monotonic() > deadline:
            pytest.fail(f"mlflow server not healthy after {START_TIMEOUT_S}s: {log_path.read_text()[-2000:]}")
        time.sleep(0.5)
