"""User-item interactions for the recommendation workload (NCF): MovieLens readers, synthetic data with
MovieLens-20M cardinalities, 0-based re-indexing and the leave-one-out split. numpy only.

Every rating counts as one implicit positive (as NVIDIA DeepLearningExamples' NCF treats MovieLens);
a (user, item) pair rated twice is kept once, at its earliest timestamp. Raw ids are re-indexed to
dense 0-based ids in sorted raw-id order, so the embedding tables have exactly one row per user and
per item that occurs.

Layouts read (chosen by file name, or found inside a folder):
  ratings.csv   MovieLens-20M/25M: header `userId,movieId,rating,timestamp`, comma-separated
  u.data        MovieLens-100K: `user item rating timestamp`, tab-separated, no header
  *.inter       RecBole atomic file (e.g. ml-100k.inter from the recbole wheel, fetched by
                scripts/datasets/get_movielens100k.py): tab-separated, typed header `user_id:token ...`
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

# MovieLens-20M after DLE's preprocessing: every user and item that has a rating
ML20M_USERS = 138_493
ML20M_ITEMS = 26_744
ML20M_RATINGS = 20_000_263

FILE_NAMES = ("ratings.csv", "u.data")
GET_ML100K = "run `python scripts/datasets/get_movielens100k.py` for MovieLens-100K"


class InteractionsError(ValueError):
    """A ratings file that is missing or unreadable; the message is one line naming the file and the fix."""


@dataclass(frozen=True)
class Interactions:
    """Implicit positives with dense 0-based ids; `users`, `items`, `timestamps` are parallel int64 arrays."""

    users: np.ndarray
    items: np.ndarray
    timestamps: np.ndarray
    num_users: int
    num_items: int

    def __len__(self) -> int:
        return len(self.users)


@dataclass(frozen=True)
class LeaveOneOut:
    """Each user's latest interaction held out for testing (`test_items[u]` is user u's), the rest for
    training. A user with a single interaction has no training rows (as in DLE)."""

    train_users: np.ndarray
    train_items: np.ndarray
    test_items: np.ndarray
    num_users: int
    num_items: int


def from_raw(users: np.ndarray, items: np.ndarray, timestamps: np.ndarray) -> Interactions:
    """Dense 0-based ids (sorted raw-id order) and one row per (user, item) pair, its earliest."""
    user_ids, users = np.unique(np.asarray(users), return_inverse=True)
    item_ids, items = np.unique(np.asarray(items), return_inverse=True)
    timestamps = np.asarray(timestamps, dtype=np.int64)
    keys = users.astype(np.int64) * len(item_ids) + items
    order = np.lexsort((timestamps, keys))  # by pair, earliest first
    first = np.ones(len(order), dtype=bool)
    first[1:] = keys[order][1:] != keys[order][:-1]
    keep = np.sort(order[first])  # back to file order
    return Interactions(
        users=users[keep].astype(np.int64),
        items=items[keep].astype(np.int64),
        timestamps=timestamps[keep],
        num_users=len(user_ids),
        num_items=len(item_ids),
    )


def leave_one_out(data: Interactions) -> LeaveOneOut:
    """Hold out each user's latest interaction (ties: the later row in the file), as DLE does."""
    order = np.lexsort((np.arange(len(data)), data.timestamps, data.users))
    users, items = data.users[order], data.items[order]
    last = np.ones(len(order), dtype=bool)
    last[:-1] = users[1:] != users[:-1]
    test_items = np.empty(data.num_users, dtype=np.int64)
    test_items[users[last]] = items[last]
    return LeaveOneOut(users[~last], items[~last], test_items, data.num_users, data.num_items)


def popular_items(num_items: int, skew: float, rng: np.random.Generator) -> Callable[[int], np.ndarray]:
    """A sampler of item ids with a Zipf-like popularity, p(rank r) ~ (r + 1)^-skew, the ranks shuffled
    over the ids once (here): `draw(n)` gives n ids, popular ones far more often, as in real ratings."""
    cdf = np.cumsum((np.arange(num_items) + 1.0) ** -skew)
    rank_to_item = rng.permutation(num_items)

    def draw(size: int) -> np.ndarray:
        ranks = np.searchsorted(cdf, rng.random(size) * cdf[-1], side="right")
        return rank_to_item[np.minimum(ranks, num_items - 1)]

    return draw


