"""COCO mAP from numpy detections on hand-made cases (pycocotools does the scoring)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dlbench.workloads.detection.eval import coco_map, to_coco_results

# Two 200x100 images; categories with COCO-like gaps (labels 1, 2 are ids 3, 7)
GT = {
    "images": [{"id": 10, "width": 200, "height": 100}, {"id": 11, "width": 200, "height": 100}],
    "categories": [{"id": 3, "name": "a"}, {"id": 7, "name": "b"}],
    "annotations": [
        {"id": 1, "image_id": 10, "category_id": 3, "bbox": [20, 10, 60, 40], "area": 2400, "iscrowd": 0},
        {"id": 2, "image_id": 10, "category_id": 7, "bbox": [100, 50, 80, 40], "area": 3200, "iscrowd": 0},
        {"id": 3, "image_id": 11, "category_id": 7, "bbox": [0, 0, 100, 100], "area": 10000, "iscrowd": 0},
    ],
}
# the same boxes as fractions of the image, ltrb, with their labels
EXACT = {
    10: (np.array([[0.1, 0.1, 0.4, 0.5], [0.5, 0.5, 0.9, 0.9]]), np.array([1, 2])),
    11: (np.array([[0.0, 0.0, 0.5, 1.0]]), np.array([2])),
}


def _results(boxes: dict, scores: float = 0.9, labels: dict | None = None) -> list[dict]:
    ids = list(boxes)
    return to_coco_results(
        ids,
        [boxes[i][0] for i in ids],
        [np.full(len(boxes[i][1]), scores) for i in ids],
        [(labels or {}).get(i, boxes[i][1]) for i in ids],
        GT,
    )


def test_results_are_in_pixels_with_coco_category_ids():
    first = _results(EXACT)[0]
    assert first["image_id"] == 10 and first["category_id"] == 3
    np.testing.assert_allclose(first["bbox"], [20, 10, 60, 40])


def test_exact_detections_score_one():
    assert coco_map(GT, _results(EXACT)) == pytest.approx({"map": 1.0, "map50": 1.0})


def test_loose_boxes_pass_at_half_iou_only():
    # widen every box by 30% of its width on each side: IoU 1/1.6 = 0.625
    loose = {}
    for i, (b, lab) in EXACT.items():
        w = (b[:, 2] - b[:, 0])[:, None] * 0.3
        loose[i] = (b + np.hstack([-w, np.zeros_like(w), w, np.zeros_like(w)]), lab)
    got = coco_map(GT, _results(loose))
    assert got["map50"] == pytest.approx(1.0)
    assert 0.2 < got["map"] < 0.5  # counted at IoU 0.5, 0.55, 0.6 of the ten thresholds


def test_wrong_class_no_detections_and_nan():
    swapped = {10: np.array([2, 1]), 11: np.array([1])}
    assert coco_map(GT, _results(EXACT, labels=swapped)) == {"map": 0.0, "map50": 0.0}
    assert coco_map(GT, []) == {"map": 0.0, "map50": 0.0}
    nan = _results(EXACT, scores=float("nan"))
    assert all(math.isnan(v) for v in coco_map(GT, nan).values())


def test_missing_one_object_lowers_recall():
    partial = {10: EXACT[10], 11: (np.zeros((0, 4)), np.zeros(0, int))}
    got = coco_map(GT, _results(partial))
    assert 0.4 < got["map50"] < 0.9  # class b found once of twice; class a perfect
