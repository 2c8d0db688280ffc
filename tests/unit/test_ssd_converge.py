"""mode=converge for detection without a framework: the generated COCO set held in memory (seeded batches,
the held-out split and its ground truth), the metric chain (outputs -> decode + NMS -> COCO results ->
pycocotools) on hand-made outputs, and the checks before a worker starts."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import numpy as np
import pytest

from dlbench.config import JobConfig, validate
from dlbench.converge import evaluate
from dlbench.core.bench import Batch
from dlbench.data.epochs import EpochPlan
from dlbench.data.validate import check_dataset
from dlbench.errors import ConfigError
from dlbench.workloads.detection.boxes import default_boxes_for, encode_batch
from dlbench.workloads.detection.coco_memory import CocoMemorySource, DetectionTruth, hflip, load_images
from dlbench.workloads.detection.eval import coco_map50
from dlbench.workloads.registry import metric, task_spec

ROOT = Path(__file__).resolve().parents[2]
SIZE = 48  # 236 default boxes
CLASSES = 3


def _script():
    module = sys.modules.get("make_coco_dataset")
    if module is None:
        spec = importlib.util.spec_from_file_location(
            "make_coco_dataset", ROOT / "scripts" / "datasets" / "make_coco_dataset.py"
        )
        module = sys.modules["make_coco_dataset"] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def easyset(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("coco_easy")
    args = ["--train", "12", "--val", "5", "--objects", "shapes", "--classes", str(CLASSES), "--plain"]
    assert (
        _script().main(["--out", str(out), *args, "--max-objects", "2", "--object-size", "0.3", "0.6"]) == 0
    )
    return out


def job_for(path: Path, **over) -> JobConfig:
    job = JobConfig.from_dict(
        {
            "model": {"name": "ssd300", "task": "detection", "image_size": SIZE, "num_classes": CLASSES + 1},
            "dataset": {"name": "coco_memory", "format": "coco_memory", "path": str(path)},
            "mode": "converge",
            "schedule": {"epochs": 1, "seed": 3, "batch_size": 4},
        }
        | over
    )
    return job


def _source(job: JobConfig) -> CocoMemorySource:
    return CocoMemorySource(
        job,
        task_spec(job.model),
        lambda h: Batch(tuple(h.inputs.values()), tuple(h.targets.values()), h.units),
    )


def _perfect(truth_boxes, truth_labels, dboxes, shift: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Outputs a model would give if it knew the answer: the encoded boxes (moved right by `shift` of
    their own width) and near-certain class scores for the matched default boxes."""
    moved = [b + shift * (b[:, 2:3] - b[:, 0:1]) * np.array([1, 0, 1, 0], np.float32) for b in truth_boxes]
    loc, labels = encode_batch(moved, truth_labels, dboxes)
    conf = np.eye(CLASSES + 1, dtype=np.float32)[labels].transpose(0, 2, 1) * 20.0
    return loc, conf


def test_the_generator_shapes_an_easy_set(easyset):
    from dlbench.workloads.detection.coco import resolve_split

    train = resolve_split(easyset, "train").data
    assert [c["name"] for c in train["categories"]] == ["disc", "square", "triangle"]
    for a, im in ((a, {i["id"]: i for i in train["images"]}[a["image_id"]]) for a in train["annotations"]):
        side = min(im["width"], im["height"])
        assert a["bbox"][2] <= 0.6 * 1.25 * side + 1 and a["bbox"][3] <= 0.6 * 1.25 * side + 1


def test_the_loaded_ground_truth_scores_one_against_itself(easyset):
    """Boxes read, resized and converted to fractions come back to COCO's pixels exactly: the chain from
    the annotations to the metric loses nothing."""
    from dlbench.workloads.detection.coco import resolve_split

    t = load_images(resolve_split(easyset, "val"), SIZE, None, annotated_only=False)
    assert t.images.shape == (5, SIZE, SIZE, 3) and t.images.dtype == np.uint8
    assert all(((b >= 0) & (b <= 1)).all() for b in t.boxes) and {
        int(x) for x in np.concatenate(t.labels)
    } <= {1, 2, 3}
    truth = DetectionTruth(t.gt, t.image_ids, default_boxes_for(SIZE))
    assert coco_map50(_perfect(t.boxes, t.labels, truth.dboxes), truth) == pytest.approx(
        {"map50": 1.0, "map": 1.0}
    )


def test_metric_chain_perfect_shifted_padded_and_nan(easyset):
    src = _source(job_for(easyset))
    truth, t = src.eval_labels, src.test
    assert metric("coco_map") == ("map50", coco_map50, True)  # a fraction: the report states points
    perfect = _perfect(t.boxes, t.labels, truth.dboxes)
    assert coco_map50(perfect, truth)["map50"] == pytest.approx(1.0)
    # moved by 20% of their width: IoU 0.8 / 1.2 = 0.67, found at IoU 0.5, not at the strict thresholds
    shifted = coco_map50(_perfect(t.boxes, t.labels, truth.dboxes, shift=0.2), truth)
    assert shifted["map50"] == pytest.approx(1.0) and 0.1 < shifted["map"] < 0.6
    # by 60%: IoU 0.4 / 1.6 = 0.25, nothing found
    assert coco_map50(_perfect(t.boxes, t.labels, truth.dboxes, shift=0.6), truth) == {
        "map50": 0.0,
        "map": 0.0,
    }
    # a framework's own postprocess (model.postprocess=true): padded boxes, scores, labels (0 = unused)
    boxes = np.zeros((len(t.boxes), 4, 4), np.float32)
    scores, labels = np.zeros((len(t.boxes), 4), np.float32), np.zeros((len(t.boxes), 4), np.float32)
    for i, (b, lab) in enumerate(zip(t.boxes, t.labels, strict=True)):
        boxes[i, : len(b)], scores[i, : len(b)], labels[i, : len(b)] = b, 0.9, lab
    assert coco_map50((boxes, scores, labels), truth)["map50"] == pytest.approx(1.0)
    loc, conf = perfect
    conf = conf.copy()
    conf[0, 0, 0] = np.nan
    assert all(math.isnan(v) for v in coco_map50((loc, conf), truth).values())
    # an untrained box decoding to inf is clipped to the image, not a NaN mAP
    wild = loc.copy()
    wild[:, 2:] = 1e4
    assert math.isfinite(coco_map50((wild, perfect[1]), truth)["map50"])