def synthetic_interactions(
    num_users: int = ML20M_USERS,
    num_items: int = ML20M_ITEMS,
    mean_per_user: float = ML20M_RATINGS / ML20M_USERS,
    min_per_user: int = 20,
    skew: float = 0.9,
    seed: int = 0,
) -> Interactions:
    """Interactions shaped like MovieLens-20M: at least `min_per_user` distinct items per user
    (MovieLens keeps users with 20+ ratings), geometric above that with mean `mean_per_user`; items
    drawn with a Zipf-like popularity p(rank r) ~ (r + 1)^-skew, so a few items dominate as in real
    ratings (embedding-lookup locality depends on it); item ranks are shuffled over the ids. Every
    user and item id below the sizes occurs. At the default (ML-20M) sizes: about 20M rows, ~0.5 GB.

    skew 0.9 was picked against the real MovieLens-100K at its sizes (943 x 1682, 106 per user): the
    top 10% of items hold 43.7% of the rows (real: 42.7%), the median item has 32 rows (real: 27),
    though the single most popular item reaches 99% of users (real: 62%); a pure power law cannot
    match all three."""
    rng = np.random.default_rng(seed)
    extra = max(mean_per_user - min_per_user, 1e-9)
    target = np.minimum(min_per_user + rng.geometric(1.0 / (extra + 1.0), size=num_users) - 1, num_items)
    popular = popular_items(num_items, skew, rng)
    cover = max(num_users, num_items)  # rows that put every user id and every item id in the table
    keys = np.unique((np.arange(cover) % num_users) * num_items + rng.permutation(cover) % num_items)
    for _ in range(50):  # draw each user's shortfall again until popular-item repeats are replaced
        need = np.maximum(target - np.bincount(keys // num_items, minlength=num_users), 0)
        if not need.any():
            break
        users = np.repeat(np.arange(num_users, dtype=np.int64), need)
        keys = np.unique(np.concatenate([keys, users * num_items + popular(len(users))]))
    return Interactions(
        users=keys // num_items,
        items=keys % num_items,
        timestamps=rng.integers(0, 2**31, size=len(keys)),
        num_users=num_users,
        num_items=num_items,
    )


def _missing(path: Path) -> InteractionsError:
    return InteractionsError(
        f"dataset.path={path}: no such file or folder; point dataset.path at a MovieLens ratings.csv, "
        f"u.data or .inter file (or a folder holding one), or {GET_ML100K}"
    )


def find_ratings_file(path: str | Path) -> Path:
    """The ratings file `path` names, or the one inside the folder `path`."""
    path = Path(path).expanduser()
    if path.is_file():
        return path
    if not path.is_dir():
        raise _missing(path)
    for name in FILE_NAMES:
        if (path / name).is_file():
            return path / name
    inter = sorted(path.glob("*.inter"))
    if inter:
        return inter[0]
    raise InteractionsError(
        f"dataset.path={path}: the folder holds no ratings.csv, u.data or *.inter file; {GET_ML100K}"
    )


def _columns(path: Path) -> tuple[str, tuple[int, int, int], int]:
    """(delimiter, (user, item, timestamp) column indexes, header rows) for the file's layout."""
    if path.name == "u.data":
        return "\t", (0, 1, 3), 0
    try:
        with path.open(encoding="utf-8") as f:
            header = f.readline().rstrip("\r\n")
    except UnicodeDecodeError:
        raise InteractionsError(f"{path}: not a text file; expected a MovieLens ratings table") from None
    if path.suffix == ".inter":
        names = [col.split(":")[0] for col in header.split("\t")]
        wanted, delimiter = ("user_id", "item_id", "timestamp"), "\t"
    elif path.suffix == ".csv":
        names = header.split(",")
        wanted, delimiter = ("userId", "movieId", "timestamp"), ","
    else:
        raise InteractionsError(
            f"dataset.path={path}: unknown ratings layout; expected ratings.csv (MovieLens-20M), u.data "
            "(MovieLens-100K) or a RecBole .inter file"
        )
    missing = [name for name in wanted if name not in names]
    if missing:
        raise InteractionsError(
            f"{path}: the header {header!r} lacks the column(s) {', '.join(missing)}; expected "
            f"{delimiter.join(wanted)!r} among them"
        )
    return delimiter, tuple(names.index(name) for name in wanted), 1  # type: ignore[return-value]


def read_interactions(path: str | Path) -> Interactions:
    """Read a MovieLens ratings file (or the one in a folder) into dense-id implicit interactions."""
    file = find_ratings_file(path)
    delimiter, usecols, skip = _columns(file)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "input contained no data": reported below
            table = np.loadtxt(
                file, delimiter=delimiter, skiprows=skip, usecols=usecols, dtype=np.float64, ndmin=2
            )
    except ValueError as exc:
        raise InteractionsError(f"{file}: not a numeric ratings table ({str(exc).splitlines()[0]})") from None
    if len(table) == 0:
        raise InteractionsError(f"{file}: no ratings in the file")
    return from_raw(table[:, 0].astype(np.int64), table[:, 1].astype(np.int64), table[:, 2].astype(np.int64))
