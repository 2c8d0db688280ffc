"""The IDX file format (LeCun's MNIST format, also Fashion-MNIST's), read with numpy alone.

An IDX file is: two zero bytes, a type code (0x08 = unsigned byte, ...), the number of dimensions,
one big-endian uint32 per dimension, then the values, big-endian, row-major. Files may be gzipped
(`.gz`), as Debian's `dataset-fashion-mnist` ships them.

The project reads them itself (no torchvision/keras dataset helper) so every framework is fed the same
arrays by the same code. Every way a file can be wrong (missing, not IDX, truncated, wrong shape)
raises `IdxFormatError` with one line naming the file and the problem.
"""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import numpy as np

from dlbench.errors import ConfigError

# type code -> numpy dtype (big-endian where it matters), as the format's definition lists them
DTYPES: dict[int, np.dtype] = {
    0x08: np.dtype(np.uint8),
    0x09: np.dtype(np.int8),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}


class IdxFormatError(ConfigError):
    """An IDX file that cannot be used; the message is one line naming the file and what is wrong."""


def _raw_bytes(path: Path) -> bytes:
    if not path.is_file():
        raise IdxFormatError(f"{path}: no such file")
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rb") as f:
                return f.read()
        return path.read_bytes()
    except (OSError, EOFError) as exc:  # gzip raises BadGzipFile (an OSError) or EOFError when cut short
        raise IdxFormatError(f"{path}: cannot be read ({exc})") from None


def read_idx(path: str | Path) -> np.ndarray:
    """The array an IDX file holds, in native byte order."""
    path = Path(path)
    raw = _raw_bytes(path)
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] not in DTYPES:
        head = raw[:4].hex() or "empty"
        raise IdxFormatError(f"{path}: not an IDX file (magic bytes {head}, expected 0000 + type + ndim)")
    dtype, ndim = DTYPES[raw[2]], raw[3]
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise IdxFormatError(f"{path}: truncated header ({len(raw)} bytes, {ndim} dimensions announced)")
    dims = struct.unpack(f">{ndim}I", raw[4:header])
    expected = int(np.prod(dims, dtype=np.int64)) * dtype.itemsize
    if len(raw) - header != expected:
        raise IdxFormatError(
            f"{path}: {len(raw) - header} bytes of data, but the header's shape {dims} needs {expected}"
        )
    return np.frombuffer(raw, dtype=dtype, offset=header).reshape(dims).astype(dtype.newbyteorder("="))


def read_images(path: str | Path) -> np.ndarray:
    """N x H x W uint8 images (an idx3-ubyte file)."""
    images = read_idx(path)
    if images.ndim != 3 or images.dtype != np.uint8:
        raise IdxFormatError(
            f"{path}: expected N x H x W unsigned bytes (idx3-ubyte), found shape {images.shape} "
            f"of {images.dtype}"
        )
    return images


def read_labels(path: str | Path, num_classes: int) -> np.ndarray:
    """N int64 class labels in [0, num_classes) (an idx1-ubyte file)."""
    labels = read_idx(path)
    if labels.ndim != 1:
        raise IdxFormatError(f"{path}: expected one label per sample (idx1), found shape {labels.shape}")
    if labels.size and (labels.min() < 0 or labels.max() >= num_classes):
        raise IdxFormatError(
            f"{path}: labels range {labels.min()}..{labels.max()}, expected 0..{num_classes - 1}"
        )
    return labels.astype(np.int64)


def write_idx(path: str | Path, array: np.ndarray) -> Path:
    """Write `array` as IDX (gzipped when the name ends in .gz): test fixtures and small subsets."""
    path = Path(path)
    codes = {dt.newbyteorder("="): code for code, dt in DTYPES.items()}
    code = codes.get(array.dtype.newbyteorder("="))
    if code is None:
        raise ValueError(f"IDX has no type code for {array.dtype}")
    header = bytes([0, 0, code, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    data = header + np.ascontiguousarray(array, dtype=DTYPES[code]).tobytes()
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "wb") as f:
        f.write(data)
    return path