def test_source_follows_the_seeded_plan_and_covers_the_held_out_split(easyset):
    job = job_for(easyset)
    src = _source(job)
    assert src.steps_per_epoch == 3  # 12 annotated images // 4
    batches = [src.next() for _ in range(src.steps_per_epoch + 1)]
    image, loc, labels = batches[0].inputs[0], *batches[0].targets
    assert image.shape == (4, 3, SIZE, SIZE) and image.dtype == np.float32 and abs(float(image.mean())) < 3
    assert loc.shape == (4, 4, 236) and labels.shape == (4, 236) and labels.dtype == np.int32
    assert (labels > 0).any(axis=1).all()  # every training image has a matched default box
    order = EpochPlan(3, 4).order(0, 12)
    want_loc, want_labels = encode_batch(
        [src.train.boxes[i] for i in order[:4]], [src.train.labels[i] for i in order[:4]], src.dboxes
    )
    np.testing.assert_array_equal(labels, want_labels)
    np.testing.assert_allclose(loc, want_loc)
    assert src.epoch == 1  # the fourth batch began epoch 2
    again = _source(job_for(easyset)).next()
    other = _source(job_for(easyset, schedule={"epochs": 1, "seed": 4, "batch_size": 4})).next()
    np.testing.assert_array_equal(again.inputs[0], image)
    assert not np.array_equal(other.inputs[0], image)
    evals = list(src.eval_batches(2))
    assert [b.units for b in evals] == [2, 2, 1]
    assert list(src.eval_labels.image_ids) == [im["id"] for im in src.eval_labels.gt["images"]]
    assert len(src.eval_labels.gt["images"]) == 5
    facts = src.facts()
    assert facts["train_samples"] == 12 and facts["eval_samples"] == 5 and facts["default_boxes"] == 236


def test_hflip_mirrors_images_and_boxes():
    images = np.arange(2 * 2 * 3 * 3, dtype=np.uint8).reshape(2, 2, 3, 3)
    boxes = [np.array([[0.1, 0.2, 0.4, 0.6]], np.float32)] * 2
    out, flipped = hflip(images, boxes, np.array([True, False]))
    np.testing.assert_array_equal(out[0], images[0, :, ::-1])
    np.testing.assert_array_equal(out[1], images[1])
    np.testing.assert_allclose(flipped[0], [[0.6, 0.2, 0.9, 0.6]])
    np.testing.assert_allclose(flipped[1], boxes[1])


class _Bench:
    """What converge.evaluate needs: an in-memory source and predict() returning several outputs."""

    def __init__(self, source: CocoMemorySource) -> None:
        self.in_memory = source

    def predict(self, host):  # the answer itself: the batch's encoded targets as (loc, conf)
        labels = host.targets["labels"]
        return host.targets["loc"], np.eye(CLASSES + 1, dtype=np.float32)[labels].transpose(0, 2, 1) * 20.0


def test_evaluate_joins_several_outputs_batch_by_batch(easyset, monkeypatch):
    import dlbench.converge as converge

    monkeypatch.setattr(converge, "EVAL_BATCH", 2)  # 3 predict calls, joined output by output
    got = evaluate(_Bench(_source(job_for(easyset))), coco_map50)
    assert got == pytest.approx({"map50": 1.0, "map": 1.0})


def test_checks_before_the_worker_are_one_line(easyset, tmp_path):
    job = job_for(easyset)
    validate(job)
    facts = check_dataset(job)
    assert facts["dataset.found_samples"] == 12 and facts["dataset.found_classes"] == CLASSES
    for over, message in (
        ({"model": {"name": "ssd300", "task": "detection", "image_size": SIZE, "num_classes": CLASSES}},
         rf"has {CLASSES} categories but model.num_classes={CLASSES} .*use model.num_classes={CLASSES + 1}"),
        ({"schedule": {"epochs": 1, "seed": 3, "batch_size": 16}}, "fewer than the batch"),
        ({"model": {"name": "small_cnn", "task": "classification"}}, "is detection data: use model=ssd300 with it"),
        ({"dataset": {"name": "coco_memory", "format": "coco_memory", "path": str(tmp_path / "none")}}, "does not exist"),
    ):  # fmt: skip
        bad = job_for(easyset, **over)
        with pytest.raises(ConfigError, match=message) as err:
            check_dataset(bad)
        assert "\n" not in str(err.value)


def test_the_cpu_preset_composes_to_a_detection_converge_sweep(compose):
    cfg = compose(["+experiment=accuracy_ssd"], hydra=True)
    assert (cfg.mode, cfg.model.name, cfg.dataset.format) == ("converge", "ssd300", "coco_memory")
    assert (cfg.model.image_size, cfg.model.num_classes, cfg.threads) == (48, 4, 1)
    assert dict(cfg.hydra.sweeper.params) == {"framework": "tf,torch,mxnet", "precision": "fp32,amp"}
    validate(JobConfig.from_dict(dict(compose(["+experiment=accuracy_ssd"]))))
