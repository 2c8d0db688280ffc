"""model=ncf in the config and dataset=movielens: composition (smoke sizes per model), the check before the
worker (sizes from the data, one-line errors) and the numpy batches the benches get."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from dlbench.config import ConfigError, JobConfig
from dlbench.data.movielens import MovieLensSource, check_movielens
from dlbench.data.validate import check_dataset
from dlbench.tasks.recommendation import RecommendationConfig, spec


def _ratings(folder: Path, users: int = 12, per_user: int = 9, items: int = 40) -> Path:
    """u.data with raw ids that are not dense (user ids 100, 103, ...; item ids 7, 14, ...)."""
    rng = np.random.default_rng(0)
    lines = []
    for u in range(users):
        for k, i in enumerate(rng.choice(items, size=per_user, replace=False)):
            lines.append(f"{100 + 3 * u}\t{7 * (i + 1)}\t4\t{1000 + k}")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "u.data").write_text("\n".join(lines) + "\n")
    return folder


def _job(path: Path | None, mode: str = "train", batch: int = 16, **model) -> JobConfig:
    job = JobConfig.from_dict({"model": {"name": "ncf", "task": "recommendation", **model}})
    job.dataset.name, job.dataset.path, job.mode = "movielens", str(path) if path else None, mode
    job.schedule.batch_size = batch
    return job


def test_smoke_gives_ncf_a_small_table_and_the_cnns_small_images(compose):
    ncf = compose(["model=ncf", "+experiment=smoke"]).model
    assert (ncf.num_users, ncf.num_items, ncf.batch_size) == (64, 128, 64)
    for model in ("resnet50", "vgg16", "resnet_cifar"):
        cnn = compose([f"model={model}", "+experiment=smoke"]).model
        assert (cnn.image_size, cnn.batch_size) == (32, 2)
    assert compose(["model=ncf"]).model.num_users is None  # no preset: the dataset's (or ML-20M's) sizes
    assert compose(["model=resnet50"]).model.image_size == 224


def test_ncf_defaults_are_dle_and_movielens_20m():
    cfg = RecommendationConfig()
    s = spec(cfg)
    assert (s.inputs["user"].high, s.inputs["item"].high) == (138_493, 26_744)
    assert (s.loss, s.metric, s.unit) == ("sigmoid_binary_cross_entropy", "hr@10", "samples")
    assert (s.optimizer.kind, s.optimizer.lr, s.optimizer.betas) == ("adam", 0.0045, (0.25, 0.5))
    bad = RecommendationConfig(mlp_layers=[7, 4], dropout=1.0)
    messages = [m for ok, m in bad.check() if not ok]
    assert any("model.mlp_layers" in m for m in messages) and any("model.dropout" in m for m in messages)


def test_the_check_fills_the_sizes_from_the_data(tmp_path):
    job = _job(_ratings(tmp_path / "ml"))
    facts = check_dataset(job)  # routed to check_movielens
    assert (job.model.num_users, job.model.num_items) == (12, facts["dataset.items"])
    assert facts["dataset.found_samples"] == 12 * 9 and job.dataset.path == str(tmp_path / "ml")


def test_a_relative_path_is_found_from_the_project_root(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no data/ here
    job = _job(Path("data/movielens/does-not-exist"))
    with pytest.raises(ConfigError) as err:
        check_movielens(job)
    assert str(Path(__file__).resolve().parents[2] / "data" / "movielens" / "does-not-exist") in str(
        err.value
    )


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"model": {"num_users": 5}}, "has 12 users but model.num_users=5"),
        ({"path": "missing"}, "no such file or folder"),
        ({"batch": 10_000}, "fewer than the batch size 10,000"),
        ({"mode": "data"}, "mode=data measures a DALI input pipeline"),
        ({"model": {"name": "resnet50", "task": "classification"}}, "use model=ncf"),
    ],
)
def test_bad_movielens_jobs_are_one_line(tmp_path, change, says):
    folder = _ratings(tmp_path / "ml")
    job = _job(
        tmp_path / change["path"] if "path" in change else folder,
        mode=change.get("mode", "train"),
        batch=change.get("batch", 16),
        **change.get("model", {}),
    )
    with pytest.raises(ConfigError, match=says) as err:
        check_dataset(job)
    assert "\n" not in str(err.value)


def test_ncf_on_an_image_dataset_is_refused(tmp_path):
    job = _job(tmp_path)
    job.dataset.name = "imagenet"
    with pytest.raises(ConfigError, match="use dataset=movielens or synthetic"):
        check_dataset(job)


def test_training_batches_are_full_and_four_in_five_are_negatives(tmp_path):
    job = _job(_ratings(tmp_path / "ml"), batch=16)
    check_dataset(job)
    source = MovieLensSource(job, lambda host: host)
    epoch = (12 * 9 - 12) * 5  # positives but the held-out ones, plus 4 negatives each
    batches = [source.next() for _ in range(epoch // 16)]
    assert all(b.units == 16 and b.inputs["user"].dtype == np.int32 for b in batches)
    labels = np.concatenate([b.targets["label"] for b in batches])
    assert 0.15 < labels.mean() < 0.25  # 1 positive in 5, shuffled
    users = np.concatenate([b.inputs["user"] for b in batches])
    items = np.concatenate([b.inputs["item"] for b in batches])
    assert users.max() < job.model.num_users and items.max() < job.model.num_items  # dense ids for the tables
    assert source.next().units == 16  # the next epoch starts with fresh negatives
    source.close()


def test_inference_batches_are_each_users_101_candidates(tmp_path):
    job = _job(_ratings(tmp_path / "ml"), mode="infer", batch=101)
    check_dataset(job)
    source = MovieLensSource(job, lambda host: host)
    first = source.next()
    assert (first.inputs["user"] == 0).all()
    assert first.targets["label"].tolist() == [1] + [0] * 100  # the held-out item first
    source.close()


def test_a_changed_file_is_read_again(tmp_path):
    folder = _ratings(tmp_path / "ml")
    first = _job(folder)
    check_dataset(first)
    _ratings(folder, users=13)
    stat = (folder / "u.data").stat()
    os.utime(folder / "u.data", ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    second = _job(folder)
    check_dataset(second)
    assert (first.model.num_users, second.model.num_users) == (12, 13)
