"""Every installed framework builds the same networks: equal parameters, FLOPs within 2%."""

from __future__ import annotations

import subprocess
import sys

import pytest

from dlbench.backends.interpreter import worker_python
from dlbench.config import JaxConfig
from dlbench.errors import ConfigError
from tests.conftest import ROOT

pytestmark = pytest.mark.slow


def _no_jax() -> bool:
    try:
        worker_python(JaxConfig())
    except ConfigError:
        return True
    return False


def test_parity_script_agrees_across_frameworks():
    res = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "tools" / "parity.py"), "--image-size", "32"],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr[-3000:]
    header = res.stdout.splitlines()[0]
    for fw in ("torch", "tf", "mxnet", *(() if _no_jax() else ("jax",))):
        assert f"{fw} params" in header, f"{fw} missing from the parity table:\n{res.stdout}"
    assert "parity: OK" in res.stdout
    assert "25,557,032" in res.stdout and "138,357,544" in res.stdout
    assert "31,832,577" in res.stdout  # NeuMF at MovieLens-20M sizes
    assert "22,894,902" in res.stdout  # SSD300 (DLE): the count does not depend on the input size


def test_parity_check_flags_a_different_network():
    sys.path.insert(0, str(ROOT / "scripts" / "tools"))
    from parity import check

    same = {"torch": {"m": {"params": 10, "gflops": 1.0}}, "tf": {"m": {"params": 10, "gflops": 1.01}}}
    assert check(same, ["m"]) == []
    other = {"torch": {"m": {"params": 10, "gflops": 1.0}}, "tf": {"m": {"params": 11, "gflops": 1.05}}}
    assert len(check(other, ["m"])) == 2
