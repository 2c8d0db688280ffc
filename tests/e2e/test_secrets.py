"""Planted secrets (a URI password, query tokens, a signed URL) through the real CLI: in no line printed
(Hydra's launch lines, MLflow's "View run at", urllib3, dlbench's own) and in no file a run leaves (Hydra's
multirun.yaml and .hydra/*.yaml, run.log, the store, the artifacts, the report)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys

import pytest

from tests.conftest import ROOT, TINY
from tests.e2e.test_mlflow_server import server  # noqa: F401  (fixture)

pytestmark = pytest.mark.slow
SIGNED = "dataset.path='https://data.example/x.tar?X-Amz-Signature=PLANTsig77&token=PLANTtok88&v=1'"


def leaks(secrets: list[str], text: str, roots: list) -> list[str]:
    """Where any secret shows: 'output' and every file under `roots` that holds one."""
    found = ["output"] if any(s in text for s in secrets) else []
    for root in roots:
        for path in (p for p in root.rglob("*") if p.is_file()):
            data = path.read_bytes()
            found += [str(path)] if any(s.encode() in data for s in secrets) else []
    return found


@pytest.mark.parametrize("multirun", [True, False], ids=["sweep", "single"])
def test_no_planted_secret_is_printed_or_left_in_any_file(cli, server, tmp_path, multirun):  # noqa: F811
    secrets = ["PLANTpw66", "PLANTsig77", "PLANTtok88", "PLANTenv99"]
    uri = server["url"].replace("http://", "http://alice:PLANTpw66@")
    args = [sys.executable, str(ROOT / "src" / "run.py"), *(["-m"] if multirun else []), *TINY, SIGNED,
            f"tracking.uri={uri}", f"hydra.sweep.dir={cli.tmp / 'sweep'}", f"hydra.run.dir={cli.tmp / 'outputs'}"]  # fmt: skip
    env = cli.env(TF_FAKE_TOKEN="PLANTenv99", OMP_NUM_THREADS="1")
    res = subprocess.run(args, capture_output=True, text=True, timeout=600, cwd=ROOT, env=env)
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-3000:]
    assert "View run" in out and "#0 : " in out if multirun else "View run" in out  # the lines were printed
    (ui,) = [x for x in out.splitlines() if "MLflow UI:" in x] if multirun else [""]
    assert "alice" not in ui and "***" not in ui  # a link a browser opens (it asks for the password)
    written = cli.tmp / ("sweep" if multirun else "outputs")
    files = [p.name for p in written.rglob("*")]
    assert "config.yaml" in files and "overrides.yaml" in files and ("multirun.yaml" in files) == multirun
    assert leaks(secrets, out, [cli.tmp, server["art"]]) == []  # cli.tmp: Hydra's files and the store
    with sqlite3.connect(tmp_path / "mlflow.db") as c:  # the masked URI is what was recorded
        (value,) = c.execute("select value from params where key = 'tracking.uri' limit 1").fetchone()
    assert "alice:***@" in value
    env_json = next(written.rglob("environment.json")).read_text()
    assert '"OMP_NUM_THREADS"' in env_json and "TF_FAKE_TOKEN" not in env_json


@pytest.mark.parametrize(
    "uri",
    ["'postgresql://u:pw123@127.0.0.1:9/db?password=pw456'", "'http://u:pw321@127.0.0.1:9/?token=tok789'"],
    ids=["postgresql", "http"],
)
def test_an_unreachable_store_with_secrets_prints_and_leaves_none(cli, uri):
    args = [*cli.args([*TINY, SIGNED]), f"tracking.uri={uri}"]  # after the fixture's own store: it wins
    res = subprocess.run(args, capture_output=True, text=True, timeout=300, cwd=ROOT, env=cli.env())
    out = res.stdout + res.stderr
    assert res.returncode == 1 and "#0 : " in out and "Traceback" not in out, out[-3000:]
    assert (cli.tmp / "sweep" / "multirun.yaml").exists()
    assert leaks(["pw123", "pw456", "pw321", "tok789", "PLANTsig77", "PLANTtok88"], out, [cli.tmp]) == []
