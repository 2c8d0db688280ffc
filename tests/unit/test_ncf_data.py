"""Interactions for NCF: MovieLens readers on small generated files, dense re-indexing, leave-one-out,
negatives that never hit a positive, synthetic data with ML-20M cardinalities, one-line errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dlbench.workloads.recommendation.interactions import (
    ML20M_ITEMS,
    ML20M_USERS,
    Interactions,
    InteractionsError,
    leave_one_out,
    read_interactions,
    synthetic_interactions,
)
from dlbench.workloads.recommendation.negatives import PositiveSet, evaluation_candidates, training_samples

# raw (user, item, rating, timestamp); user 10 rated item 7 twice (kept once, at t=100)
ROWS = [
    (10, 500, 4.0, 300),
    (10, 7, 3.5, 100),
    (3, 500, 5.0, 50),
    (10, 7, 2.0, 400),
    (3, 42, 1.0, 60),
    (3, 7, 2.0, 55),
    (25, 42, 3.0, 10),
]


def _write(path: Path, layout: str) -> Path:
    if layout == "ratings.csv":
        lines = ["userId,movieId,rating,timestamp"] + [f"{u},{i},{r},{t}" for u, i, r, t in ROWS]
    elif layout == "u.data":
        lines = [f"{u}\t{i}\t{int(r)}\t{t}" for u, i, r, t in ROWS]
    else:
        header = "user_id:token\titem_id:token\trating:float\ttimestamp:float"
        lines = [header] + [f"{u}\t{i}\t{r}\t{t}" for u, i, r, t in ROWS]
    path.mkdir(parents=True, exist_ok=True)
    file = path / layout
    file.write_text("\n".join(lines) + "\n")
    return file


@pytest.mark.parametrize("layout", ["ratings.csv", "u.data", "ml-100k.inter"])
def test_each_layout_reads_to_the_same_dense_interactions(tmp_path, layout):
    file = _write(tmp_path / "d", layout)
    for where in (file, file.parent):  # the file itself, or the folder holding it
        data = read_interactions(where)
        assert (data.num_users, data.num_items) == (3, 3)  # users 3,10,25 -> 0,1,2; items 7,42,500 -> 0,1,2
        rows = sorted(zip(data.users.tolist(), data.items.tolist(), data.timestamps.tolist(), strict=True))
        assert rows == [(0, 0, 55), (0, 1, 60), (0, 2, 50), (1, 0, 100), (1, 2, 300), (2, 1, 10)]


def test_leave_one_out_holds_out_each_users_latest(tmp_path):
    data = read_interactions(_write(tmp_path, "u.data"))
    split = leave_one_out(data)
    assert split.test_items.tolist() == [1, 2, 1]  # user 0: item 42 (t=60); user 1: 500 (t=300); user 2: 42
    train = sorted(zip(split.train_users.tolist(), split.train_items.tolist(), strict=True))
    assert train == [(0, 0), (0, 2), (1, 0)]  # user 2's only rating is its test item


def test_leave_one_out_breaks_timestamp_ties_by_file_order():
    data = Interactions(
        users=np.array([0, 0, 0]),
        items=np.array([2, 0, 1]),
        timestamps=np.array([5, 5, 1]),
        num_users=1,
        num_items=3,
    )
    split = leave_one_out(data)
    assert split.test_items.tolist() == [0]
    assert sorted(split.train_items.tolist()) == [1, 2]


@pytest.fixture
def dense_split():
    """60 users x 40 items, each user with 5-30 positives: collisions with positives are frequent."""
    rng = np.random.default_rng(3)
    users, items = [], []
    for u in range(60):
        chosen = rng.choice(40, size=rng.integers(5, 31), replace=False)
        users += [u] * len(chosen)
        items += chosen.tolist()
    data = Interactions(np.array(users), np.array(items), rng.integers(0, 1000, len(users)), 60, 40)
    return leave_one_out(data)


def test_training_negatives_never_hit_a_training_positive(dense_split):
    users, items, labels = training_samples(dense_split, np.random.default_rng(0))
    n_pos = len(dense_split.train_users)
    assert len(users) == 5 * n_pos and labels.sum() == n_pos  # 4 negatives per positive
    positives = PositiveSet(dense_split.train_users, dense_split.train_items, 60, 40)
    assert positives.contains(users[labels == 1], items[labels == 1]).all()
    assert not positives.contains(users[labels == 0], items[labels == 0]).any()
    # the same user gets the negatives of its own positives (4 per positive)
    np.testing.assert_array_equal(
        np.bincount(users[labels == 0], minlength=60), 4 * np.bincount(dense_split.train_users, minlength=60)
    )


def test_evaluation_candidates_are_the_held_out_item_then_100_true_negatives(dense_split):
    cand = evaluation_candidates(dense_split, np.random.default_rng(0))
    assert cand.shape == (60, 101)
    np.testing.assert_array_equal(cand[:, 0], dense_split.test_items)
    every = PositiveSet(
        np.concatenate([dense_split.train_users, np.arange(60)]),
        np.concatenate([dense_split.train_items, dense_split.test_items]),
        60,
        40,
    )
    users = np.repeat(np.arange(60), 100)
    assert not every.contains(users, cand[:, 1:].reshape(-1)).any()


def test_sampling_is_seeded(dense_split):
    a = evaluation_candidates(dense_split, np.random.default_rng(7))
    b = evaluation_candidates(dense_split, np.random.default_rng(7))
    c = evaluation_candidates(dense_split, np.random.default_rng(8))
    np.testing.assert_array_equal(a, b)
    assert (a != c).any()


def test_a_user_with_every_item_has_no_negative():
    positives = PositiveSet(np.array([0, 0, 0, 1]), np.array([0, 1, 2, 0]), num_users=2, num_items=3)
    assert positives.sample(np.array([1, 1]), np.random.default_rng(0)).tolist() != []
    with pytest.raises(ValueError, match=r"users \[0\] interacted with all 3 items"):
        positives.sample(np.array([1, 0]), np.random.default_rng(0))


def test_synthetic_interactions_have_the_requested_cardinalities_and_skew():
    data = synthetic_interactions(num_users=2000, num_items=500, mean_per_user=30, seed=1)
    assert (data.num_users, data.num_items) == (2000, 500)
    assert set(np.unique(data.users)) == set(range(2000)) and set(np.unique(data.items)) == set(range(500))
    per_user = np.bincount(data.users)
    assert per_user.min() >= 20 and 25 < per_user.mean() < 35
    keys = data.users * 500 + data.items
    assert len(np.unique(keys)) == len(keys)  # no repeated pair
    popularity = np.sort(np.bincount(data.items))[::-1]
    assert popularity[:50].sum() > 0.25 * len(data)  # the top 10% of items hold far more than 10%
    again = synthetic_interactions(num_users=2000, num_items=500, mean_per_user=30, seed=1)
    np.testing.assert_array_equal(again.items, data.items)


def test_synthetic_defaults_are_movielens_20m_sized():
    assert (ML20M_USERS, ML20M_ITEMS) == (138_493, 26_744)


def test_a_missing_path_is_one_line_naming_the_fix(tmp_path):
    with pytest.raises(InteractionsError) as err:
        read_interactions(tmp_path / "nope")
    message = str(err.value)
    assert "\n" not in message and "nope" in message and "scripts/datasets/get_movielens100k.py" in message


def test_a_folder_without_ratings_is_one_line(tmp_path):
    (tmp_path / "README").write_text("x")
    with pytest.raises(InteractionsError, match="holds no ratings.csv, u.data or \\*.inter"):
        read_interactions(tmp_path)


@pytest.mark.parametrize(
    ("name", "content", "match"),
    [
        ("ratings.dat", "1::2::3::4\n", "unknown ratings layout"),
        ("ratings.csv", "user,movie,rating,time\n1,2,3,4\n", "lacks the column"),
        ("ratings.csv", "userId,movieId,rating,timestamp\n1,abc,3,4\n", "not a numeric ratings table"),
        ("ratings.csv", "userId,movieId,rating,timestamp\n", "no ratings"),
        ("ml-100k.inter", b"\xff\xfe\x00\x81binary", "not a text file"),
        ("u.data", b"\xff\xfe\x00\x81binary", "not a numeric ratings table"),
    ],
)
def test_bad_files_are_one_line(tmp_path, name, content, match):
    file = tmp_path / name
    file.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(InteractionsError, match=match) as err:
        read_interactions(tmp_path / name)
    assert "\n" not in str(err.value)


ML100K = Path(__file__).resolve().parents[2] / "data" / "movielens" / "ml-100k" / "ml-100k.inter"


@pytest.mark.skipif(
    not ML100K.is_file(), reason="run scripts/datasets/get_movielens100k.py to test on the real file"
)
def test_real_movielens_100k():
    data = read_interactions(ML100K)
    assert (len(data), data.num_users, data.num_items) == (100_000, 943, 1_682)
    split = leave_one_out(data)
    assert len(split.train_users) == 100_000 - 943
