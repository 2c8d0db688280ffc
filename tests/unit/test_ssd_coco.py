"""The generated COCO-format set, its checks, and the DALI COCO pipeline for SSD on the CPU."""

from __future__ import annotations

import gc
import importlib.util
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from dlbench.errors import ConfigError
from dlbench.workloads.detection import coco
from dlbench.workloads.detection.boxes import dboxes300_coco, encode

pytest.importorskip("nvidia.dali")

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "datasets" / "make_coco_dataset.py"
D = dboxes300_coco()


def _script():
    module = sys.modules.get("make_coco_dataset")
    if module is None:
        spec = importlib.util.spec_from_file_location("make_coco_dataset", SCRIPT)
        module = sys.modules["make_coco_dataset"] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return module


def _make(out: Path, *extra: str) -> Path:
    assert _script().main(["--out", str(out), "--train", "10", "--val", "5", "--seed", "3", *extra]) == 0
    return out


@pytest.fixture(scope="module")
def cocoset(tmp_path_factory) -> Path:
    return _make(tmp_path_factory.mktemp("coco"))


def _copy(src: Path, tmp: Path) -> Path:
    return Path(shutil.copytree(src, tmp / "copy"))


@pytest.mark.parametrize("objects", ["auto", "shapes"])
def test_generator_writes_a_deterministic_coco_set(cocoset, tmp_path, objects):
    from pycocotools.coco import COCO

    first = cocoset if objects == "auto" else _make(tmp_path / "a", "--objects", objects)
    again = _make(tmp_path / "b", "--objects", objects)
    for folder in ("train2017", "val2017"):
        ann = f"annotations/instances_{folder}.json"
        assert (first / ann).read_bytes() == (again / ann).read_bytes()
        names = sorted(p.name for p in (first / folder).iterdir())
        assert names and all(
            (first / folder / n).read_bytes() == (again / folder / n).read_bytes() for n in names
        )
        data = json.loads((first / ann).read_text())
        ids = sorted(c["id"] for c in data["categories"])
        assert ids == list(range(1, 20, 2))  # gaps, as COCO's ids have
        sizes = {im["id"]: (im["width"], im["height"]) for im in data["images"]}
        for a in data["annotations"]:
            x, y, w, h = a["bbox"]
            W, H = sizes[a["image_id"]]
            assert min(x, y) >= 0 and w > 0 and h > 0 and x + w <= W and y + h <= H
            assert a["category_id"] in ids
        COCO(str(first / ann))  # pycocotools reads it
    source = json.loads((first / "annotations/instances_val2017.json").read_text())["info"]["description"]
    fashion = objects == "auto" and Path("/usr/share/datasets/fashion-mnist").is_dir()
    assert ("fashion-mnist" if fashion else "shapes") in source
    other = _make(tmp_path / "c", "--objects", objects, "--seed", "4")
    assert (other / "train2017/000000000001.jpg").read_bytes() != (
        first / "train2017/000000000001.jpg"
    ).read_bytes()


def test_layout_problems_are_one_line(cocoset, tmp_path):
    copy = _copy(cocoset, tmp_path)
    ann = copy / "annotations/instances_train2017.json"
    data = json.loads(ann.read_text())
    data["images"].append({"id": 999, "file_name": "missing.jpg", "width": 10, "height": 10})
    ann.write_text(json.dumps(data))
    cases = [
        (copy, "missing.jpg, which does not exist"),
        (tmp_path / "nowhere", "is not a folder"),
    ]
    broken = _copy(cocoset, tmp_path / "b")
    (broken / "annotations/instances_train2017.json").write_text("{not json")
    cases.append((broken, "cannot be read"))
    no_ann = _copy(cocoset, tmp_path / "c")
    (no_ann / "annotations/instances_train2017.json").unlink()
    cases.append((no_ann, "no annotations/instances_train2017.json; create a small set"))
    for root, words in cases:
        with pytest.raises(ConfigError) as err:
            coco.resolve_split(root, "train")
        assert words in str(err.value) and "\n" not in str(err.value)


