"""`tracking=server` for real: scripts/setup/server.sh starts PostgreSQL (Debian's package) and `mlflow server`
with basic auth on loopback; two sweeps of the real CLI run at once through it and all their jobs land;
the REST API finds them; a request without credentials is refused; stop leaves no process behind and a
restart finds the runs again in PostgreSQL's data directory."""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
import requests

from tests.conftest import ROOT, RUN, TINY

pytestmark = pytest.mark.slow  # PostgreSQL + mlflow server start-up: 20-60 s on a small machine
SERVER = ROOT / "scripts" / "setup" / "server.sh"
PG_BINARIES = sorted(Path("/usr/lib/postgresql").glob("*/bin/postgres"))
USER = "admin"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """scripts/setup/server.sh with its state in a directory of its own, on free loopback ports."""

    def __init__(self, state: Path) -> None:
        self.state = state
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.password = secrets.token_urlsafe(18)
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "DLBENCH_"))} | {
            "DLBENCH_SERVER_DIR": str(state),
            "DLBENCH_SERVER_PORT": str(self.port),
            "DLBENCH_PG_PORT": str(free_port()),
            "DLBENCH_SERVER_AUTH": "1",
            "DLBENCH_SERVER_PASSWORD": self.password,
            "DLBENCH_VENV": str(Path(sys.executable).parent.parent),
        }

    def script(self, command: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(SERVER), command], env=self.env, capture_output=True, text=True, timeout=400
        )

    def processes(self) -> list[int]:
        """Live pids of the mlflow server's process group and of PostgreSQL's postmaster."""
        pids = []
        pid_file, postmaster = self.state / "mlflow.pid", self.state / "pg" / "postmaster.pid"
        if pid_file.exists():
            group = int(pid_file.read_text())
            pids += [p.pid for p in psutil.process_iter() if _pgid(p.pid) == group]
        if postmaster.exists():
            pids.append(int(postmaster.read_text().splitlines()[0]))
        return [p for p in pids if psutil.pid_exists(p)]

    def auth(self) -> tuple[str, str]:
        return USER, self.password

    def search(self, experiment_ids: list[str], filter_string: str = "") -> list[dict]:
        res = requests.post(
            f"{self.url}/api/2.0/mlflow/runs/search",
            json={"experiment_ids": experiment_ids, "filter": filter_string, "max_results": 1000},
            auth=self.auth(),
            timeout=60,
        )
        res.raise_for_status()
        return res.json().get("runs", [])

    def experiment(self, name: str) -> dict:
        res = requests.get(
            f"{self.url}/api/2.0/mlflow/experiments/get-by-name",
            params={"experiment_name": name},
            auth=self.auth(),
            timeout=60,
        )
        res.raise_for_status()
        return res.json()["experiment"]


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    if not PG_BINARIES and not os.environ.get("DLBENCH_PG_BIN"):
        pytest.skip("PostgreSQL is not installed (apt-get install -y postgresql; .ci/run installs it)")
    # Not under pytest's tmp dir: that is private to this user (0700), and as root PostgreSQL runs as
    # another account that must be able to enter its data directory's parents.
    state = Path(tempfile.mkdtemp(prefix="dlbench-server-"))
    state.chmod(0o755)
    srv = Server(state / ".server")
    try:
        started = srv.script("start")
        assert started.returncode == 0, started.stdout + started.stderr
        assert f"MLFLOW_TRACKING_URI={srv.url}" in started.stdout.splitlines()
        assert srv.password not in started.stdout + started.stderr  # never printed
        yield srv
    finally:
        srv.script("stop")
        shutil.rmtree(state, ignore_errors=True)


def sweep(server: Server, out: Path, how: list[str]) -> subprocess.Popen:
    """The real CLI: a two-job sweep (train, infer) recorded through the server."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")} | {
        "MLFLOW_TRACKING_USERNAME": USER,
        "MLFLOW_TRACKING_PASSWORD": server.password,
        "DLBENCH_SERVER_URI": server.url,
        "OMP_NUM_THREADS": "1",
    }
    cmd = [
        sys.executable, str(RUN), "-m", *TINY, "framework=torch", "mode=train,infer", *how,
        "tracking.experiment=shared", f"hydra.sweep.dir={out}",
    ]  # fmt: skip
    return subprocess.Popen(
        cmd, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def test_two_sweeps_at_once_land_in_the_server(server: Server, tmp_path: Path):
    # one through the tracking=server preset ($DLBENCH_SERVER_URI), one with the URI given directly
    procs = [
        sweep(server, tmp_path / "a", ["tracking=server"]),
        sweep(server, tmp_path / "b", [f"tracking.uri={server.url}"]),
    ]
    outputs = [p.communicate(timeout=900)[0] for p in procs]
    for p, out in zip(procs, outputs, strict=True):
        assert p.returncode == 0, out[-3000:]

    exp = server.experiment("shared")
    assert {"key": "mlflow.experimentKind", "value": "custom_model_development"} in exp["tags"]
    runs = server.search([exp["experiment_id"]])
    tags = {r["info"]["run_id"]: {t["key"]: t["value"] for t in r["data"].get("tags", [])} for r in runs}
    parents = [r for r in runs if tags[r["info"]["run_id"]]["dlbench.kind"] == "sweep"]
    jobs = [r for r in runs if tags[r["info"]["run_id"]]["dlbench.kind"] == "job"]
    assert len(parents) == 2 and len(jobs) == 4
    assert {r["info"]["status"] for r in runs} == {"FINISHED"}
    for parent in parents:
        pid = parent["info"]["run_id"]
        found = server.search([exp["experiment_id"]], f"tags.`mlflow.parentRunId` = '{pid}'")
        assert sorted(next(p["value"] for p in r["data"]["params"] if p["key"] == "mode") for r in found) == [
            "infer",
            "train",
        ]
    # artifacts went through the server into its destination, not into a client-side path
    artifacts = server.state / "artifacts"
    assert len(list(artifacts.rglob("config.yaml"))) == 4
    assert len(list(artifacts.rglob("report.html"))) == 2


def test_basic_auth_refuses_requests_without_the_right_credentials(server: Server):
    search = f"{server.url}/api/2.0/mlflow/experiments/search"
    body = {"max_results": 10}
    assert requests.post(search, json=body, timeout=60).status_code == 401
    assert requests.post(search, json=body, auth=(USER, "wrong-password-1"), timeout=60).status_code == 401
    assert requests.post(search, json=body, auth=server.auth(), timeout=60).status_code == 200


def test_stop_leaves_no_process_and_a_restart_keeps_the_runs(server: Server):
    requests.post(
        f"{server.url}/api/2.0/mlflow/experiments/create",
        json={"name": "kept"},
        auth=server.auth(),
        timeout=60,
    ).raise_for_status()
    assert server.processes()
    stopped = server.script("stop")
    assert stopped.returncode == 0, stopped.stderr
    deadline = time.monotonic() + 30
    while server.processes() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert server.processes() == []
    with pytest.raises(requests.ConnectionError):
        requests.get(f"{server.url}/health", timeout=5)
    started = server.script("start")
    assert started.returncode == 0, started.stdout + started.stderr
    assert server.experiment("kept")["lifecycle_stage"] == "active"
