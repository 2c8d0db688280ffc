"""Real data for the accuracy mode: the IDX reader (generated files and the Debian package's), the
Fashion-MNIST and digits loaders, the seeded epoch plan, and top-1 accuracy."""

from __future__ import annotations

import gzip
import hashlib
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dlbench.data.epochs import EpochPlan, Normalizer, eval_batches
from dlbench.data.seeds import stream
from dlbench.errors import ConfigError
from dlbench.workloads.classification.eval import top1_accuracy
from dlbench.workloads.classification.idx import IdxFormatError, read_idx, read_images, read_labels, write_idx
from dlbench.workloads.classification.small_images import FASHION_MNIST_DIR, load_image_set
from tests.worker_jobs import worker_env

HAS_FASHION = (FASHION_MNIST_DIR / "t10k-labels-idx1-ubyte.gz").is_file()
needs_fashion = pytest.mark.skipif(
    not HAS_FASHION, reason="Debian's dataset-fashion-mnist is not installed (.ci/run installs it)"
)


# ---- IDX reader ----------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["images-idx3-ubyte.gz", "images-idx3-ubyte"])
def test_idx_round_trip_gzipped_and_raw(tmp_path: Path, name: str) -> None:
    images = np.arange(5 * 4 * 3, dtype=np.uint8).reshape(5, 4, 3)
    path = write_idx(tmp_path / name, images)
    got = read_images(path)
    assert got.dtype == np.uint8 and got.shape == (5, 4, 3)
    np.testing.assert_array_equal(got, images)
    # the file really is IDX: zero bytes, type 0x08, 3 dimensions, big-endian sizes
    raw = gzip.decompress(path.read_bytes()) if name.endswith(".gz") else path.read_bytes()
    assert raw[:4] == b"\x00\x00\x08\x03" and raw[4:8] == (5).to_bytes(4, "big")


def test_idx_reads_big_endian_wider_types(tmp_path: Path) -> None:
    values = np.array([[1, -2], [300, 70000]], dtype=np.int32)
    np.testing.assert_array_equal(read_idx(write_idx(tmp_path / "x.idx", values)), values)
    raw = (tmp_path / "x.idx").read_bytes()
    assert raw[2] == 0x0C and raw[-4:] == (70000).to_bytes(4, "big")


def _write_raw(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "not an IDX file (magic bytes empty"),
        (b"PK\x03\x04rest", "not an IDX file (magic bytes 504b0304"),
        (b"\x00\x00\x08\x03\x00\x00", "truncated header"),
        (b"\x00\x00\x08\x01\x00\x00\x00\x05abc", "3 bytes of data, but the header's shape (5,) needs 5"),
    ],
)
def test_idx_errors_are_one_line_naming_the_file(tmp_path: Path, data: bytes, message: str) -> None:
    path = _write_raw(tmp_path / "bad-idx1-ubyte", data)
    with pytest.raises(IdxFormatError) as err:
        read_idx(path)
    text = str(err.value)
    assert message in text and str(path) in text and "\n" not in text


def test_idx_missing_corrupt_gzip_wrong_kind(tmp_path: Path) -> None:
    with pytest.raises(IdxFormatError, match="no such file"):
        read_idx(tmp_path / "absent.gz")
    with pytest.raises(IdxFormatError, match="cannot be read"):
        read_idx(_write_raw(tmp_path / "cut.gz", gzip.compress(b"\x00\x00\x08\x01" + b"\x00" * 40)[:20]))
    labels = write_idx(tmp_path / "labels-idx1-ubyte", np.array([0, 3, 12], dtype=np.uint8))
    with pytest.raises(IdxFormatError, match="expected N x H x W"):
        read_images(labels)
    with pytest.raises(IdxFormatError, match=r"labels range 0..12, expected 0..9"):
        read_labels(labels, 10)
    np.testing.assert_array_equal(read_labels(labels, 13), [0, 3, 12])


# ---- Datasets ------------------------------------------------------------------------------------
def _fake_fashion(root: Path, n_train: int = 60_000) -> Path:
    """The four files with the real sizes (labels only matter to the shape checks)."""
    root.mkdir()
    for split, n in (("train", n_train), ("t10k", 10_000)):
        write_idx(root / f"{split}-images-idx3-ubyte.gz", np.zeros((n, 28, 28), np.uint8))
        write_idx(
            root / f"{split}-labels-idx1-ubyte", np.arange(n, dtype=np.uint8) % 10
        )  # uncompressed works
    return root