def test_train_pipeline_outputs_encoded_targets(cocoset):
    from dlbench.workloads.detection.coco_pipeline import CocoPipeline

    pipe = CocoPipeline(str(cocoset), 4, D, train=True, num_threads=1, seed=5)
    assert pipe.num_samples == coco.resolve_split(cocoset, "train").annotated_images
    images, loc, labels = (np.array(t.as_tensor()) for t in pipe.run())
    assert images.shape == (4, 3, 300, 300) and images.dtype == np.float32
    assert -3 < images.mean() < 3 and images.std() > 0.1  # normalised, not 0..255
    assert loc.shape == (4, 4, 8732) and loc.dtype == np.float32 and np.isfinite(loc).all()
    assert labels.shape == (4, 8732) and labels.dtype == np.int32
    assert labels.max() <= 10 and labels.min() >= 0 and (labels > 0).sum() > 0  # 10 categories -> 1..10
    assert not loc.transpose(0, 2, 1)[labels == 0].any()  # background: zero offsets
    hwc = CocoPipeline(str(cocoset), 2, D, train=True, num_threads=1, layout="NHWC")
    assert np.array(hwc.run()[0].as_tensor()).shape == (2, 300, 300, 3)


def test_dali_encoder_equals_the_numpy_encoder():
    import nvidia.dali.fn as fn
    from nvidia.dali.pipeline import Pipeline

    from dlbench.workloads.detection.coco_pipeline import encode_boxes
    from dlbench.workloads.detection.synthetic import random_ground_truth

    boxes, labels = random_ground_truth(np.random.default_rng(1), 4, max_boxes=6)
    boxes[0] = D.ltrb[[100, 5000]].copy()  # default boxes themselves: zero offsets
    pipe = Pipeline(batch_size=4, num_threads=1, device_id=None)
    with pipe:
        b, lab = fn.external_source(source=lambda: (boxes, labels), num_outputs=2, batch=True)
        pipe.set_outputs(*encode_boxes(b, lab, D))
    pipe.build()
    loc, cls = pipe.run()
    for i in range(4):
        offsets, expect = encode(boxes[i], labels[i], D)
        np.testing.assert_array_equal(np.array(cls[i]), expect)
        np.testing.assert_allclose(np.array(loc[i]), offsets.T, atol=1e-4)


def test_eval_pipeline_reads_every_image_once_with_its_id(cocoset):
    from dlbench.workloads.detection.coco_pipeline import CocoPipeline

    pipe = CocoPipeline(str(cocoset), 2, D, train=False, num_threads=1)
    split = coco.resolve_split(cocoset, "val")
    assert pipe.num_samples == split.num_images == 5
    seen = []
    for _ in range(3):  # 5 images in batches of 2: the last batch is padded
        images, ids = pipe.run()
        assert np.array(images.as_tensor()).shape == (2, 3, 300, 300)
        seen += np.array(ids.as_tensor()).tolist()
    assert seen[:5] == [im["id"] for im in split.data["images"]]


def test_corrupt_image_fails_in_one_line_or_is_skipped(cocoset, tmp_path):
    from dlbench.data.validate import CorruptImageError
    from dlbench.workloads.detection.coco_pipeline import CocoPipeline

    copy = _copy(cocoset, tmp_path)
    bad = sorted((copy / "train2017").iterdir())[2]
    bad.write_bytes(bad.read_bytes()[:2000])
    pipe = CocoPipeline(str(copy), 5, D, train=True, num_threads=1)
    with pytest.raises(CorruptImageError) as err:
        for _ in range(4):  # two epochs: the bad image is in one of these batches
            pipe.run()
    assert f"corrupt image {bad}: truncated JPEG" in str(err.value) and "\n" not in str(err.value)
    skipping = CocoPipeline(str(copy), 5, D, train=True, num_threads=1, skip_corrupt=True)
    assert skipping.skipped == 1 and skipping.num_samples == pipe.num_samples - 1
    for _ in range(4):
        skipping.run()
    # the rewritten annotations live in a private folder that goes with the pipeline; none is made unneeded
    scratch = Path(skipping.coco.annotations_file).parent
    assert scratch.is_dir() and pipe._tmp is None
    skipping.close()
    assert not scratch.exists()
    again = CocoPipeline(str(copy), 5, D, train=True, num_threads=1, skip_corrupt=True)
    scratch = Path(again.coco.annotations_file).parent
    del again
    gc.collect()  # a pipeline nobody closed (a failed test, an interrupted worker) leaves nothing either
    assert not scratch.exists()


