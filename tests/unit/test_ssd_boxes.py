"""SSD default boxes, target encoding, decoding and the numpy postprocess reference (no framework)."""

from __future__ import annotations

import numpy as np
import pytest

from dlbench.workloads.detection.boxes import (
    Detections,
    box_offsets,
    dboxes300_coco,
    decode,
    encode,
    encode_batch,
    iou,
    nms,
    postprocess,
)
from dlbench.workloads.detection.synthetic import random_ground_truth, synthetic_batch

D = dboxes300_coco()


def test_dboxes300_count_order_and_values():
    assert D.count == 8732 == sum(n * f * f for n, f in zip(D.boxes_per_cell, D.feat_size, strict=True))
    assert D.boxes_per_cell == (4, 6, 6, 6, 4, 4)
    # first map (38x38, step 8 -> 37.5 cells per image): size 21/300, cell centres (j + 0.5) / 37.5
    np.testing.assert_allclose(D.xywh[0], [0.5 / 37.5, 0.5 / 37.5, 0.07, 0.07], rtol=1e-6)
    np.testing.assert_allclose(D.xywh[1], [1.5 / 37.5, 0.5 / 37.5, 0.07, 0.07], rtol=1e-6)  # next column
    np.testing.assert_allclose(D.xywh[38], [0.5 / 37.5, 1.5 / 37.5, 0.07, 0.07], rtol=1e-6)  # next row
    second = np.sqrt(21 * 45) / 300  # then the sqrt(s_k s_k+1) square box, for every cell
    np.testing.assert_allclose(D.xywh[38 * 38, 2:], [second, second], rtol=1e-6)
    # the 1x1 map's boxes are clamped to the image: 261/300 * sqrt(2) > 1
    last = D.xywh[-4:]
    assert np.all(last[:, :2] == 0.5) and last[:, 2:].max() == 1.0
    assert D.xywh.min() >= 0 and D.xywh.max() <= 1
    np.testing.assert_allclose(D.ltrb[:, 2:] - D.ltrb[:, :2], D.xywh[:, 2:], atol=1e-6)


def test_box_equal_to_a_default_box_encodes_to_zero_offsets():
    anchor = 5000
    offsets, labels = encode(D.ltrb[[anchor]], np.array([7]), D)
    assert labels[anchor] == 7
    np.testing.assert_allclose(offsets[anchor], 0.0, atol=1e-5)


def test_default_boxes_that_match_nothing_are_background():
    gt = np.array([[0.1, 0.1, 0.3, 0.35]], np.float32)
    offsets, labels = encode(gt, np.array([3]), D)
    overlap = iou(gt, D.ltrb)[0]
    assert np.all(labels[overlap == 0] == 0) and np.all(offsets[overlap == 0] == 0)
    assert np.all(labels[overlap > 0.5] == 3)  # every box over the threshold takes the object
    assert np.all(labels[(overlap > 0) & (overlap <= 0.5) & (overlap < overlap.max())] == 0)


def test_every_object_gets_its_best_default_box_even_below_the_threshold():
    tiny = np.array([[0.500, 0.500, 0.505, 0.508]], np.float32)  # IoU far below 0.5 with every box
    assert iou(tiny, D.ltrb).max() < 0.5
    _, labels = encode(tiny, np.array([9]), D)
    assert np.count_nonzero(labels) == 1 and labels[iou(tiny, D.ltrb)[0].argmax()] == 9


def test_image_without_objects_is_all_background():
    offsets, labels = encode(np.zeros((0, 4), np.float32), np.zeros(0, np.int32), D)
    assert offsets.shape == (8732, 4) and not offsets.any() and not labels.any()


def test_offsets_use_dle_variances_and_decode_inverts_them():
    anchor = D.xywh[100]
    shifted = anchor + [0.01, -0.02, 0.0, 0.0]
    wide = shifted * [1, 1, 1.5, 1.0]
    ltrb = np.concatenate([wide[:2] - wide[2:] / 2, wide[:2] + wide[2:] / 2])[None]
    got = box_offsets(ltrb, anchor[None], D)[0]
    expect = [0.01 / anchor[2] / 0.1, -0.02 / anchor[3] / 0.1, np.log(1.5) / 0.2, 0.0]
    np.testing.assert_allclose(got, expect, rtol=1e-4, atol=1e-5)
    boxes, labels = random_ground_truth(np.random.default_rng(3), 2, max_boxes=5)
    loc, cls = encode_batch(boxes, labels, D)
    decoded = decode(loc, D)
    for b in range(2):
        pos = np.nonzero(cls[b])[0]
        # each positive default box decodes back to one of the image's ground-truth boxes
        assert np.all(iou(decoded[b, pos], boxes[b]).max(axis=1) > 0.999)


