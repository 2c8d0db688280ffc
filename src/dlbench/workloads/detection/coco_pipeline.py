"""The DALI pipeline for SSD on COCO: DLE's SSD300 input pipeline, framework-neutral.

Train (as DLE's ssd/coco_pipeline.py): COCO reader (ltrb boxes as fractions of the image, images
without boxes skipped) -> SSD random IoU crop (`fn.random_bbox_crop`: thresholds 0..0.9, scale 0.3..1,
aspect 0.5..2, or no crop) fused into the decoder -> horizontal flip of image and boxes -> resize to 300
-> colour twist (HSV hue/saturation, brightness/contrast) -> normalise -> `fn.box_encoder` against the
same 8,732 default boxes the numpy encoder uses, with `offset=True` and the DLE variances, so the targets
are the offsets the loss compares (identical to dlbench.workloads.detection.boxes.encode, which a test checks).

Eval: decode, resize to 300, normalise; outputs the COCO image ids for pycocotools, every image once
per epoch (the last batch padded by repeating, which the caller trims).

Outputs per sample: image (3, 300, 300) or (300, 300, 3) in the requested layout and float type,
loc (4, 8732) float32 offsets, labels (8732,) int32 (train); image and image id (eval). With
device_id=None everything runs on the CPU (tests); with a GPU, colour twist and normalisation run there.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import weakref

import nvidia.dali.fn as fn
import nvidia.dali.types as types
from nvidia.dali.pipeline import Pipeline

from dlbench.config import JobConfig
from dlbench.data import formats
from dlbench.data.pipelines import LAYOUTS, MEAN, STD, decode_device
from dlbench.data.validate import CorruptImageError, resolve_path
from dlbench.workloads.detection import coco as coco_layout
from dlbench.workloads.detection.boxes import IOU_CRITERIA, DefaultBoxes, default_boxes_for

_DALI_DTYPES = {"float32": types.FLOAT, "float16": types.FLOAT16}
SKIP_FIX = "remove or replace it, or set data.skip_corrupt=true to skip undecodable images"


def encode_boxes(boxes, labels, dboxes: DefaultBoxes) -> tuple:
    """DALI graph: ltrb boxes + labels -> loc offsets (4, anchors) float32 and labels (anchors,) int32,
    the same targets as ssd_boxes.encode (DALI's raw output is xywh; offset=True applies the variances)."""
    loc, labels = fn.box_encoder(
        boxes, labels, anchors=dboxes.ltrb.flatten().tolist(), criteria=IOU_CRITERIA,
        offset=True, stds=dboxes.variances,
    )  # fmt: skip
    return fn.transpose(loc, perm=[1, 0]), fn.cast(labels, dtype=types.INT32)


class CocoPipeline:
    """A built DALI COCO pipeline plus what a source needs around it: sizes, skipped images, errors."""

    def __init__(
        self,
        root: str,
        batch_size: int,
        dboxes: DefaultBoxes,
        *,
        train: bool = True,
        device_id: int | None = None,
        layout: str = "NCHW",
        dtype: str = "float32",
        num_threads: int = 2,
        seed: int = 0,
        shard_id: int = 0,
        num_shards: int = 1,
        prefetch: int = 2,
        skip_corrupt: bool = False,
        skip_bad_boxes: bool = False,
        decode: str = "cpu",
    ) -> None:
        if layout not in LAYOUTS:
            raise ValueError(f"layout={layout!r}: use one of {LAYOUTS}")
        self.coco = coco_layout.resolve_split(root, "train" if train else "val", skip_bad_boxes)
        self.train, self.batch_size, self.dboxes = train, batch_size, dboxes
        self.device_id, self.layout, self.dtype, self.decode = device_id, layout, dtype, decode
        self._tmp: str | None = None
        bad = coco_layout.corrupt_images(self.coco) if skip_corrupt else []
        self.skipped = len(bad)
        if bad or self.coco.skipped_boxes:  # DALI reads a file: what is kept gets one of its own
            self.coco = coco_layout.without_images(self.coco, set(bad), self._scratch())
        reader = dict(shard_id=shard_id, num_shards=num_shards, seed=seed)
        self.pipe = Pipeline(
            batch_size=batch_size,
            num_threads=num_threads,
            device_id=device_id,
            seed=seed,
            prefetch_queue_depth=prefetch,
        )
        with self.pipe:
            self.pipe.set_outputs(*(self._train_graph(reader) if train else self._eval_graph(reader)))
        self.pipe.build()

    @classmethod
    def from_job(cls, job: JobConfig, device_id: int | None, layout: str, dtype: str) -> CocoPipeline:
        """The pipeline a job asks for: dataset.path, model.image_size's default boxes, data.* knobs;
        the train graph unless mode=infer (which reads the held-out split)."""
        d = job.data
        return cls(
            resolve_path(job), job.batch_size, default_boxes_for(job.model.image_size),
            train=job.mode != "infer", device_id=device_id, layout=layout, dtype=dtype,
            num_threads=d.num_threads, seed=d.seed, shard_id=d.shard_id, num_shards=d.num_shards,
            prefetch=d.prefetch, skip_corrupt=d.skip_corrupt, skip_bad_boxes=d.skip_bad_boxes,
            decode=decode_device(job, device_id),
        )  # fmt: skip

    @property
    def num_samples(self) -> int:
        """Images per epoch (the reader's count: skip_empty leaves out images without boxes in train)."""
        return int(self.pipe.epoch_size("Reader"))

    def _to_gpu(self, x):
        """A CPU node moved to the pipeline's GPU (a no-op in a CPU-only pipeline)."""
        return x.gpu() if self.device_id is not None else x

    def _images_to_gpu(self, images):
        """Decoded on the CPU, the images move to the GPU for colour and normalisation; nvJPEG's are there."""
        return self._to_gpu(images) if self.decode == "cpu" else images

    def _normalize(self, images):
        size = self.dboxes.fig_size
        return fn.crop_mirror_normalize(
            images, crop=(size, size), mean=MEAN, std=STD, mirror=0,
            dtype=_DALI_DTYPES[self.dtype], output_layout=self.layout[1:],
        )  # fmt: skip

    def _train_graph(self, reader: dict) -> tuple:
        c = self.coco
        jpegs, boxes, labels = fn.readers.coco(
            file_root=c.images_dir, annotations_file=c.annotations_file, ltrb=True, ratio=True,
            skip_empty=True, shuffle_after_epoch=True, name="Reader", **reader,
        )  # fmt: skip
        crop_begin, crop_size, boxes, labels = fn.random_bbox_crop(
            boxes, labels, aspect_ratio=[0.5, 2.0], thresholds=[0, 0.1, 0.3, 0.5, 0.7, 0.9],
            scaling=[0.3, 1.0], bbox_layout="xyXY", allow_no_crop=True, num_attempts=1,
        )  # fmt: skip
        images = fn.decoders.image_slice(
            jpegs, crop_begin, crop_size, device=self.decode, output_type=types.RGB
        )
        flip = fn.random.coin_flip(probability=0.5)
        images = fn.flip(images, horizontal=flip)
        boxes = fn.bb_flip(boxes, ltrb=True, horizontal=flip)
        size = self.dboxes.fig_size
        images = self._images_to_gpu(fn.resize(images, resize_x=size, resize_y=size))
        # float between the two colour steps: no clipping or rounding in between (as DLE)
        images = fn.hsv(
            images, hue=fn.random.uniform(range=[-0.5, 0.5]), saturation=fn.random.uniform(range=[0.5, 1.5]),
            dtype=types.FLOAT,
        )  # fmt: skip
        images = fn.brightness_contrast(
            images, brightness=fn.random.uniform(range=[0.875, 1.125]), contrast=fn.random.uniform(range=[0.5, 1.5]),
            contrast_center=128, dtype=types.UINT8,
        )  # fmt: skip
        loc, labels = encode_boxes(boxes, labels, self.dboxes)
        return self._normalize(images), self._to_gpu(loc), self._to_gpu(labels)

    def _eval_graph(self, reader: dict) -> tuple:
        c = self.coco
        jpegs, _, _, ids = fn.readers.coco(
            file_root=c.images_dir, annotations_file=c.annotations_file, ltrb=True, ratio=True,
            skip_empty=False, image_ids=True, random_shuffle=False, pad_last_batch=True, name="Reader", **reader,
        )  # fmt: skip
        images = fn.decoders.image(jpegs, device=self.decode, output_type=types.RGB)
        size = self.dboxes.fig_size
        images = self._images_to_gpu(fn.resize(images, resize_x=size, resize_y=size))
        return self._normalize(images), fn.reshape(ids, shape=[])

    def run(self):
        """One batch of DALI outputs; a decode failure becomes one CorruptImageError line naming the image."""
        try:
            return self.pipe.run()
        except RuntimeError as exc:
            if (err := self.explain(exc)) is not None:
                raise err from None
            raise

    def explain(self, exc: BaseException) -> CorruptImageError | None:
        """For a failure caused by an undecodable image: one line naming it (else None: not ours)."""
        text = str(exc)
        if "decode" not in text.lower():
            return None
        named = re.search(r"Failed to decode sample #\d+ : (.+?)\s*$", text, re.MULTILINE)
        if named:
            path = os.path.join(self.coco.images_dir, named.group(1).strip())  # DALI names it relative
            why = formats.image_file_problem(path, full=True) or "DALI could not decode it"
            return CorruptImageError(f"corrupt image {path}: {why}; {SKIP_FIX}")
        problems = coco_layout.corrupt_images(self.coco, full=True)  # slow: the failure path only
        if problems:
            where, why = next(iter(problems.items()))
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            return CorruptImageError(f"corrupt image {where}: {why}{more}; {SKIP_FIX}")
        return None

    def _scratch(self) -> str:
        """A private folder for the rewritten annotations file, made only when one is needed and removed
        on close, when the pipeline is collected or when the interpreter exits (weakref.finalize), so no
        run, test or interrupted worker leaves one behind."""
        if self._tmp is None:
            self._tmp = tempfile.mkdtemp(prefix="dlbench-coco-")
            self._remove_tmp = weakref.finalize(self, shutil.rmtree, self._tmp, ignore_errors=True)
        return self._tmp

    def close(self) -> None:
        if self._tmp is not None:
            self._remove_tmp()
        pipe = self.__dict__.pop("pipe", None)
        del pipe
