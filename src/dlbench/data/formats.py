"""The on-disk record formats DALI reads, written and read in pure Python (no TensorFlow, no MXNet).

Why by hand: the dataset script and the corrupt-image scan must run in any interpreter, and importing
TensorFlow or MXNet next to another framework is exactly what the worker design avoids. The formats
are small and stable:

* TFRecord: per record `uint64 length, uint32 masked_crc32c(length), data, uint32 masked_crc32c(data)`;
  each record is a serialized `tf.train.Example` (protobuf, encoded here field by field).
  DALI index file: one line `offset size` per record (what DALI's `tfrecord2idx` writes).
* MXNet RecordIO (dmlc): per record `uint32 magic 0xced7230a, uint32 lrecord, data`, padded to 4 bytes;
  `lrecord` = `cflag << 29 | length`; data = IRHeader `(flag u32, label f32, id u64, id2 u64)` + image.
  Index (.idx): one line `id<TAB>offset` per record (what im2rec / DALI's `rec2idx` write).

Also here: a cheap structural check of encoded images, shared by the dataset scan and the tests.
"""

from __future__ import annotations

import io
import os
import struct
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

# ---------------------------------------------------------------------------------------------
# CRC32C (Castagnoli), as TFRecord uses it
# ---------------------------------------------------------------------------------------------


def _crc32c_table() -> list[int]:
    table = []
    for i in range(256):
        crc = i
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_CRC_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
    """CRC32C of `data` (pure Python: ~5 ms per 50 KB JPEG, fine for datasets made by a script)."""
    crc = 0xFFFFFFFF
    table = _CRC_TABLE
    for b in data:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc32c(data: bytes) -> int:
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


# ---------------------------------------------------------------------------------------------
# tf.train.Example protobuf
# ---------------------------------------------------------------------------------------------

Feature = bytes | str | int | float | list


def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1  # negative int64 -> ten-byte two's complement, as protobuf does
    out = bytearray()
    while True:
        bits = n & 0x7F
        n >>= 7
        if n:
            out.append(bits | 0x80)
        else:
            out.append(bits)
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited (wire type 2) field."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _feature(value: Feature) -> bytes:
    values = value if isinstance(value, list) else [value]
    if all(isinstance(v, bytes | str) for v in values):
        items = b"".join(_field(1, v.encode() if isinstance(v, str) else v) for v in values)
        return _field(1, items)  # Feature.bytes_list
    if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return _field(3, _field(1, b"".join(_varint(v) for v in values)))  # int64_list, packed
    if all(isinstance(v, float | int) for v in values):
        return _field(2, _field(1, struct.pack(f"<{len(values)}f", *values)))  # float_list, packed
    raise TypeError(f"unsupported feature value {value!r}")


def encode_example(features: dict[str, Feature]) -> bytes:
    """Serialize a tf.train.Example: bytes/str -> bytes_list, int -> int64_list, float -> float_list."""
    entries = b"".join(_field(1, _field(1, k.encode()) + _field(2, _feature(v))) for k, v in features.items())
    return _field(1, entries)


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def _fields(buf: bytes) -> Iterator[tuple[int, int, bytes | int]]:
    """(field number, wire type, payload) of one protobuf message."""
    pos = 0
    while pos < len(buf):
        key, pos = _read_varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _read_varint(buf, pos)
        elif wire == 2:
            size, pos = _read_varint(buf, pos)
            value, pos = buf[pos : pos + size], pos + size
        elif wire == 5:
            value, pos = buf[pos : pos + 4], pos + 4
        elif wire == 1:
            value, pos = buf[pos : pos + 8], pos + 8
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
        yield number, wire, value


def decode_example(buf: bytes) -> dict[str, list]:
    """Parse a serialized tf.train.Example into {key: [values]} (bytes, ints or floats)."""
    out: dict[str, list] = {}
    for _, _, features in _fields(buf):  # Example.features
        for _, _, entry in _fields(features):  # Features.feature (map entries)
            key, feature = "", b""
            for number, _, value in _fields(entry):
                if number == 1:
                    key = value.decode()
                elif number == 2:
                    feature = value
            out[key] = _decode_feature(feature)
    return out


def _decode_feature(feature: bytes) -> list:
    values: list = []
    for kind, _, lst in _fields(feature):
        for _, wire, v in _fields(lst):
            if kind == 1:
                values.append(v)
            elif kind == 3 and wire == 2:
                pos = 0
                while pos < len(v):
                    n, pos = _read_varint(v, pos)
                    values.append(n - (1 << 64) if n >= 1 << 63 else n)
            elif kind == 3:
                values.append(v - (1 << 64) if v >= 1 << 63 else v)
            elif kind == 2 and wire == 2:
                values.extend(struct.unpack(f"<{len(v) // 4}f", v))
            elif kind == 2:
                values.append(struct.unpack("<f", v)[0])
    return values


