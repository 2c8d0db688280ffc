"""Which jobs need DALI in the worker: only those a DALI pipeline feeds. On the H200 image (no DALI) a
MovieLens NCF job crashed in the worker, importing DALI only to record its version."""

from __future__ import annotations

import pytest

from dlbench.config import JobConfig
from dlbench.worker import fed_by_dali


@pytest.mark.parametrize(
    ("model", "dataset", "fmt", "mode", "needs"),
    [
        ("resnet50", "imagenet", "folder", "train", True),
        ("ssd300", "coco2017", "coco", "infer", True),
        ("resnet50", "synthetic", None, "train", False),
        ("ncf", "movielens", "ratings", "train", False),  # read whole into memory by numpy
        ("small_cnn", "fashion_mnist", "idx", "train", False),
        ("resnet50", "imagenet", "folder", "data", False),  # mode=data: the DALI pipeline is the backend
    ],
)
def test_only_dali_fed_jobs_need_dali(model, dataset, fmt, mode, needs):
    job = JobConfig.from_dict({"model": {"name": model}, "mode": mode})
    job.dataset.name, job.dataset.format = dataset, fmt
    assert fed_by_dali(job) is needs
