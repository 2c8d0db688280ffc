"""Shared fixtures: Hydra composition over conf/ and the real CLI in a subprocess."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

import tests.workloads.mlp  # noqa: F401  (registers the test-only workload in this process)
from dlbench.backends.tensorflow.capability import bf16_under_cap
from dlbench.core.cpu import onednn_avx512_core

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "conf"
RUN = ROOT / "src" / "run.py"
# Small and fast, yet the real code path: a CIFAR ResNet-8 at 32x32, batch 2, a few steps.
TINY = ["+experiment=smoke", "model=resnet_cifar", "model.depth=8"]
# MXNet 1.9.1 computes bfloat16 (what precision=amp means on a CPU) only with oneDNN's AVX-512 kernels: on
# an AVX2-only CPU, or with ONEDNN_MAX_CPU_ISA=AVX2, its amp cells are skipped with their reason, not run.
MXNET_BF16 = onednn_avx512_core() is None
# TensorFlow's bfloat16 fails on an AVX-512 CPU whose oneDNN is capped below AVX-512 (backends/tensorflow/
# capability.py): there, with ONEDNN_MAX_CPU_ISA=AVX2, its amp cells are skipped with their reason too.
TF_BF16 = bf16_under_cap() is None


def pytest_configure(config) -> None:
    """One folder of network FLOP counts for the session's workers (backends/stats_cache.py), not the user's
    ~/.cache: a test sees counts made by the code under test only. Set before collection, since some test
    modules copy the environment for their workers when they are imported."""
    config.stats_cache = tempfile.mkdtemp(prefix="dlbench-stats-cache-")
    os.environ["DLBENCH_CACHE"] = config.stats_cache


def pytest_unconfigure(config) -> None:
    os.environ.pop("DLBENCH_CACHE", None)
    if folder := getattr(config, "stats_cache", None):
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def compose() -> Callable[..., object]:
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    from dlbench.config import register_configs

    register_configs()

    def _compose(overrides: list[str] | None = None, hydra: bool = False):
        with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
            return hydra_compose(config_name="config", overrides=overrides or [], return_hydra_config=hydra)

    return _compose


class Cli:
    """Runs `python src/run.py` with its MLflow store and Hydra outputs inside a tmp dir."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.db = tmp / "mlflow.db"
        self.uri = f"sqlite:///{self.db}"

    def args(self, overrides: list[str], multirun: bool = True) -> list[str]:
        where = [
            f"tracking.uri={self.uri}",
            f"hydra.sweep.dir={self.tmp / 'sweep'}",
            f"hydra.run.dir={self.tmp / 'run'}",
        ]
        return [sys.executable, str(RUN), *(["-m"] if multirun else []), *overrides, *where]

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
        env.update(extra)
        return env

    def run(self, overrides: list[str], multirun: bool = True, timeout: float = 600, **env: str):
        return subprocess.run(
            self.args(overrides, multirun),
            capture_output=True,
            text=True,
            timeout=timeout,
            env=self.env(**env),
            cwd=ROOT,
        )

    def popen(self, overrides: list[str], multirun: bool = True, **env: str) -> subprocess.Popen:
        return subprocess.Popen(
            self.args(overrides, multirun),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=self.env(**env),
            cwd=ROOT,
        )

    def client(self):
        from mlflow.tracking import MlflowClient

        return MlflowClient(tracking_uri=self.uri)

    def runs(self, experiment: str = "dlbench"):
        client = self.client()
        exp = client.get_experiment_by_name(experiment)
        assert exp is not None, f"experiment {experiment} was not created"
        return client.search_runs([exp.experiment_id])

    def not_run(self, experiment: str = "dlbench") -> list[str]:
        """The cells the sweeps' parent runs list as not runnable on this machine ("cell: reason")."""
        parents = [r for r in self.runs(experiment) if "mlflow.parentRunId" not in r.data.tags]
        return sorted(v for p in parents for k, v in p.data.tags.items() if k.startswith("dlbench.not_run."))


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """One line after pytest's short summary, just before its closing count: how many tests were skipped
    and why, grouped by reason (most need a Debian package that `make test` does not install)."""
    yield
    skipped = terminalreporter.stats.get("skipped", [])
    if not skipped:
        return
    reasons: dict[str, int] = {}
    for rep in skipped:
        reason = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
        reason = reason.removeprefix("Skipped: ")
        reasons[reason] = reasons.get(reason, 0) + 1
    parts = "; ".join(f"{n} x {reason}" for reason, n in sorted(reasons.items(), key=lambda kv: -kv[1]))
    terminalreporter.write_line(
        f"dlbench: {len(skipped)} skipped: {parts} (bash .ci/run installs what they need, as root)"
    )


def pytest_collection_modifyitems(session, config, items) -> None:
    """Tests that load TensorFlow into this process (the `tf_models` fixture builds yardstick networks here)
    run last, whatever order the paths were given in: torch's triton, which a later torch.compile test loads,
    segfaults in a process that has TensorFlow. Every other test keeps TF in a subprocess."""
    items.sort(key=lambda item: "tf_models" in getattr(item, "fixturenames", ()))