# ---------------------------------------------------------------------------------------------
# TFRecord files and DALI index files
# ---------------------------------------------------------------------------------------------


def write_tfrecord(path: str | os.PathLike, records: Iterable[bytes]) -> int:
    """Write records to a TFRecord file (with TF's CRCs, so tf.data reads it too); return the count."""
    n = 0
    with open(path, "wb") as f:
        for data in records:
            length = struct.pack("<Q", len(data))
            f.write(
                length
                + struct.pack("<I", masked_crc32c(length))
                + data
                + struct.pack("<I", masked_crc32c(data))
            )
            n += 1
    return n


def iter_tfrecord(path: str | os.PathLike) -> Iterator[tuple[int, int, bytes]]:
    """(offset, record size on disk, payload) of each record; CRCs are not checked (DALI doesn't)."""
    with open(path, "rb") as f:
        while True:
            offset = f.tell()
            head = f.read(12)
            if not head:
                return
            if len(head) < 12:
                raise ValueError(f"{path}: truncated TFRecord header at byte {offset}")
            (length,) = struct.unpack("<Q", head[:8])
            data = f.read(length)
            crc = f.read(4)
            if len(data) < length or len(crc) < 4:
                raise ValueError(f"{path}: truncated TFRecord record at byte {offset}")
            yield offset, 16 + length, data


def tfrecord_index_lines(path: str | os.PathLike) -> list[tuple[int, int]]:
    """(offset, size) of each record: the content of DALI's index file for this TFRecord file."""
    return [(offset, size) for offset, size, _ in iter_tfrecord(path)]


def write_tfrecord_index(path: str | os.PathLike, index_path: str | os.PathLike) -> int:
    """Write the DALI index of a TFRecord file (same format as DALI's `tfrecord2idx`)."""
    lines = tfrecord_index_lines(path)
    Path(index_path).write_text("".join(f"{o} {s}\n" for o, s in lines))
    return len(lines)


def read_index(index_path: str | os.PathLike) -> list[tuple[int, int]]:
    """The first two integers of each line of an index file: (offset, size) for a TFRecord index,
    (id, offset) for a RecordIO .idx (space- or tab-separated), in file order."""
    out = []
    for line in Path(index_path).read_text().splitlines():
        if line.strip():
            a, b = line.split()[:2]
            out.append((int(a), int(b)))
    return out


# ---------------------------------------------------------------------------------------------
# MXNet RecordIO
# ---------------------------------------------------------------------------------------------

RECORDIO_MAGIC = 0xCED7230A
_MAGIC_BYTES = struct.pack("<I", RECORDIO_MAGIC)
IR_FORMAT = "<IfQQ"  # flag, label, id, id2 (mxnet.recordio.IRHeader)
IR_SIZE = struct.calcsize(IR_FORMAT)


def pack_image_record(label: float, image: bytes, record_id: int = 0) -> bytes:
    """IRHeader + encoded image, as mxnet.recordio.pack(IRHeader(0, label, id, 0), image)."""
    return struct.pack(IR_FORMAT, 0, float(label), record_id, 0) + image


def unpack_image_record(data: bytes) -> tuple[float | list[float], int, bytes]:
    """(label, id, image bytes) of an image record; multi-label headers give a list of labels."""
    flag, label, record_id, _ = struct.unpack(IR_FORMAT, data[:IR_SIZE])
    body = data[IR_SIZE:]
    if flag > 0:
        labels = list(struct.unpack(f"<{flag}f", body[: 4 * flag]))
        return labels, record_id, body[4 * flag :]
    return label, record_id, body


class RecordIOWriter:
    """dmlc RecordIOWriter in Python: escapes the magic word inside data exactly as dmlc does."""

    def __init__(self, path: str | os.PathLike) -> None:
        self._f = open(path, "wb")  # noqa: SIM115 - closed in close()

    def write(self, data: bytes) -> int:
        """Append one record; return its byte offset (the value the .idx file stores)."""
        f = self._f
        offset = f.tell()
        n = len(data)
        start = 0
        # A magic word at a 4-byte aligned position would be taken for a record start: split there.
        for i in range(0, (n >> 2) << 2, 4):
            if data[i : i + 4] == _MAGIC_BYTES:
                cflag = 1 if start == 0 else 2
                f.write(_MAGIC_BYTES + struct.pack("<I", cflag << 29 | (i - start)) + data[start:i])
                start = i + 4
        cflag = 3 if start else 0
        f.write(_MAGIC_BYTES + struct.pack("<I", cflag << 29 | (n - start)) + data[start:])
        f.write(b"\0" * (-(n - start) % 4))
        return offset

    def close(self) -> None:
        self._f.close()

    def __enter__(self) -> RecordIOWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def iter_recordio(path: str | os.PathLike) -> Iterator[tuple[int, bytes]]:
    """(offset, data) of each logical record, reassembling records dmlc split around magic words."""
    with open(path, "rb") as f:
        parts: list[bytes] = []
        offset = 0
        while True:
            pos = f.tell()
            head = f.read(8)
            if not head:
                return
            magic, lrec = struct.unpack("<II", head)
            if magic != RECORDIO_MAGIC:
                raise ValueError(f"{path}: bad RecordIO magic at byte {pos}")
            cflag, length = lrec >> 29, lrec & ((1 << 29) - 1)
            chunk = f.read(length)
            f.read(-length % 4)
            if cflag in (0, 1):
                offset, parts = pos, [chunk]
            else:
                parts.append(chunk)
            if cflag in (0, 3):
                yield offset, _MAGIC_BYTES.join(parts)