def _job(root: Path, mode: str = "train", **model):
    from dlbench.config import JobConfig

    job = JobConfig.from_dict(
        {
            "model": {"name": "ssd300", "task": "detection", "image_size": 32, **model},
            "dataset": {"name": "coco2017", "path": str(root), "format": "coco"},
        }
    )
    job.mode = mode
    return job


def test_check_dataset_reads_the_coco_split_of_the_mode(cocoset):
    from dlbench.data.validate import check_dataset

    train = check_dataset(_job(cocoset))
    assert train["dataset.resolved_format"] == "coco" and train["dataset.split"] == "train2017"
    assert train["dataset.found_classes"] == 10
    assert train["dataset.found_samples"] == coco.resolve_split(cocoset, "train").annotated_images
    infer = check_dataset(_job(cocoset, "infer"))
    assert infer["dataset.split"] == "val2017" and infer["dataset.found_samples"] == 5


def test_check_dataset_refusals_are_one_line(cocoset, tmp_path):
    from dlbench.config import JobConfig
    from dlbench.data.validate import check_dataset

    classification = JobConfig.from_dict(
        {
            "model": {"name": "resnet_cifar", "depth": 8},
            "dataset": {"name": "coco2017", "path": str(cocoset), "format": "coco"},
        }
    )
    copy = _copy(cocoset, tmp_path)
    missing = sorted((copy / "train2017").iterdir())[0]
    missing.unlink()
    cases = [
        (_job(cocoset, num_classes=10), "has 10 categories but model.num_classes=10"),
        (classification, "is detection data: use model=ssd300 with it, not model=resnet_cifar"),
        (_job(copy), f"name image {missing}, which does not exist"),
    ]
    for job, words in cases:
        with pytest.raises(ConfigError) as err:
            check_dataset(job)
        assert words in str(err.value) and "\n" not in str(err.value)


def test_mode_data_times_the_coco_training_pipeline(cocoset):
    """mode=data with a detection model runs the COCO pipeline SSD training waits for (augmentations and
    box encoding included), not the classification one."""
    from dlbench.data.bench import DataBench
    from dlbench.data.validate import check_dataset

    job = _job(cocoset, "data")
    job.schedule.batch_size, job.data.num_threads = 2, 1
    assert check_dataset(job)["dataset.split"] == "train2017"
    bench = DataBench(job)
    try:
        bench.step()
        bench.step()
        images, loc, labels = (np.array(t.as_tensor()) for t in bench._outputs.inputs)
        assert images.shape == (2, 3, 32, 32) and loc.shape == (2, 4, 108) and labels.shape == (2, 108)
        assert bench.units() == 4 and bench.run_facts()["dataset_format"] == "coco"
        assert bench.run_facts()["data_samples"] == coco.resolve_split(cocoset, "train").annotated_images
    finally:
        bench.close()


def _spoil(copy: Path, change) -> dict:
    """Apply `change(annotation, image)` to the first training annotation; return that annotation."""
    ann = copy / "annotations/instances_train2017.json"
    data = json.loads(ann.read_text())
    a = data["annotations"][0]
    change(a, next(im for im in data["images"] if im["id"] == a["image_id"]))
    ann.write_text(json.dumps(data))
    return a


BAD_BOXES = {
    "negative width": (lambda a, im: a["bbox"].__setitem__(2, -3.0), "width -3 is not positive"),
    "zero height": (lambda a, im: a["bbox"].__setitem__(3, 0), "height 0 is not positive"),
    "outside": (lambda a, im: a["bbox"].__setitem__(0, im["width"] - 1.0), "reaches outside the"),
    "category": (lambda a, im: a.__setitem__("category_id", 2), "category_id 2 is not among"),
}


