"""scripts/datasets/get_movielens100k.py through the real CLI and the real pip, without the network: pip is
pointed at a local folder (PIP_NO_INDEX + PIP_FIND_LINKS) holding a stand-in recbole 1.2.1 wheel
whose ml-100k.inter member is generated here (the real ratings are never part of the tests)."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "datasets" / "get_movielens100k.py"
MEMBER = "recbole/dataset_example/ml-100k/ml-100k.inter"
HEADER = "user_id:token\titem_id:token\trating:float\ttimestamp:float"


def _inter(rows: int = 100_000) -> str:
    rng = np.random.default_rng(0)
    table = np.stack(
        [
            rng.integers(1, 944, rows),
            rng.integers(1, 1683, rows),
            rng.integers(1, 6, rows),
            rng.integers(8e8, 9e8, rows),
        ]
    ).T
    return HEADER + "\n" + "\n".join("\t".join(map(str, r)) for r in table.tolist()) + "\n"


def _wheel(folder: Path, inter: str | None) -> Path:
    """A minimal valid wheel named recbole 1.2.1 (pip reads its metadata), with `inter` as the member."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "recbole-1.2.1-py3-none-any.whl"
    info = "recbole-1.2.1.dist-info"
    files = {
        f"{info}/METADATA": "Metadata-Version: 2.1\nName: recbole\nVersion: 1.2.1\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        "recbole/__init__.py": "",
    }
    if inter is not None:
        files[MEMBER] = inter
    files[f"{info}/RECORD"] = "".join(f"{name},,\n" for name in files) + f"{info}/RECORD,,\n"
    with zipfile.ZipFile(path, "w") as zf:
        for name, text in files.items():
            zf.writestr(name, text)
    return path


def _run(dest: Path, links: Path, *args: str) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": str(links),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--dest", str(dest), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


@pytest.fixture(scope="module")
def inter() -> str:
    return _inter()


def test_fetches_the_wheel_with_pip_extracts_the_member_and_is_idempotent(tmp_path, inter):
    links, dest = tmp_path / "links", tmp_path / "data" / "ml-100k"
    _wheel(links, inter)
    first = _run(dest, links)
    assert first.returncode == 0, first.stderr
    assert "extracted from the recbole==1.2.1 wheel" in first.stdout
    target = dest / "ml-100k.inter"
    assert target.read_text() == inter
    assert sorted(p.name for p in dest.iterdir()) == ["ml-100k.inter"]  # nothing else left behind
    again = _run(dest, tmp_path / "empty-links")  # no wheel available: must not even try pip
    assert again.returncode == 0, again.stderr
    assert "already in place" in again.stdout
    assert target.read_text() == inter


def test_a_partial_file_is_replaced(tmp_path, inter):
    links, dest = tmp_path / "links", tmp_path / "ml-100k"
    _wheel(links, inter)
    dest.mkdir()
    (dest / "ml-100k.inter").write_text(inter[: len(inter) // 2])
    assert _run(dest, links).returncode == 0
    assert (dest / "ml-100k.inter").read_text() == inter


def test_pip_failure_is_one_line(tmp_path):
    (tmp_path / "links").mkdir()
    res = _run(tmp_path / "ml-100k", tmp_path / "links")
    assert res.returncode == 1
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("get_movielens100k: `pip download --no-deps recbole==1.2.1` failed")
    assert "Traceback" not in res.stderr and not (tmp_path / "ml-100k" / "ml-100k.inter").exists()


@pytest.mark.parametrize("member", [None, HEADER + "\n1\t2\t3\t4\n"])
def test_a_wheel_without_the_right_member_is_one_line(tmp_path, member):
    wheel = _wheel(tmp_path / "w", member)
    res = _run(tmp_path / "ml-100k", tmp_path / "links", "--wheel", str(wheel))
    assert res.returncode == 1
    assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr
    assert str(wheel) in res.stderr
    assert not (tmp_path / "ml-100k" / "ml-100k.inter").exists()
    assert not list((tmp_path / "ml-100k").glob("*.partial"))
