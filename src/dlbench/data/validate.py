"""Dataset checks that run in the orchestrator, before a worker spends minutes building a model.

Pure Python (no DALI, no framework): it resolves `dataset.path` (or `$dataset.path_env`), works out
the layout on disk and the split for the mode, and turns every way a dataset can be unusable into a
one-line `ConfigError` that names the problem and the fix. The worker's pipeline builder calls the
same `resolve_layout`, so what was checked is what gets read.

Layouts (dataset.format):
  folder    ROOT/<class>/<image>      labels = index of the class folder in sorted order
            (ROOT may instead hold train/ and val/ splits, each laid out like that)
  tfrecord  ROOT/<file> TFRecord files of tf.train.Example (image/encoded, image/class/label,
            labels 1-based as TF's ImageNet converter writes them), each with a DALI index
            `<file>.idx` beside it or `ROOT/idx/<file>[.idx]`; train-*/validation-* name splits
  recordio  ROOT/<name>.rec + ROOT/<name>.idx (MXNet im2rec); or dataset.path = the .rec file
"""

from __future__ import annotations

import hashlib
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dlbench.config import MEMORY_FORMATS, JobConfig
from dlbench.core.names import project_relative
from dlbench.data.formats import IMAGE_EXTENSIONS, RECORDIO_MAGIC
from dlbench.errors import ConfigError
from dlbench.workloads.classification.small_images import check_image_set
from dlbench.workloads.recommendation.movielens import check_movielens

FORMATS = ("folder", "tfrecord", "recordio", "coco")
DECODES = ("auto", "gpu", "cpu")
TRAIN_SPLITS = ("train",)
EVAL_SPLITS = ("val", "validation", "test")
DIGEST_STAT_LIMIT = 4096  # file sizes enter the digest up to this many files (1.28M JPEGs: names only)
INDEX_FIX = "create them with `python -m dlbench.data.formats index {path}`"


class CorruptImageError(ConfigError):
    """An image the decoder cannot read; the message names it and the fix (data.skip_corrupt=true)."""


@dataclass
class DatasetLayout:
    """What is on disk for one job: the files to read, already narrowed to the mode's split."""

    format: str
    root: str  # the folder the files were taken from (the split's folder for `folder`)
    split: str | None = None
    classes: list[str] = field(default_factory=list)  # folder: class names, sorted
    files: list[str] = field(default_factory=list)  # folder: images; tfrecord/recordio: data files
    labels: list[int] = field(default_factory=list)  # folder: one per image
    indexes: list[str] = field(default_factory=list)  # tfrecord/recordio: one index per data file
    num_samples: int = 0

    def facts(self) -> dict[str, Any]:
        """Flat facts for MLflow params (dataset.*)."""
        out: dict[str, Any] = {
            "dataset.resolved_path": self.root,
            "dataset.resolved_format": self.format,
            "dataset.found_samples": self.num_samples,
            "dataset.found_files": len(self.files),
            "dataset.digest": files_digest(self.root, self.files),
        }
        if self.split:
            out["dataset.split"] = self.split
        if self.classes:
            out["dataset.found_classes"] = len(self.classes)
        return out


def files_digest(root: str, files: list[str], stat_limit: int = DIGEST_STAT_LIMIT) -> str:
    """A short identity of the files a job reads: their paths relative to root, plus their sizes when there
    are at most `stat_limit` of them (TFRecord/RecordIO shards; stat-ing a million JPEGs would cost seconds
    before every job). Same files, same digest, wherever they are mounted. MLflow shows it as the run's
    dataset digest."""
    h = hashlib.sha256()
    sizes = len(files) <= stat_limit
    for path in sorted(os.path.relpath(f, root) for f in files):
        h.update(path.encode())
        if sizes:
            h.update(b"\0%d" % os.path.getsize(os.path.join(root, path)))
        h.update(b"\n")
    return h.hexdigest()[:16]


