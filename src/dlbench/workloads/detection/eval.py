"""Detection quality from numpy detections: COCO mAP@[.5:.95] and mAP@0.5 with pycocotools.

Every framework's detections are scored by this one function, the way COCO scores them: boxes in pixels
of the original image, categories by COCO id (the model's labels 1..N are mapped back through the
sorted category ids, the numbering DALI's COCO reader uses). A model whose scores or boxes are NaN or
inf has no mAP: NaN is returned, so a diverged run never passes for a result.

`coco_map50` is mode=converge's metric (kind "coco_map", registered by the detection package): model outputs -> decode + NMS ->
COCO results -> pycocotools, against the in-memory set's held-out ground truth (workloads/detection/coco_memory.py).
"""

from __future__ import annotations

import contextlib
import io
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from dlbench.workloads.detection.boxes import DefaultBoxes, Detections, from_padded, postprocess

if TYPE_CHECKING:
    from dlbench.workloads.detection.coco_memory import DetectionTruth


def to_coco_results(
    image_ids: Sequence[int],
    boxes: Sequence[np.ndarray],
    scores: Sequence[np.ndarray],
    labels: Sequence[np.ndarray],
    gt: dict,
) -> list[dict]:
    """COCO result entries from per-image detections: boxes (k, 4) ltrb as fractions of the image,
    scores (k,), labels (k,) in 1..N. Image sizes and category ids come from the ground truth `gt`."""
    sizes = {im["id"]: (im["width"], im["height"]) for im in gt["images"]}
    categories = sorted(c["id"] for c in gt["categories"])
    out = []
    for image_id, b, s, lab in zip(image_ids, boxes, scores, labels, strict=True):
        w, h = sizes[int(image_id)]
        b = np.asarray(b, np.float64).reshape(-1, 4) * [w, h, w, h]
        for (x0, y0, x1, y1), score, label in zip(
            b, np.asarray(s).reshape(-1), np.asarray(lab).reshape(-1), strict=True
        ):
            out.append(
                {
                    "image_id": int(image_id),
                    "category_id": categories[int(label) - 1],
                    "bbox": [float(x0), float(y0), float(x1 - x0), float(y1 - y0)],
                    "score": float(score),
                }
            )
    return out


def coco_map(gt: dict, results: list[dict]) -> dict[str, float]:
    """{"map": mAP@[.5:.95], "map50": mAP@0.5} of COCO results against the ground truth (a COCO
    instances dict), over the ground truth's images. No detections score 0; non-finite ones NaN."""
    # imported here: every process that loads the workloads imports this module (its metric), and
    # only detection accuracy runs need pycocotools (a GPU image without it still runs everything else)
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    if any(not all(map(math.isfinite, r["bbox"])) or not math.isfinite(r["score"]) for r in results):
        return {"map": math.nan, "map50": math.nan}
    if not results or not gt["annotations"]:
        return {"map": 0.0, "map50": 0.0}
    with contextlib.redirect_stdout(io.StringIO()):  # pycocotools prints progress and its table
        coco_gt = COCO()
        coco_gt.dataset = gt
        coco_gt.createIndex()
        coco_dt = coco_gt.loadRes(results)
        ev = COCOeval(coco_gt, coco_dt, iouType="bbox")
        ev.params.imgIds = sorted(im["id"] for im in gt["images"])
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    # stats are -1 where no ground truth exists for an area range; the two overall figures always have some
    return {"map": max(0.0, float(ev.stats[0])), "map50": max(0.0, float(ev.stats[1]))}


def detections(outputs: tuple, dboxes: DefaultBoxes) -> list[Detections]:
    """Per-image detections from a detection model's outputs: the raw (loc, conf) go through the numpy
    decode + per-class NMS (the same code for every framework); the padded (boxes, scores, labels) of a
    framework's own postprocess (model.postprocess=true) are only unpadded."""
    if len(outputs) == 3:
        return from_padded(*outputs)
    loc, conf = outputs
    return postprocess(loc, conf, dboxes)


def coco_map50(outputs: tuple, truth: DetectionTruth) -> dict[str, float]:
    """mode=converge's detection metric: {"map50": mAP@0.5, "map": mAP@[.5:.95]} of the model's outputs
    over the held-out images (`truth`, in the order they were predicted). NaN when an output is not finite."""
    if not all(np.isfinite(o).all() for o in outputs):
        return {"map50": math.nan, "map": math.nan}
    with np.errstate(over="ignore", invalid="ignore"):  # an untrained box may decode to inf: clipped below
        dets = detections(outputs, truth.dboxes)
    results = to_coco_results(
        truth.image_ids,
        [np.clip(d.boxes, 0.0, 1.0) for d in dets],
        [d.scores for d in dets],
        [d.labels for d in dets],
        truth.gt,
    )
    return coco_map(truth.gt, results)
