"""DALI pipelines for image classification, built from a JobConfig (framework-neutral).

One builder serves every framework: the caller (a backend's dali_source, or the `mode=data` bench)
says where the batch must land (`device_id`: a GPU index, or None for a CPU-only pipeline), which
layout its model wants ("NHWC" for torch channels_last and TF, "NCHW" for MXNet and torch on CPU) and
in which float type (`dtype`: the precision plan's input_dtype, dlbench.core.precision; float16 or
float32, DALI has no bfloat16). `crop_mirror_normalize` writes that layout and dtype directly, so no
framework ever transposes or casts a batch.

Train: random-resized crop (fused into the decoder, so libjpeg-turbo / nvJPEG decode only the ROI),
resize to model.image_size, random horizontal flip, ImageNet mean/std normalization.
Infer: decode, resize the shorter side to image_size / 0.875, center crop, normalize (the standard
ImageNet evaluation transform). `mode=data` uses the train pipeline: it is what training waits for.

Decode placement (`data.decode`): `auto` decodes on the GPU (`device="mixed"`: nvJPEG, with the A100/
H100/H200 hardware JPEG decoder taking `hw_decoder_load` of the work) whenever the pipeline has a GPU,
else on the CPU; `gpu` insists on it; `cpu` decodes on the CPU and, when there is a GPU, moves the
decoded image there for resize and normalization.

Corrupt images (`data.skip_corrupt`): DALI's decoder cannot skip a sample, so with skip_corrupt=true
the selected samples are scanned first (formats.image_problem: headers, and the end marker that a
truncated file lacks) and the bad ones are left out of the reader's file list, or out of a filtered
copy of the TFRecord / RecordIO index, so every format is covered; `ImagePipeline.skipped` counts them.
With skip_corrupt=false a decode failure is re-raised as `CorruptImageError` naming the file (DALI's
message names it for truncated JPEGs but not for every failure, so the selection is scanned then).
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import tempfile
from pathlib import Path

import nvidia.dali.fn as fn
import nvidia.dali.tfrecord as tfrec
import nvidia.dali.types as types
from nvidia.dali.pipeline import Pipeline

from dlbench.config import JobConfig
from dlbench.data import formats
from dlbench.data.validate import CorruptImageError, DatasetLayout, resolve_layout
from dlbench.errors import ConfigError

log = logging.getLogger("dlbench.data")

MEAN = [0.485 * 255, 0.456 * 255, 0.406 * 255]
STD = [0.229 * 255, 0.224 * 255, 0.225 * 255]
CROP_FRACTION = 0.875  # eval: resize the shorter side to size / 0.875, then center-crop size
LAYOUTS = ("NHWC", "NCHW")
_DALI_DTYPES = {"float32": types.FLOAT, "float16": types.FLOAT16}
_LABEL_DTYPES = {"int32": types.INT32, "int64": types.INT64, "float32": types.FLOAT}
# Number of scan threads: the scan is I/O and PIL header parsing, both release the GIL.
SCAN_THREADS = min(16, (os.cpu_count() or 2) * 2)


def decode_device(job: JobConfig, device_id: int | None) -> str:
    """'mixed' (GPU decode) or 'cpu' for data.decode and whether the pipeline has a GPU."""
    choice = job.data.decode
    if choice == "gpu" and device_id is None:
        raise ConfigError(
            "data.decode=gpu but this job has no GPU (device=cpu or none found); use data.decode=auto or cpu"
        )
    if choice == "cpu" or device_id is None:
        return "cpu"
    return "mixed"


class ImagePipeline:
    """A built DALI pipeline plus what a source needs around it: skipped count, error explanation."""

    def __init__(
        self,
        job: JobConfig,
        device_id: int | None,
        layout: str = "NHWC",
        dtype: str = "float32",
        label_dtype: str = "int32",
        batch_size: int | None = None,
        build: bool = True,
    ) -> None:
        if layout not in LAYOUTS:
            raise ValueError(f"layout={layout!r}: use one of {LAYOUTS}")
        self.job = job
        self.device_id = device_id
        self.layout = layout
        if dtype not in _DALI_DTYPES:
            raise ValueError(f"dtype={dtype!r}: a DALI pipeline emits one of {sorted(_DALI_DTYPES)}")
        self.dtype = dtype
        self.label_dtype = label_dtype
        self.batch_size = batch_size or job.batch_size
        self.decode = decode_device(job, device_id)
        self.train = job.mode != "infer"
        self.dataset: DatasetLayout = resolve_layout(job)
        self._tmp = tempfile.mkdtemp(prefix="dlbench-dali-")
        self.skipped = 0
        self.problems: dict[str, str] = {}
        try:
            self._select()
            self.pipe = self._build(build)
        except BaseException:
            self.close()
            raise

    # ---- which samples ----------------------------------------------------------------------
    def _select(self) -> None:
        """Apply dataset.num_samples and data.skip_corrupt; fill the reader arguments."""
        d, n_wanted = self.dataset, self.job.dataset.num_samples
        skip = self.job.data.skip_corrupt
        if d.format == "folder":
            items = _spread(list(zip(d.files, d.labels, strict=True)), n_wanted)
            if skip:
                self.problems = formats.scan_image_files([f for f, _ in items], threads=SCAN_THREADS)
                items = [(f, lab) for f, lab in items if f not in self.problems]
            self.files = [f for f, _ in items]
            self.labels = [lab for _, lab in items]
            self.indexes: list[str] = []
            kept = len(items)
        elif d.format == "tfrecord":
            entries = [
                (f, o, s) for f, i in zip(d.files, d.indexes, strict=True) for o, s in formats.read_index(i)
            ]
            chosen = _spread(entries, n_wanted)
            if skip:
                chosen = self._drop_corrupt_tfrecord(chosen)
            self.files, self.indexes = self._tfrecord_indexes(chosen, len(entries))
            kept = len(chosen)
        else:
            (rec,), (idx,) = d.files, d.indexes
            entries = formats.read_index(idx)
            chosen = _spread(entries, n_wanted)
            if skip:
                offsets = {o for _, o in chosen}
                bad = {
                    o: why
                    for o, data in formats.iter_recordio(rec)
                    if o in offsets and (why := _record_problem(data))
                }
                self.problems = {f"{rec} record at byte {o}": why for o, why in bad.items()}
                chosen = [e for e in chosen if e[1] not in bad]
            self.files = [rec]
            self.indexes = [idx] if len(chosen) == len(entries) else [self._write_rec_index(chosen)]
            kept = len(chosen)
        self.skipped = len(self.problems)
        for where, why in list(self.problems.items())[:5]:
            log.warning("skipping corrupt image %s: %s", where, why)
        if kept == 0:
            raise ConfigError(
                f"dataset {d.root}: no decodable images left after skipping {self.skipped} corrupt ones"
            )
        self.num_samples = kept

    def _drop_corrupt_tfrecord(self, chosen: list[tuple[str, int, int]]) -> list[tuple[str, int, int]]:
        wanted = {(f, o) for f, o, _ in chosen}
        for f in dict.fromkeys(f for f, _, _ in chosen):
            for offset, _, data in formats.iter_tfrecord(f):
                if (f, offset) in wanted:
                    example = formats.decode_example(data)
                    image = (example.get("image/encoded") or [b""])[0]
                    why = formats.image_problem(image) if image else "no image/encoded feature"
                    if why:
                        name = (example.get("image/filename") or [b"?"])[0]
                        self.problems[f"{f} record at byte {offset} ({name.decode(errors='replace')})"] = why
                        wanted.discard((f, offset))
        return [e for e in chosen if (e[0], e[1]) in wanted]

    def _tfrecord_indexes(
        self, chosen: list[tuple[str, int, int]], total: int
    ) -> tuple[list[str], list[str]]:
        """TFRecord files and their index files; filtered copies of the indexes when samples were left out."""
        d = self.dataset
        if len(chosen) == total:
            return list(d.files), list(d.indexes)
        per_file: dict[str, list[tuple[int, int]]] = {}
        for f, o, s in chosen:
            per_file.setdefault(f, []).append((o, s))
        files, indexes = [], []
        for i, f in enumerate(d.files):
            if f in per_file:
                path = Path(self._tmp) / f"{i:05d}.idx"
                path.write_text("".join(f"{o} {s}\n" for o, s in per_file[f]))
                files.append(f)
                indexes.append(str(path))
        return files, indexes

    def _write_rec_index(self, chosen: list[tuple[int, int]]) -> str:
        path = Path(self._tmp) / "selected.idx"
        path.write_text("".join(f"{k}\t{o}\n" for k, o in chosen))
        return str(path)

    # ---- the graph ----------------------------------------------------------------------------
    def _reader(self):
        d = self.job.data
        common = dict(
            shard_id=d.shard_id,
            num_shards=d.num_shards,
            random_shuffle=d.shuffle,
            initial_fill=max(self.batch_size, min(1024, self.num_samples)),
            name="Reader",
        )
        fmt = self.dataset.format
        if fmt == "folder":
            # A list file, not files=/labels= arguments: a serialized pipeline (DALIDataset ships
            # one to TensorFlow) would otherwise carry every path of the dataset.
            listing = Path(self._tmp) / "files.txt"
            root = self.dataset.root
            listing.write_text(
                "".join(
                    f"{os.path.relpath(f, root)} {lab}\n"
                    for f, lab in zip(self.files, self.labels, strict=True)
                )
            )
            return fn.readers.file(file_root=root, file_list=str(listing), **common)
        if fmt == "tfrecord":
            inputs = fn.readers.tfrecord(
                path=self.files,
                index_path=self.indexes,
                features={
                    "image/encoded": tfrec.FixedLenFeature((), tfrec.string, ""),
                    "image/class/label": tfrec.FixedLenFeature([1], tfrec.int64, -1),
                },
                **common,
            )
            return inputs["image/encoded"], inputs["image/class/label"] - 1  # TF ImageNet labels are 1-based
        return fn.readers.mxnet(path=self.files, index_path=self.indexes, **common)

    def _build(self, build: bool) -> Pipeline:
        job, size = self.job, self.job.model.image_size
        pipe = Pipeline(
            batch_size=self.batch_size,
            num_threads=job.data.num_threads,
            device_id=self.device_id,
            seed=job.data.seed,
            prefetch_queue_depth=job.data.prefetch,
        )
        with pipe:
            jpegs, labels = self._reader()
            if self.train:
                images = fn.decoders.image_random_crop(
                    jpegs,
                    device=self.decode,
                    output_type=types.RGB,
                    random_area=[0.08, 1.0],
                    random_aspect_ratio=[0.75, 4.0 / 3.0],
                    num_attempts=100,
                )
            else:
                images = fn.decoders.image(jpegs, device=self.decode, output_type=types.RGB)
            if self.device_id is not None and self.decode == "cpu":
                images = images.gpu()  # decode on the CPU, augment on the GPU
            if self.train:
                images = fn.resize(
                    images, resize_x=size, resize_y=size, interp_type=types.INTERP_LINEAR, antialias=False
                )
                mirror = fn.random.coin_flip(probability=0.5)
                crop = None
            else:
                images = fn.resize(
                    images, resize_shorter=int(size / CROP_FRACTION + 0.5), interp_type=types.INTERP_LINEAR
                )
                mirror, crop = 0, (size, size)
            images = fn.crop_mirror_normalize(
                images,
                dtype=_DALI_DTYPES[self.dtype],
                output_layout=self.layout[1:],  # per-sample layout; the batch adds N
                crop=crop,
                mean=MEAN,
                std=STD,
                mirror=mirror,
            )
            labels = fn.reshape(fn.cast(labels, dtype=_LABEL_DTYPES[self.label_dtype]), shape=[])
            if self.device_id is not None:
                labels = labels.gpu()
            pipe.set_outputs(images, labels)
        if build:  # DALIDataset builds its own copy from the serialized graph: no need here
            pipe.build()
        return pipe

    # ---- errors and cleanup -------------------------------------------------------------------
    def explain(self, exc: BaseException) -> CorruptImageError | None:
        """For a pipeline failure caused by an undecodable image: an error naming the image."""
        text = str(exc)
        if "decoders.image" not in text and "decode" not in text.lower():
            return None
        fix = "remove or replace it, or set data.skip_corrupt=true to skip undecodable images"
        named = re.search(r"Failed to decode sample #\d+ : (.+?)\s*$", text, re.MULTILINE)
        if named and self.dataset.format == "folder":
            # DALI names the file relative to file_root
            path = os.path.join(self.dataset.root, named.group(1).strip())
            why = formats.image_file_problem(path, full=True) or "DALI could not decode it"
            return CorruptImageError(f"corrupt image {path}: {why}; {fix}")
        problems = self.find_corrupt()
        if problems:
            where, why = next(iter(problems.items()))
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            return CorruptImageError(f"corrupt image {where}: {why}{more}; {fix}")
        first = next(
            (line for line in text.splitlines() if "decode" in line.lower()),
            text.splitlines()[0] if text else "",
        )
        return CorruptImageError(
            f"an image in {self.dataset.root} could not be decoded ({first.strip()}); {fix}"
        )

    def find_corrupt(self) -> dict[str, str]:
        """Scan the selected samples for undecodable images (slow on a big dataset: failure path only)."""
        if self.dataset.format == "folder":
            return formats.scan_image_files(self.files, full=True, threads=SCAN_THREADS)
        out: dict[str, str] = {}
        if self.dataset.format == "tfrecord":
            for f in self.files:
                for offset, _, data in formats.iter_tfrecord(f):
                    example = formats.decode_example(data)
                    image = (example.get("image/encoded") or [b""])[0]
                    why = formats.image_problem(image, full=True) if image else "no image/encoded feature"
                    if why:
                        out[f"{f} record at byte {offset}"] = why
            return out
        for offset, data in formats.iter_recordio(self.files[0]):
            if why := _record_problem(data, full=True):
                out[f"{self.files[0]} record at byte {offset}"] = why
        return out

    def close(self) -> None:
        shutil.rmtree(self._tmp, ignore_errors=True)
        pipe = self.__dict__.pop("pipe", None)
        del pipe  # DALI frees its threads and buffers when the last reference goes


def _record_problem(data: bytes, full: bool = False) -> str | None:
    _, _, image = formats.unpack_image_record(data)
    return formats.image_problem(image, full=full)


def _spread(items: list, n: int | None) -> list:
    """n items evenly spread over the list (so a subset still covers every class), or all."""
    if not n or n >= len(items):
        return items
    return [items[i * len(items) // n] for i in range(n)]


def cuda_device_count() -> int:
    """GPUs DALI can use (0 on a machine without a CUDA driver)."""
    try:
        from nvidia.dali.backend import GetCUDADeviceCount

        return int(GetCUDADeviceCount())
    except Exception:  # no driver: DALI raises rather than returning 0
        return 0