def check_dataset(job: JobConfig) -> dict[str, Any]:
    """Check the job's dataset and data settings; return facts to log. Raises ConfigError.

    Side effect, on purpose: a path taken from `dataset.path_env` is written into `job.dataset.path`,
    so the worker reads exactly the folder checked here and MLflow records it.
    """
    ds = job.dataset
    if (
        ds.format == "ratings"
        or ds.name == "movielens"
        or (job.model.task == "recommendation" and ds.name != "synthetic")
    ):
        return check_movielens(job)  # ratings, not images: workloads/recommendation/movielens.py
    if ds.name == "synthetic":
        if job.mode == "data":
            raise ConfigError(
                "mode=data measures the DALI input pipeline: choose a real dataset (e.g. dataset=imagenet)"
            )
        return {}
    if ds.format == "parallel_text":  # translation corpora: two aligned text files per split
        from dlbench.workloads.translation.source import check_corpus

        return check_corpus(job)
    if ds.format == "coco_memory":  # detection's COCO layout, decoded into memory by the worker
        from dlbench.workloads.detection.coco_memory import check_memory_set

        return check_memory_set(job)
    if (
        ds.format in MEMORY_FORMATS
    ):  # read whole into memory by the worker (workloads/classification/small_images.py)
        return check_image_set(ds.name, ds.path, job.model, ds.num_samples, ds.eval_samples)
    _check_data_settings(job)
    ds.path = resolve_path(job)
    if job.model.task == "detection" or ds.format == "coco":
        return _check_coco(job)
    layout = resolve_layout(job)
    outputs = getattr(job.model, "num_classes", None)  # a classification family's key
    if layout.classes and outputs is not None and len(layout.classes) > outputs:
        raise ConfigError(
            f"dataset {layout.root} has {len(layout.classes)} classes but model.num_classes="
            f"{outputs}: use a model with as many outputs (model.num_classes={len(layout.classes)})"
        )
    if layout.num_samples < job.data.num_shards:
        raise ConfigError(
            f"dataset {layout.root} has {layout.num_samples} samples, fewer than data.num_shards={job.data.num_shards}"
        )
    return layout.facts()


def _check_coco(job: JobConfig) -> dict[str, Any]:
    """Detection reads the COCO layout (dlbench.workloads.detection.coco), and only detection does."""
    from dlbench.workloads.detection import coco  # detection only

    ds = job.dataset
    if job.model.task != "detection" or ds.format not in (None, "coco"):
        raise ConfigError(
            f"dataset={ds.name} (format={ds.format}) with model={job.model.name}: COCO-layout data is for "
            "detection models (model=ssd300) and detection reads dataset.format=coco (e.g. dataset=coco2017)"
        )
    split = coco.resolve_split(ds.path, "val" if job.mode == "infer" else "train", job.data.skip_bad_boxes)
    classes = len(split.data["categories"])
    if classes >= job.model.num_classes:
        raise ConfigError(
            f"dataset {split.annotations_file} has {classes} categories but model.num_classes="
            f"{job.model.num_classes} (background included): use model.num_classes={classes + 1} or more"
        )
    images = split.num_images if job.mode == "infer" else split.annotated_images
    if images < job.data.num_shards:
        raise ConfigError(
            f"dataset {split.root} has {images} images, fewer than data.num_shards={job.data.num_shards}"
        )
    return {
        "dataset.resolved_path": split.root,
        "dataset.resolved_format": "coco",
        "dataset.split": split.name,
        "dataset.found_samples": images,
        "dataset.found_classes": classes,
        "dataset.skipped_boxes": split.skipped_boxes,
    }


def _check_data_settings(job: JobConfig) -> None:
    d, ds = job.data, job.dataset
    checks = [
        (d.decode in DECODES, f"data.decode={d.decode!r}: use one of {DECODES}"),
        (d.num_threads >= 1, f"data.num_threads={d.num_threads}: must be 1 or more"),
        (d.prefetch >= 1, f"data.prefetch={d.prefetch}: must be 1 or more (2 overlaps input with compute)"),
        (d.num_shards >= 1, f"data.num_shards={d.num_shards}: must be 1 or more"),
        (
            0 <= d.shard_id < d.num_shards,
            f"data.shard_id={d.shard_id}: must be in [0, data.num_shards={d.num_shards})",
        ),
        (
            ds.format in (None, *FORMATS),
            f"dataset.format={ds.format!r}: use one of {FORMATS} (or null to detect)",
        ),
        (
            ds.num_samples is None or ds.num_samples >= 1,
            "dataset.num_samples: must be 1 or more (or null for all)",
        ),
        (
            not (d.decode == "gpu" and job.device == "cpu"),
            "data.decode=gpu with device=cpu: use data.decode=auto or cpu",
        ),
    ]
    for ok, message in checks:
        if not ok:
            raise ConfigError(message)