def test_synthetic_batch_is_encoded_like_real_data():
    batch = synthetic_batch(np.random.default_rng(0), 3, D, max_boxes=4)
    assert batch.images.shape == (3, 3, 300, 300) and batch.images.dtype == np.float32
    assert batch.loc.shape == (3, 4, 8732) and batch.labels.shape == (3, 8732)
    for b in range(3):
        assert 1 <= len(batch.gt_boxes[b]) <= 4
        assert np.count_nonzero(batch.labels[b]) >= len(batch.gt_boxes[b])
        assert set(np.unique(batch.labels[b])) <= {0, *batch.gt_labels[b].tolist()}
        offsets, labels = encode(batch.gt_boxes[b], batch.gt_labels[b], D)
        np.testing.assert_array_equal(batch.loc[b], offsets.T)


def test_nms_keeps_the_best_of_overlapping_boxes():
    boxes = np.array([[0, 0, 1, 1], [0.05, 0, 1, 1], [2, 2, 3, 3]], np.float32)
    assert nms(boxes, np.array([0.5, 0.9, 0.4]), 0.45).tolist() == [1, 2]
    assert nms(boxes, np.array([0.5, 0.9, 0.4]), 0.99).tolist() == [1, 0, 2]


def _logits_for(anchor_labels: dict[int, tuple[int, float]]) -> np.ndarray:
    """conf logits where every default box is confidently background except the given ones."""
    conf = np.full((1, 81, D.count), -10.0, np.float32)
    conf[0, 0] = 10.0
    for anchor, (label, logit) in anchor_labels.items():
        conf[0, 0, anchor] = 0.0
        conf[0, label, anchor] = logit
    return conf


def test_postprocess_decodes_and_suppresses_per_class():
    a, far = 5000, 100
    overlap = iou(D.ltrb[[a]], D.ltrb)[0]
    overlap[a] = 0
    b = int(overlap.argmax())  # the default box overlapping a most: NMS at 0.45 must drop it
    assert overlap[b] > 0.45 and overlap[far] == 0
    loc = np.zeros((1, 4, D.count), np.float32)  # zero offsets: the default boxes themselves
    same_class = postprocess(loc, _logits_for({a: (3, 8.0), b: (3, 5.0), far: (3, 6.0)}), D)[0]
    assert isinstance(same_class, Detections)
    assert same_class.labels.tolist() == [3, 3]  # b suppressed by a
    np.testing.assert_allclose(same_class.boxes, D.ltrb[[a, far]], atol=1e-6)
    assert same_class.scores[0] > same_class.scores[1]
    two_classes = postprocess(loc, _logits_for({a: (3, 8.0), b: (4, 5.0)}), D)[0]
    assert sorted(two_classes.labels.tolist()) == [3, 4]  # NMS is per class


@pytest.mark.parametrize("threshold", [0.05, 0.5])
def test_postprocess_drops_low_scores(threshold):
    conf = _logits_for({7: (2, 0.0)})  # softmax over (0, 0, -10...) gives label 2 about 0.5
    kept = postprocess(np.zeros((1, 4, D.count), np.float32), conf, D, score_threshold=threshold)[0]
    assert len(kept.labels) == (1 if threshold < 0.49 else 0)


@pytest.mark.parametrize("size, anchors", [(300, 8732), (32, 108), (64, 390)])
def test_detection_spec_draws_encoded_targets_for_the_maps_of_its_input(size, anchors):
    from dlbench.data.synthetic import synthetic_batch as spec_batch
    from dlbench.workloads.detection.spec import DetectionConfig
    from dlbench.workloads.registry import task_spec

    spec = task_spec(DetectionConfig(image_size=size, max_boxes=3))
    a, b = spec_batch(spec, 2), spec_batch(spec, 2)
    assert spec.targets["loc"].shape == (4, anchors) and spec.targets["labels"].shape == (anchors,)
    assert a.inputs["image"].shape == (2, 3, size, size) and a.units == 2
    assert a.targets["loc"].shape == (2, 4, anchors) and a.targets["labels"].dtype == np.int32
    assert np.all((a.targets["labels"] > 0).sum(axis=1) >= 1)  # every image has matched objects
    assert np.array_equal(a.targets["loc"], b.targets["loc"])  # seeded: the same in every framework
    pos = a.targets["labels"] > 0
    assert not a.targets["loc"].transpose(0, 2, 1)[~pos].any()  # background: zero offsets
