"""DALI-fed jobs for every framework through the CLI, and bad dataset input, through to MLflow."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import ROOT, TINY
from tests.worker_jobs import framework_pythons

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    out = tmp_path_factory.mktemp("images")
    subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "datasets" / "make_image_dataset.py"), "--out", str(out), "--classes", "3",
         "--per-class", "6", "--min-size", "64", "--max-size", "96", "--formats", "folder", "--workers", "2"],
        check=True, capture_output=True,
    )  # fmt: skip
    return out / "folder"


def test_every_framework_fed_by_dali(cli, images):
    """TF, torch and MXNet through their DALI plugins, JAX through DALI's (where its environment exists)."""
    frameworks = sorted(framework_pythons(("tf", "torch", "mxnet", "jax")))
    assert {"tf", "torch", "mxnet"} <= set(frameworks)
    res = cli.run(
        [
            f"framework={','.join(frameworks)}",
            "dataset=imagenet",
            f"dataset.path={images}",
            "data.num_threads=1",
            *TINY,
        ],
        timeout=900,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    kids = [r for r in cli.runs() if r.data.tags.get("dlbench.kind") == "job"]
    assert sorted(r.data.params["framework.name"] for r in kids) == frameworks
    for run in kids:
        assert run.info.status == "FINISHED"
        assert run.data.params["dataset.name"] == "imagenet"
        assert 0 <= run.data.metrics["data_wait_frac"] < 1 and run.data.metrics["throughput"] > 0
        assert run.data.tags["version.dali"]


@pytest.mark.parametrize(
    ("overrides", "says"),
    [
        (["dataset=imagenet"], "dataset.path"),
        (["dataset=imagenet", "dataset.path=/nonexistent/imagenet"], "/nonexistent/imagenet"),
    ],
)
def test_bad_dataset_input_is_one_line_before_the_worker(cli, overrides, says):
    res = cli.run([*overrides, *TINY], multirun=False, DLBENCH_IMAGENET="")
    out = res.stdout + res.stderr
    assert res.returncode == 1
    assert "Traceback" not in out
    lines = [line for line in out.splitlines() if "config error" in line]
    assert len(lines) == 1 and says in lines[0]