def resolve_path(job: JobConfig) -> str:
    """dataset.path, else $dataset.path_env; must be an existing, non-empty file or folder (a relative path:
    see core.names.project_relative)."""
    ds = job.dataset
    where = "dataset.path"
    raw = ds.path
    if not raw and ds.path_env:
        raw, where = os.environ.get(ds.path_env), f"${ds.path_env}"
    if not raw:
        env = f" and ${ds.path_env} is not set" if ds.path_env else ""
        raise ConfigError(
            f"dataset={ds.name}: dataset.path is null{env}; set dataset.path=/path/to/{ds.name}"
        )
    path = project_relative(raw)
    if not path.exists():
        raise ConfigError(f"dataset={ds.name}: {where}={raw} does not exist; point it at the dataset folder")
    if path.is_dir() and not any(p for p in path.iterdir() if not p.name.startswith(".")):
        raise ConfigError(
            f"dataset={ds.name}: {where}={raw} is empty; create the data (e.g. scripts/datasets/make_image_dataset.py)"
        )
    return str(path)


def resolve_layout(job: JobConfig) -> DatasetLayout:
    """The files the job reads: format checked (or detected) and the mode's split chosen."""
    path = Path(resolve_path(job))
    fmt = job.dataset.format or detect_format(path)
    evaluate = job.mode == "infer"
    if fmt == "folder":
        return _folder_layout(path, evaluate)
    if fmt == "tfrecord":
        return _tfrecord_layout(path, evaluate)
    return _recordio_layout(path, evaluate)


# ---------------------------------------------------------------------------------------------


def _visible(path: Path) -> list[Path]:
    return sorted(p for p in path.iterdir() if not p.name.startswith("."))


def _is_image(p: Path) -> bool:
    return p.suffix.lower() in IMAGE_EXTENSIONS


def _is_tfrecord(p: Path) -> bool:
    """A TFRecord file starts with a uint64 length that fits in the file (plus 16 bytes framing)."""
    if not p.is_file() or p.suffix == ".idx" or _is_image(p) or p.suffix == ".rec":
        return False
    size = p.stat().st_size
    with open(p, "rb") as f:
        head = f.read(8)
    return len(head) == 8 and 0 < struct.unpack("<Q", head)[0] <= size - 16


def _is_recordio(p: Path) -> bool:
    if not p.is_file():
        return False
    with open(p, "rb") as f:
        head = f.read(4)
    return len(head) == 4 and struct.unpack("<I", head)[0] == RECORDIO_MAGIC


def detect_format(path: Path) -> str:
    """Guess the format from what is on disk (used when dataset.format is null)."""
    if path.is_file():
        return "recordio" if _is_recordio(path) else "tfrecord"
    entries = _visible(path)
    if any(p.suffix == ".rec" for p in entries):
        return "recordio"
    if any(p.is_dir() for p in entries) and not any(_is_tfrecord(p) for p in entries if p.is_file()):
        return "folder"
    return "tfrecord"


def _describe(path: Path) -> str:
    """What a folder holds, for error messages: 'RecordIO files (train.rec)' etc."""
    if path.is_file():
        return "a single file"
    entries = _visible(path)
    recs = [p.name for p in entries if p.suffix == ".rec"]
    if recs:
        return f"RecordIO files ({recs[0]}); set dataset.format=recordio"
    records = [p.name for p in entries if _is_tfrecord(p)]
    if records:
        return f"TFRecord files ({records[0]}); set dataset.format=tfrecord"
    images = [p.name for p in entries if _is_image(p)]
    if images:
        return f"images ({images[0]}) but no class subfolders: the folder format needs {path}/<class>/<image>.jpg"
    return f"no images, TFRecord or RecordIO files ({', '.join(p.name for p in entries[:3])})"


def _pick_split(names: list[str], evaluate: bool) -> str | None:
    """The split for the mode among train/val-like names: eval splits for infer when there is one."""
    train = [n for n in names if n in TRAIN_SPLITS]
    evals = [n for n in names if n in EVAL_SPLITS]
    if evaluate and evals:
        return evals[0]
    return train[0] if train else (evals[0] if evals else None)


