"""model=ncf in the config and dataset=movielens: composition (smoke sizes per model), the check before the
worker (sizes from the data, one-line errors) and the numpy batches the benches get."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf

from dlbench.config import JobConfig
from dlbench.data.validate import check_dataset
from dlbench.errors import ConfigError
from dlbench.workloads.recommendation.movielens import MovieLensSource, check_movielens
from dlbench.workloads.recommendation.negatives import PositiveSet
from dlbench.workloads.recommendation.spec import RecommendationConfig, spec


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
    job.dataset.format = "ratings"  # as conf/dataset/movielens.yaml sets it
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


def _source(folder: Path, mode: str, batch: int, seed: int = 1) -> MovieLensSource:
    job = _job(folder, mode=mode, batch=batch)
    job.schedule.seed = seed
    check_dataset(job)
    return MovieLensSource(job, lambda host: host)


def _positives(source: MovieLensSource, held_out: bool) -> PositiveSet:
    split = source.split
    users, items = split.train_users, split.train_items
    if held_out:
        users = np.concatenate([users, np.arange(split.num_users)])
        items = np.concatenate([items, split.test_items])
    return PositiveSet(users, items, split.num_users, split.num_items)


def test_train_batches_hold_positives_the_step_adds_the_negatives(tmp_path):
    source = _source(_ratings(tmp_path / "ml"), "train", batch=16)  # 16 samples: 3 positives + 12 negatives
    positives = 12 * 9 - 12  # all but the held-out ones
    assert source.steps_per_epoch == positives // 3
    batches = [source.next() for _ in range(source.steps_per_epoch)]
    assert all(b.units == 15 and b.targets == {} and len(b.inputs["user"]) == 3 for b in batches)
    users = np.concatenate([b.inputs["user"] for b in batches])
    items = np.concatenate([b.inputs["item"] for b in batches])
    assert users.dtype == np.int32 and _positives(source, held_out=False).contains(users, items).all()
    assert len(set(zip(users.tolist(), items.tolist(), strict=True))) == len(users)  # each positive once
    source.close()


def test_converge_batches_hold_seeded_negatives_fresh_every_epoch(tmp_path):
    folder = _ratings(tmp_path / "ml")

    def epochs(seed: int) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        source = _source(folder, "converge", batch=16, seed=seed)
        out = []
        for _ in range(2):
            batches = [source.next() for _ in range(source.steps_per_epoch)]
            assert all(b.units == 16 and len(b.inputs["item"]) == 16 for b in batches)
            out.append(tuple(np.concatenate([b.inputs[k] if k != "label" else b.targets[k] for b in batches])
                             for k in ("user", "item", "label")))  # fmt: skip
        never = _positives(source, held_out=False)
        source.close()
        for users, items, labels in out:
            assert 0.15 < labels.mean() < 0.25  # 1 positive in 5, shuffled
            assert never.contains(users[labels == 1], items[labels == 1]).all()
            assert not never.contains(users[labels == 0], items[labels == 0]).any()
        return out

    first, again, other = epochs(1), epochs(1), epochs(2)
    for a, b in zip(first[0], again[0], strict=True):
        np.testing.assert_array_equal(a, b)  # the run's seed fixes them: every framework trains on these
    assert (first[0][1] != first[1][1]).any()  # the next epoch draws fresh negatives
    assert (first[0][1] != other[0][1]).any()  # another seed, other negatives


def test_eval_candidates_hold_the_held_out_item_and_no_positive(tmp_path):
    source = _source(_ratings(tmp_path / "ml"), "converge", batch=16)
    split = source.split
    batches = list(source.eval_batches(5))  # 5 users x 101 candidates per batch
    assert [len(b.inputs["user"]) for b in batches] == [505, 505, 202]
    users = np.concatenate([b.inputs["user"] for b in batches]).astype(np.int64)
    items = np.concatenate([b.inputs["item"] for b in batches]).astype(np.int64)
    labels = np.concatenate([b.targets["label"] for b in batches])
    np.testing.assert_array_equal(labels, source.eval_labels)
    np.testing.assert_array_equal(users, np.repeat(np.arange(12), 101))
    rows, row_labels = items.reshape(12, 101), labels.reshape(12, 101)
    np.testing.assert_array_equal(rows[:, 0], split.test_items)  # each user's held-out item, first
    assert (row_labels[:, 0] == 1).all() and row_labels[:, 1:].sum() == 0
    assert not _positives(source, held_out=True).contains(users[labels == 0], items[labels == 0]).any()
    again = _source(_ratings(tmp_path / "ml"), "converge", batch=16)
    np.testing.assert_array_equal(again.candidates, source.candidates)  # fixed by the seed
    facts = source.facts()
    assert facts["seed"] == 1 and facts["eval_users"] == 12 and "host" in facts["negatives"]
    source.close()


def test_inference_batches_are_each_users_101_candidates(tmp_path):
    source = _source(_ratings(tmp_path / "ml"), "infer", batch=101)
    first = source.next()
    assert (first.inputs["user"] == 0).all()
    assert first.targets["label"].tolist() == [1] + [0] * 100  # the held-out item first
    source.close()


def test_converge_on_movielens_is_a_valid_job(compose):
    from dlbench.config import validate

    cfg = compose(["model=ncf", "dataset=movielens", "mode=converge"])
    job = JobConfig.from_dict(OmegaConf.to_container(cfg, resolve=True))
    assert job.dataset.format == "ratings"
    validate(job)  # mode=converge accepts the in-memory ratings


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
