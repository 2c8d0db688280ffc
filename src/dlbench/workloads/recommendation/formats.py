"""Recommendation's data format (data/registry.py): MovieLens ratings, read whole into memory with numpy
(workloads/recommendation/movielens.py); no DALI pipeline reads them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dlbench.data.registry import DataFormat


def check_ratings(job: Any) -> dict[str, Any]:
    from dlbench.workloads.recommendation.movielens import check_movielens

    return check_movielens(job)


def open_ratings(bench: Any, to_device: Callable[[Any], Any]) -> Any:
    from dlbench.workloads.recommendation.movielens import MovieLensSource

    return MovieLensSource(bench.job, to_device)


FORMATS = (
    DataFormat(
        "ratings",
        check_ratings,
        open_ratings,
        in_memory=True,
        tasks=("recommendation",),
        default_for=("recommendation",),
        about="MovieLens user-item ratings",
    ),
)