@pytest.mark.parametrize("case", sorted(BAD_BOXES))
def test_a_bad_box_is_one_line_naming_file_image_and_box(cocoset, tmp_path, case):
    change, words = BAD_BOXES[case]
    copy = _copy(cocoset, tmp_path)
    a = _spoil(copy, change)
    with pytest.raises(ConfigError) as err:
        coco.resolve_split(copy, "train")
    msg = str(err.value)
    assert "\n" not in msg and words in msg and "data.skip_bad_boxes=true" in msg
    assert str(copy / "annotations/instances_train2017.json") in msg
    assert f"(id {a['image_id']}), annotation {a['id']} bbox {a['bbox']}" in msg
    image = next(
        im
        for im in json.loads((copy / "annotations/instances_train2017.json").read_text())["images"]
        if im["id"] == a["image_id"]
    )
    assert f"image {image['file_name']}" in msg


def test_bad_boxes_are_skipped_and_counted_on_request(cocoset, tmp_path):
    from dlbench.data.validate import check_dataset
    from dlbench.workloads.detection.coco_pipeline import CocoPipeline

    copy = _copy(cocoset, tmp_path)
    bad = _spoil(copy, BAD_BOXES["negative width"][0])
    split = coco.resolve_split(copy, "train", skip_bad_boxes=True)
    assert split.skipped_boxes == 1 and bad["id"] not in {a["id"] for a in split.data["annotations"]}
    job = _job(copy)
    job.data.skip_bad_boxes = True
    assert check_dataset(job)["dataset.skipped_boxes"] == 1
    pipe = CocoPipeline(str(copy), 5, D, train=True, num_threads=1, skip_bad_boxes=True)
    assert pipe.coco.annotations_file != split.annotations_file  # DALI reads the copy without the box
    for _ in range(4):  # two epochs: every target finite (the negative width would give NaN offsets)
        loc = np.array(pipe.run()[1].as_tensor())
        assert np.isfinite(loc).all()


JAX_COCO = """
import json, sys, numpy as np, jax
from dlbench.config import JobConfig
from dlbench.backends.jax.dali_source import CocoSource
from dlbench.backends.jax.precision import JaxPrecision
from dlbench.core.precision import plan_precision
from dlbench.workloads.detection.coco_pipeline import CocoPipeline
out = {}
for mode in ("train", "infer"):
    job = JobConfig.from_dict({"model": {"name": "ssd300", "task": "detection"},
                               "dataset": {"name": "coco2017", "path": sys.argv[1], "format": "coco"}})
    job.mode, job.schedule.batch_size, job.data.num_threads, job.data.seed = mode, 2, 1, 3
    source = CocoSource(job, jax.devices("cpu")[0], JaxPrecision(plan_precision(job.precision, "cpu")))
    batch = source.next()
    plain = CocoPipeline.from_job(job, None, "NHWC", "float32").run()  # the same graph, seed and files
    arrays = [*batch.inputs, *batch.targets]
    out[mode] = {
        "types": [type(a).__name__ for a in arrays], "shapes": [list(a.shape) for a in arrays],
        "dtypes": [str(a.dtype) for a in arrays], "units": batch.units,
        "equal": all(np.array_equal(np.asarray(a), np.asarray(p.as_tensor())) for a, p in zip(arrays, plain)),
    }
    source.close()
print("STATS " + json.dumps(out))
"""


def test_jax_reads_coco_through_dalis_jax_plugin(cocoset):
    """JAX's COCO source hands DALI's own batch over as jax.Arrays: NHWC image, DALI-encoded targets."""
    from tests.worker_jobs import framework_pythons, run_snippet, worker_env

    python = framework_pythons(["jax"]).get("jax")
    if python is None:
        pytest.skip("no interpreter with JAX here (make setup makes .venv-jax)")
    script = JAX_COCO.replace("sys.argv[1]", repr(str(cocoset)))
    got = run_snippet(script, worker_env(OMP_NUM_THREADS="1"), python=python)
    train, infer = got["train"], got["infer"]
    assert train["types"] == ["ArrayImpl"] * 3 and train["equal"] and train["units"] == 2
    assert train["shapes"] == [[2, 300, 300, 3], [2, 4, 8732], [2, 8732]]
    assert train["dtypes"] == ["float32", "float32", "int32"]
    assert infer["shapes"] == [[2, 300, 300, 3]] and infer["equal"]  # the held-out split: no targets