def _folder_layout(root: Path, evaluate: bool) -> DatasetLayout:
    if root.is_file():
        raise ConfigError(
            f"dataset.format=folder but dataset.path={root} is a file; point it at the folder of class subfolders"
        )
    subdirs = [p for p in _visible(root) if p.is_dir()]
    split = None
    names = [p.name for p in subdirs]
    if names and set(names) <= set(TRAIN_SPLITS + EVAL_SPLITS):
        candidates = [n for n in names if any(q.is_dir() for q in _visible(root / n))]
        split = _pick_split(candidates, evaluate)
        if split is None:
            raise ConfigError(
                f"dataset.format=folder: {root} has {'/'.join(names)} but none holds class subfolders"
            )
        root = root / split
        subdirs = [p for p in _visible(root) if p.is_dir()]
    if not subdirs:
        raise ConfigError(f"dataset.format=folder but {root} holds {_describe(root)}")
    files: list[str] = []
    labels: list[int] = []
    for label, d in enumerate(subdirs):
        found = sorted(
            os.path.join(dirpath, n)
            for dirpath, _, filenames in os.walk(d)
            for n in filenames
            if os.path.splitext(n)[1].lower() in IMAGE_EXTENSIONS and not n.startswith(".")
        )
        files += found
        labels += [label] * len(found)
    if not files:
        raise ConfigError(
            f"dataset.format=folder: the class subfolders of {root} hold no images ({', '.join(IMAGE_EXTENSIONS[:3])}, ...)"
        )
    return DatasetLayout(
        "folder", str(root), split, [d.name for d in subdirs], files, labels, num_samples=len(files)
    )


def _tfrecord_index(root: Path, data: Path) -> Path | None:
    for cand in (
        data.with_name(data.name + ".idx"),
        root / "idx" / data.name,
        root / "idx" / (data.name + ".idx"),
    ):
        if cand.is_file():
            return cand
    return None


def _split_of(name: str) -> str | None:
    head = name.split("-")[0].split("_")[0].split(".")[0].lower()
    return head if head in TRAIN_SPLITS + EVAL_SPLITS else None


def _tfrecord_layout(root: Path, evaluate: bool) -> DatasetLayout:
    data = [root] if root.is_file() else [p for p in _visible(root) if _is_tfrecord(p)]
    if not data:
        raise ConfigError(f"dataset.format=tfrecord but {root} holds {_describe(root)}")
    base = root.parent if root.is_file() else root
    split = _pick_split(sorted({s for p in data if (s := _split_of(p.name))}), evaluate)
    if split:
        data = [p for p in data if _split_of(p.name) == split]
    indexes = [_tfrecord_index(base, p) for p in data]
    missing = [p.name for p, i in zip(data, indexes, strict=True) if i is None]
    if missing:
        raise ConfigError(
            f"dataset.format=tfrecord: {len(missing)} of {len(data)} TFRecord files in {base} have no DALI index "
            f"(e.g. {missing[0]}.idx); " + INDEX_FIX.format(path=base)
        )
    n = sum(_count_lines(i) for i in indexes)
    return DatasetLayout(
        "tfrecord",
        str(base),
        split,
        files=[str(p) for p in data],
        indexes=[str(i) for i in indexes],
        num_samples=n,
    )


def _recordio_layout(root: Path, evaluate: bool) -> DatasetLayout:
    if root.is_file():
        recs, base = [root], root.parent
    else:
        recs, base = [p for p in _visible(root) if p.suffix == ".rec"], root
    if not recs:
        raise ConfigError(f"dataset.format=recordio but {root} holds {_describe(root)}")
    split = None
    if len(recs) > 1:
        split = _pick_split(sorted({s for p in recs if (s := _split_of(p.name))}), evaluate)
        chosen = [p for p in recs if _split_of(p.name) == split] if split else []
        if len(chosen) != 1:
            names = ", ".join(p.name for p in recs[:4])
            raise ConfigError(
                f"dataset.format=recordio: {base} holds several .rec files ({names}); set dataset.path to one"
            )
        recs = chosen
    rec = recs[0]
    if not _is_recordio(rec):
        raise ConfigError(
            f"dataset.format=recordio but {rec} is not an MXNet RecordIO file (bad magic number)"
        )
    idx = rec.with_suffix(".idx")
    if not idx.is_file():
        raise ConfigError(
            f"dataset.format=recordio: {rec.name} has no index {idx.name}; " + INDEX_FIX.format(path=base)
        )
    return DatasetLayout(
        "recordio", str(base), split, files=[str(rec)], indexes=[str(idx)], num_samples=_count_lines(idx)
    )


def _count_lines(path: Path) -> int:
    with open(path, "rb") as f:
        return sum(1 for line in f if line.strip())