def test_fashion_mnist_from_a_folder_and_its_checks(tmp_path: Path) -> None:
    data = load_image_set("fashion_mnist", _fake_fashion(tmp_path / "ok"))
    assert data.train_images.shape == (60_000, 28, 28) and data.test_labels.shape == (10_000,)
    assert data.test_labels[:12].tolist() == [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1]
    small = data.limit(train=300, test=50)
    assert small.train_images.shape == (300, 28, 28) and small.test_labels.shape == (50,)
    with pytest.raises(ConfigError, match=r"train files hold images \(59999, 28, 28\)"):
        load_image_set("fashion_mnist", _fake_fashion(tmp_path / "short", n_train=59_999))


def test_missing_fashion_mnist_names_the_install_command(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        load_image_set("fashion_mnist", tmp_path / "nowhere")
    text = str(err.value)
    assert "`apt-get install dataset-fashion-mnist`" in text and "dataset.path" in text and "\n" not in text
    with pytest.raises(ConfigError, match="known: fashion_mnist, digits"):
        load_image_set("cifar100")


@needs_fashion
def test_real_fashion_mnist_package() -> None:
    data = load_image_set("fashion_mnist")
    assert data.train_images.shape == (60_000, 28, 28) and data.train_images.dtype == np.uint8
    assert data.test_images.shape == (10_000, 28, 28)
    # Fashion-MNIST is balanced: 6,000 train and 1,000 test images per class
    assert np.bincount(data.train_labels).tolist() == [6_000] * 10
    assert np.bincount(data.test_labels).tolist() == [1_000] * 10
    assert data.train_images.max() == 255 and 0.25 < data.train_images.mean() / 255 < 0.32
    # the first test image is an ankle boot (class 9), as in Zalando's README
    assert data.test_labels[0] == 9


def test_digits_fixed_split() -> None:
    a, b = load_image_set("digits"), load_image_set("digits")
    assert a.train_images.shape == (1_437, 8, 8) and a.test_images.shape == (360, 8, 8)
    assert a.train_images.max() == 16
    np.testing.assert_array_equal(a.test_images, b.test_images)
    every = np.concatenate([a.train_labels, a.test_labels])
    assert np.bincount(every).tolist() == [178, 182, 177, 183, 181, 182, 181, 179, 174, 180]
    assert len(set(np.bincount(a.test_labels))) > 1 and np.bincount(a.test_labels).min() >= 20


# ---- Epochs and seeds ----------------------------------------------------------------------------
def _data(n: int = 50) -> tuple[np.ndarray, np.ndarray]:
    images = stream(1, "order").integers(0, 256, size=(n, 6, 6), dtype=np.uint8)
    return images, np.arange(n) % 10


def _fingerprint(plan: EpochPlan, epochs: int = 2) -> str:
    images, labels = _data()
    norm = Normalizer.from_train(images, 255)
    h = hashlib.sha256()
    for epoch in range(epochs):
        for x, y in plan.train_batches(images, labels, epoch, norm):
            h.update(x.tobytes())
            h.update(y.tobytes())
    return h.hexdigest()


def test_batches_shapes_layout_and_normalisation() -> None:
    images, labels = _data()
    norm = Normalizer.from_train(images, 255)
    plan = EpochPlan(seed=3, batch_size=8)
    batches = list(plan.train_batches(images, labels, 0, norm))
    assert len(batches) == plan.steps(50) == 6  # 50 // 8, the partial batch dropped
    x, y = batches[0]
    assert x.shape == (8, 1, 6, 6) and x.dtype == np.float32 and y.shape == (8,)
    nhwc = next(plan.train_batches(images, labels, 0, norm, layout="nhwc"))[0]
    np.testing.assert_array_equal(nhwc[..., 0], x[:, 0])
    everything = norm(images)
    assert abs(everything.mean()) < 1e-5 and abs(everything.std() - 1) < 1e-4
    seen = np.concatenate([yy for _, yy in batches])
    assert len(set(plan.order(0, 50)[:48].tolist())) == 48 and len(seen) == 48
    evals = list(eval_batches(images, labels, 16, norm))
    assert [len(b[1]) for b in evals] == [16, 16, 16, 2]  # every test sample, in order
    np.testing.assert_array_equal(np.concatenate([b[1] for b in evals]), labels)
    with pytest.raises(ConfigError, match="schedule.batch_size=64: needs 1..50"):
        EpochPlan(seed=0, batch_size=64).steps(50)


def test_seed_decides_order_epoch_by_epoch() -> None:
    plan = EpochPlan(seed=5, batch_size=10)
    np.testing.assert_array_equal(plan.order(1, 100), EpochPlan(seed=5, batch_size=99).order(1, 100))
    assert not np.array_equal(plan.order(0, 100), plan.order(1, 100))
    assert not np.array_equal(plan.order(0, 100), EpochPlan(seed=6, batch_size=10).order(0, 100))
    # turning augmentation on changes the pixels, never the order
    np.testing.assert_array_equal(plan.order(0, 100), EpochPlan(5, 10, hflip=True).order(0, 100))
    assert _fingerprint(plan) != _fingerprint(EpochPlan(5, 10, hflip=True))
    flips = EpochPlan(5, 10, hflip=True).flips(0, 1000)
    assert 400 < flips.sum() < 600 and not EpochPlan(5, 10).flips(0, 1000).any()


def test_hflip_mirrors_the_chosen_images() -> None:
    images, labels = _data()
    norm = Normalizer.from_train(images, 255)
    plan = EpochPlan(2, 50, hflip=True)
    x, _ = next(plan.train_batches(images, labels, 0, norm))
    order, flips = plan.order(0, 50), plan.flips(0, 50)
    for i in (int(np.argmax(flips)), int(np.argmin(flips))):
        want = norm(images[order[i]][:, ::-1] if flips[i] else images[order[i]])
        np.testing.assert_array_equal(x[i, 0], want)


FINGERPRINT = """
from dlbench.data.epochs import EpochPlan
from tests.unit.test_accuracy_data import _fingerprint
print("HASH", _fingerprint(EpochPlan(seed=11, batch_size=7, hflip=True), epochs=3))
"""


def test_same_seed_same_batches_in_separate_processes() -> None:
    """Run to run: two fresh interpreters (different hash seeds) produce byte-identical epochs."""
    env = worker_env()
    env["PYTHONPATH"] = f"{Path(__file__).resolve().parents[2]}:{env['PYTHONPATH']}"
    hashes = []
    for hash_seed in ("1", "2"):
        proc = subprocess.run(
            [sys.executable, "-c", FINGERPRINT], capture_output=True, text=True, timeout=120,
            env={**env, "PYTHONHASHSEED": hash_seed},
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-2000:]
        hashes.append(proc.stdout.split("HASH ")[1].strip())
    assert hashes[0] == hashes[1] == _fingerprint(EpochPlan(seed=11, batch_size=7, hflip=True), epochs=3)
    assert hashes[0] != _fingerprint(EpochPlan(seed=12, batch_size=7, hflip=True), epochs=3)


def test_negative_seed_is_refused() -> None:
    with pytest.raises(ValueError, match="non-negative"):
        stream(-1, "order")


# ---- Metric --------------------------------------------------------------------------------------
def test_top1_accuracy() -> None:
    logits = np.array([[0.1, 0.9, 0.0], [2.0, 1.0, 0.0], [0.0, 0.0, 5.0], [1.0, 3.0, 2.0]])
    assert top1_accuracy(logits, np.array([1, 0, 1, 1])) == 0.75
    assert top1_accuracy(logits.astype(np.float16), np.array([1, 0, 2, 1])) == 1.0
    logits[2, 0] = np.nan
    assert math.isnan(top1_accuracy(logits, np.array([1, 0, 2, 1])))  # a NaN model has no accuracy
    logits[2, 0] = np.inf
    assert math.isnan(top1_accuracy(logits, np.array([1, 0, 2, 1])))
    with pytest.raises(ValueError, match=r"logits \(4, 3\) and labels \(3,\)"):
        top1_accuracy(logits, np.array([1, 0, 2]))
