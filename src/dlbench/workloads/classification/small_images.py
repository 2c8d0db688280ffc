"""Small real image datasets that fit in memory, for training to quality (`mode=converge`).

Both install without a download at run time, so a fresh machine (and CI) can train on real data:

- fashion_mnist: Zalando's Fashion-MNIST, 60,000 train + 10,000 test 28x28 grey images of 10 kinds of
  clothing (Expat licence), from Debian's `dataset-fashion-mnist` package as IDX files.
- digits: the UCI handwritten digits scikit-learn bundles (1,797 8x8 images, pixel values 0..16); it
  has no test split of its own, so a fixed seeded split (1,437 train / 360 test) is made here (the same for every run).

Arrays stay uint8 N x H x W; `data.epochs` scales and normalises them per batch. A missing dataset is a
one-line `ConfigError` with the install command.
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from dlbench.errors import ConfigError
from dlbench.workloads.classification.idx import read_images, read_labels

FASHION_MNIST_DIR = Path("/usr/share/datasets/fashion-mnist")
FASHION_MNIST_INSTALL = "apt-get install dataset-fashion-mnist"
DIGITS_INSTALL = "pip install scikit-learn==1.9.1"
DIGITS_SPLIT_SEED = 0  # the digits train/test split never changes with the run's seed


@dataclass(frozen=True)
class ImageSetInfo:
    """What a dataset is: shapes, sizes, value range and how to install it."""

    name: str
    image_size: int
    channels: int
    num_classes: int
    train_size: int
    test_size: int
    pixel_max: int  # largest raw pixel value (255 for bytes, 16 for digits)
    install: str


FASHION_MNIST = ImageSetInfo("fashion_mnist", 28, 1, 10, 60_000, 10_000, 255, FASHION_MNIST_INSTALL)
DIGITS = ImageSetInfo("digits", 8, 1, 10, 1_437, 360, 16, DIGITS_INSTALL)
IMAGE_SETS = {info.name: info for info in (FASHION_MNIST, DIGITS)}


@dataclass(frozen=True)
class ImageSplits:
    """A dataset in memory: uint8 N x H x W images and int64 labels, train and held-out test."""

    info: ImageSetInfo
    train_images: np.ndarray
    train_labels: np.ndarray
    test_images: np.ndarray
    test_labels: np.ndarray

    def limit(self, train: int | None = None, test: int | None = None) -> ImageSplits:
        """The first `train` / `test` samples (None = all): a quick run on part of the data."""
        return replace(
            self,
            train_images=self.train_images[:train],
            train_labels=self.train_labels[:train],
            test_images=self.test_images[:test],
            test_labels=self.test_labels[:test],
        )


def load_image_set(name: str, root: str | Path | None = None) -> ImageSplits:
    """Read dataset `name` (fashion_mnist from `root`, default the Debian package's folder)."""
    if name == "fashion_mnist":
        return _fashion_mnist(Path(root) if root else FASHION_MNIST_DIR)
    if name == "digits":
        return _digits()
    raise ConfigError(f"dataset={name}: not a small image dataset (known: {', '.join(IMAGE_SETS)})")


def _idx_file(root: Path, stem: str) -> Path:
    """`stem.gz` as Debian ships it, or `stem` uncompressed as a user may have unpacked it."""
    for path in (root / f"{stem}.gz", root / stem):
        if path.is_file():
            return path
    raise ConfigError(
        f"dataset=fashion_mnist: {root / (stem + '.gz')} not found; install the dataset with "
        f"`{FASHION_MNIST_INSTALL}` (Debian/Ubuntu) or set dataset.path to a folder holding the four "
        "Fashion-MNIST IDX files"
    )


def _pair(root: Path, split: str, expected: int, info: ImageSetInfo) -> tuple[np.ndarray, np.ndarray]:
    images_path = _idx_file(root, f"{split}-images-idx3-ubyte")
    labels_path = _idx_file(root, f"{split}-labels-idx1-ubyte")
    images = read_images(images_path)
    labels = read_labels(labels_path, info.num_classes)
    shape = (expected, info.image_size, info.image_size)
    if images.shape != shape or labels.shape != (expected,):
        raise ConfigError(
            f"dataset=fashion_mnist: {split} files hold images {images.shape} and labels {labels.shape}, "
            f"expected {shape} and ({expected},); reinstall with `{FASHION_MNIST_INSTALL}`"
        )
    return images, labels


def _fashion_mnist(root: Path) -> ImageSplits:
    info = FASHION_MNIST
    train = _pair(root, "train", info.train_size, info)
    test = _pair(root, "t10k", info.test_size, info)
    return ImageSplits(info, *train, *test)


def digits_csv() -> Path:
    """scikit-learn's bundled digits.csv.gz, found without importing scikit-learn (and SciPy)."""
    spec = importlib.util.find_spec("sklearn")
    path = Path(spec.origin).parent / "datasets" / "data" / "digits.csv.gz" if spec and spec.origin else None
    if path is None or not path.is_file():
        raise ConfigError(
            f"dataset=digits: scikit-learn's digits data is not installed for {sys.executable}; "
            f"install it with `{sys.executable} -m {DIGITS_INSTALL}`"
        )
    return path


def _digits() -> ImageSplits:
    info = DIGITS
    table = np.loadtxt(digits_csv(), delimiter=",", dtype=np.float64)
    n = info.train_size + info.test_size
    if table.shape != (n, info.image_size**2 + 1):
        raise ConfigError(f"dataset=digits: {digits_csv()} holds {table.shape}, expected ({n}, 65)")
    images = table[:, :-1].astype(np.uint8).reshape(n, info.image_size, info.image_size)
    labels = table[:, -1].astype(np.int64)
    order = np.random.default_rng(DIGITS_SPLIT_SEED).permutation(n)
    test, train = np.sort(order[: info.test_size]), np.sort(order[info.test_size :])
    return ImageSplits(info, images[train], labels[train], images[test], labels[test])


def check_image_set(name: str, root: str | None, model: Any, train: int | None, test: int | None) -> dict:
    """Before a worker starts: the dataset's files are there and fit `model` (image size, channels,
    classes). Cheap (no file is read); returns facts to log as params. Raises ConfigError."""
    if name not in IMAGE_SETS:
        raise ConfigError(f"dataset={name}: not a small image dataset (known: {', '.join(IMAGE_SETS)})")
    info = IMAGE_SETS[name]
    if name == "fashion_mnist":
        folder = Path(root) if root else FASHION_MNIST_DIR
        for split in ("train", "t10k"):
            for kind in ("images-idx3", "labels-idx1"):
                _idx_file(folder, f"{split}-{kind}-ubyte")
        where = str(folder)
    else:
        where = str(digits_csv())
    want = (info.image_size, info.channels, info.num_classes)
    got = (
        getattr(model, "image_size", None),
        getattr(model, "channels", None),
        getattr(model, "num_classes", None),
    )
    if got != want:
        raise ConfigError(
            f"dataset={name} has {info.image_size}x{info.image_size}x{info.channels} images in {info.num_classes} "
            f"classes but the model is set to {got[0]}x{got[0]}x{got[1]}, {got[2]} classes: use model=small_cnn "
            f"model.image_size={info.image_size} model.channels={info.channels} model.num_classes={info.num_classes}"
        )
    for key, value, size in (("num_samples", train, info.train_size), ("eval_samples", test, info.test_size)):
        if value is not None and not 1 <= value <= size:
            raise ConfigError(f"dataset.{key}={value}: dataset={name} has {size:,}; use 1..{size} or null")
    return {
        "dataset.resolved_path": where,
        "dataset.train_samples": min(train or info.train_size, info.train_size),
        "dataset.eval_samples_used": min(test or info.test_size, info.test_size),
    }
