"""The network's FLOP count is counted once per framework, model and code, then read back from disk."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dlbench.backends.stats_cache import cache_dir, cached_gflops, stats_key
from dlbench.config import JobConfig
from tests.worker_jobs import run_worker, tiny_job, worker_env

TORCH = {"torch": "2.14.1"}


def _resnet(depth: int = 8, batch: int = 2):
    model = JobConfig.from_dict({}).model
    model.name, model.depth, model.image_size, model.num_classes, model.batch_size = (
        "resnet_cifar", depth, 32, 10, batch,
    )  # fmt: skip
    return model


def test_the_key_follows_what_changes_the_count() -> None:
    key = stats_key("torch", TORCH, _resnet(), "dlbench.workloads.classification")
    assert key == stats_key("torch", TORCH, _resnet(batch=64), "dlbench.workloads.classification")
    assert key != stats_key("torch", TORCH, _resnet(depth=14), "dlbench.workloads.classification")
    assert key != stats_key("tf", TORCH, _resnet(), "dlbench.workloads.classification")
    assert key != stats_key("torch", {"torch": "2.15.0"}, _resnet(), "dlbench.workloads.classification")


def test_a_count_is_made_once_then_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DLBENCH_CACHE", str(tmp_path))
    calls = []

    def count() -> float:
        calls.append(1)
        return 4.1

    assert cached_gflops("k", count) == 4.1
    assert cached_gflops("k", count) == 4.1
    assert len(calls) == 1
    assert json.loads((tmp_path / "model_stats" / "k.json").read_text()) == {"gflops": 4.1}
    assert [p.name for p in (tmp_path / "model_stats").iterdir()] == ["k.json"]  # no temporary file left


def test_a_broken_or_unwritable_cache_counts_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DLBENCH_CACHE", str(tmp_path))
    (tmp_path / "model_stats").mkdir()
    (tmp_path / "model_stats" / "k.json").write_text("{not json")
    assert cached_gflops("k", lambda: 2.5) == 2.5
    assert cached_gflops("k", lambda: 9.0) == 2.5  # the broken file was replaced by the count
    blocked = tmp_path / "file"
    blocked.write_text("")
    monkeypatch.setenv("DLBENCH_CACHE", str(blocked))  # a file where the folder should be
    assert cached_gflops("k", lambda: 3.0) == 3.0


def test_off_turns_it_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DLBENCH_CACHE", "off")
    assert cache_dir() is None
    assert cached_gflops("k", lambda: 1.0) == 1.0
    assert cached_gflops("k", lambda: 2.0) == 2.0
    monkeypatch.delenv("DLBENCH_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", "/somewhere")
    assert cache_dir() == Path("/somewhere/dlbench")


def test_the_worker_counts_once_and_reads_the_count_back(tmp_path: Path) -> None:
    """Two torch jobs of one network at different precisions: the first counts and keeps the count, the
    second reports the kept one (changed here to show it is read, not counted again)."""
    env = worker_env(OMP_NUM_THREADS="1", DLBENCH_CACHE=str(tmp_path / "cache"))
    rc, events, err = run_worker(
        tiny_job("torch", {"mode": "infer", "precision": "fp32"}), tmp_path / "a.json", env
    )
    assert rc == 0, err[-2000:]
    counted = next(e for e in events if e["event"] == "done")["gflops"]
    kept = list((tmp_path / "cache" / "model_stats").glob("*.json"))
    assert len(kept) == 1 and json.loads(kept[0].read_text())["gflops"] == pytest.approx(counted)
    kept[0].write_text(json.dumps({"gflops": counted * 3}))
    rc, events, err = run_worker(
        tiny_job("torch", {"mode": "train", "precision": "fp32"}), tmp_path / "b.json", env
    )
    assert rc == 0, err[-2000:]
    assert next(e for e in events if e["event"] == "done")["gflops"] == pytest.approx(counted * 3)
    rc, events, err = run_worker(
        tiny_job("torch", {"mode": "infer", "precision": "fp32"}, depth=14), tmp_path / "c.json", env
    )
    assert rc == 0, err[-2000:]
    assert next(e for e in events if e["event"] == "done")["gflops"] > counted  # another network: counted
    assert len(list((tmp_path / "cache" / "model_stats").glob("*.json"))) == 2