def write_recordio_index(path: str | os.PathLike, index_path: str | os.PathLike) -> int:
    """Write the .idx of a RecordIO file (record id from its IRHeader, tab, byte offset)."""
    lines = [f"{unpack_image_record(d)[1]}\t{o}\n" for o, d in iter_recordio(path)]
    Path(index_path).write_text("".join(lines))
    return len(lines)


# ---------------------------------------------------------------------------------------------
# Encoded-image checks
# ---------------------------------------------------------------------------------------------

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp", ".jp2", ".pnm", ".ppm", ".pgm")
_TAIL = 4096


def _check(f: io.BufferedIOBase, size: int, full: bool) -> str | None:
    from PIL import Image  # lazy: only the scans need Pillow

    if size < 16:
        return f"too short ({size} bytes)"
    f.seek(max(0, size - _TAIL))
    tail = f.read()
    f.seek(0)
    try:
        with Image.open(f) as im:
            fmt = im.format
            # Entropy-coded JPEG data cannot contain FFD9, so a file cut short has no end-of-image marker.
            if fmt == "JPEG" and b"\xff\xd9" not in tail:
                return "truncated JPEG (no end-of-image marker)"
            if fmt == "PNG" and b"IEND" not in tail:
                return "truncated PNG (no IEND chunk)"
            if full:
                im.load()
    except Image.UnidentifiedImageError:
        return "not an image (unknown format)"
    except Exception as exc:  # PIL raises many types for bad data; all mean "not decodable"
        return f"not a decodable image ({type(exc).__name__}: {exc})"
    return None


def image_problem(data: bytes, full: bool = False) -> str | None:
    """Why these encoded image bytes cannot be decoded, or None. `full` decodes all pixels (slow);
    the default checks headers and the end marker, which catches truncated and non-image files."""
    return _check(io.BytesIO(data), len(data), full)


def image_file_problem(path: str | os.PathLike, full: bool = False) -> str | None:
    """image_problem for a file, reading only its header and its last 4 KB unless `full`."""
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            return _check(f, size, full)
    except OSError as exc:
        return f"unreadable ({exc.strerror or exc})"


def scan_image_files(paths: list[str], full: bool = False, threads: int = 8) -> dict[str, str]:
    """{path: problem} for the files that would fail to decode (parallel: the scan is I/O bound)."""
    with ThreadPoolExecutor(max_workers=max(1, threads)) as pool:
        problems = pool.map(lambda p: image_file_problem(p, full), paths, chunksize=64)
        return {p: why for p, why in zip(paths, problems, strict=True) if why}


# ---------------------------------------------------------------------------------------------
# `python -m dlbench.data.formats index PATH`: the index files DALI needs
# ---------------------------------------------------------------------------------------------


def write_indexes(path: str | os.PathLike) -> list[str]:
    """Write `<file>.idx` for every TFRecord file and `<name>.idx` for every .rec under `path`
    that lacks one; return the index files written."""
    root = Path(path)
    written = []
    for p in [root] if root.is_file() else sorted(root.iterdir()):
        if (
            not p.is_file()
            or p.name.startswith(".")
            or p.suffix == ".idx"
            or p.suffix.lower() in IMAGE_EXTENSIONS
        ):
            continue
        with open(p, "rb") as f:
            head = f.read(8)
        if len(head) < 8:
            continue
        if p.suffix == ".rec" and struct.unpack("<I", head[:4])[0] == RECORDIO_MAGIC:
            idx = p.with_suffix(".idx")
            if not idx.exists():
                write_recordio_index(p, idx)
                written.append(str(idx))
        elif 0 < struct.unpack("<Q", head)[0] <= p.stat().st_size - 16:
            idx = p.with_name(p.name + ".idx")
            if not idx.exists():
                write_tfrecord_index(p, idx)
                written.append(str(idx))
    return written


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m dlbench.data.formats", description=write_indexes.__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    index = sub.add_parser("index", help="write missing DALI index files for TFRecord / RecordIO data")
    index.add_argument("path")
    args = parser.parse_args(argv)
    written = write_indexes(args.path)
    print(f"wrote {len(written)} index files under {args.path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
