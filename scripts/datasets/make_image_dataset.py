#!/usr/bin/env python
"""Write a small ImageNet-like JPEG dataset in the three layouts dlbench reads (no TF, no MXNet needed).

    python scripts/datasets/make_image_dataset.py --out /tmp/imgs --classes 10 --per-class 30 --seed 0

OUT/folder/<class>/<n>.jpg              ImageNet folder layout (labels = sorted class names)
OUT/tfrecord/train-0000i-of-0000k(.idx) TFRecord of tf.train.Example as TF's ImageNet converter
                                        writes it (image/class/label 1-based) + DALI index files
OUT/recordio/train.rec, train.idx       MXNet RecordIO as im2rec writes it (label 0-based)

Why synthetic but natural-looking: real JPEG decode cost depends on size and content (smooth areas,
edges, noise), so the images are 300-500 px with varied aspect ratios, gradients, shapes and sensor-
like noise, at quality 90. Deterministic for a given --seed. `--corrupt N` adds N truncated JPEGs
(to every layout) for the skip_corrupt tests.
"""

from __future__ import annotations

import argparse
import functools
import io
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
from dlbench.data.formats import (  # noqa: E402
    RecordIOWriter,
    encode_example,
    pack_image_record,
    write_tfrecord,
    write_tfrecord_index,
)


def make_image(seed: int, cls: int, classes: int, min_size: int, max_size: int, quality: int) -> bytes:
    """One JPEG: a class-tinted gradient, class-typed shapes, blur and noise; same seed, same bytes."""
    rng = np.random.default_rng(seed)
    w = int(rng.integers(min_size, max_size + 1))
    h = int(np.clip(w / rng.uniform(0.75, 1.333), min_size * 0.75, max_size * 1.25))
    hue = (cls / classes + rng.normal(0, 0.03)) % 1.0
    base = np.array(
        Image.new("HSV", (1, 1), (int(hue * 255), 160, 200)).convert("RGB").getpixel((0, 0)), float
    )
    other = rng.uniform(0, 255, 3)
    angle = rng.uniform(0, 2 * np.pi)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    t = (np.cos(angle) * xx / w + np.sin(angle) * yy / h + 1) / 2
    img = (base[None, None] * (1 - t[..., None]) + other[None, None] * t[..., None]).astype(np.uint8)
    pil = Image.fromarray(img)
    draw = ImageDraw.Draw(pil)
    kind = cls % 3
    for _ in range(int(rng.integers(2, 6))):
        x0, y0 = rng.uniform(0, w * 0.8), rng.uniform(0, h * 0.8)
        s = rng.uniform(0.1, 0.45) * min(w, h)
        color = tuple(int(c) for c in rng.integers(0, 256, 3))
        if kind == 0:
            draw.ellipse([x0, y0, x0 + s, y0 + s * rng.uniform(0.6, 1.4)], fill=color)
        elif kind == 1:
            draw.rectangle([x0, y0, x0 + s, y0 + s * rng.uniform(0.5, 1.5)], fill=color)
        else:
            pts = [(x0 + rng.uniform(0, s), y0 + rng.uniform(0, s)) for _ in range(int(rng.integers(3, 7)))]
            draw.polygon(pts, fill=color)
    pil = pil.filter(ImageFilter.GaussianBlur(rng.uniform(0.5, 2.0)))
    arr = np.asarray(pil, np.float32) + rng.normal(0, rng.uniform(2, 8), (h, w, 3))
    out = io.BytesIO()
    Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8)).save(out, "JPEG", quality=quality)
    return out.getvalue()


def _make(args: argparse.Namespace, job: tuple[int, int]) -> bytes:
    i, c = job
    seed = args.seed * 1_000_003 + c * 10_007 + i
    return make_image(seed, c, args.classes, args.min_size, args.max_size, args.quality)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--per-class", type=int, default=20)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--min-size", type=int, default=300, help="shortest width in px (default 300)")
    p.add_argument("--max-size", type=int, default=500, help="longest width in px (default 500)")
    p.add_argument("--quality", type=int, default=90)
    p.add_argument("--shards", type=int, default=2, help="TFRecord files (default 2)")
    p.add_argument("--corrupt", type=int, default=0, help="also write N truncated JPEGs (tests)")
    p.add_argument("--formats", default="folder,tfrecord,recordio", help="comma-separated subset")
    p.add_argument("--workers", type=int, default=None, help="processes making images (default: all cores)")
    args = p.parse_args(argv)
    formats = set(args.formats.split(","))
    t0 = time.perf_counter()
    names = [f"c{i:03d}" for i in range(args.classes)]
    # (class, file name, bytes), interleaved by class so unshuffled readers still see every label
    jobs = [(i, c) for i in range(args.per_class) for c in range(args.classes)]
    make = functools.partial(_make, args)
    if args.workers == 1:
        images = [make(job) for job in jobs]
    else:
        with ProcessPoolExecutor(max_workers=args.workers) as pool:  # ~40 ms an image: use every core
            images = list(pool.map(make, jobs, chunksize=max(1, len(jobs) // (8 * (args.workers or 8)))))
    samples: list[tuple[int, str, bytes]] = [
        (c, f"{names[c]}_{i:05d}.jpg", data) for (i, c), data in zip(jobs, images, strict=True)
    ]
    for k in range(args.corrupt):
        c, _, data = samples[k % len(samples)]
        samples.append((c, f"corrupt_{k:03d}.jpg", data[: len(data) * 2 // 5]))

    if "folder" in formats:
        for c, name, data in samples:
            d = args.out / "folder" / names[c]
            d.mkdir(parents=True, exist_ok=True)
            (d / name).write_bytes(data)
    if "tfrecord" in formats:
        d = args.out / "tfrecord"
        d.mkdir(parents=True, exist_ok=True)
        shards = max(1, min(args.shards, len(samples)))
        for s in range(shards):
            path = d / f"train-{s:05d}-of-{shards:05d}"
            part = samples[s::shards]
            write_tfrecord(path, (_example(c, names[c], name, data) for c, name, data in part))
            write_tfrecord_index(path, path.with_name(path.name + ".idx"))
    if "recordio" in formats:
        d = args.out / "recordio"
        d.mkdir(parents=True, exist_ok=True)
        lines = []
        with RecordIOWriter(d / "train.rec") as rec:
            for i, (c, _, data) in enumerate(samples):
                lines.append(f"{i}\t{rec.write(pack_image_record(c, data, i))}\n")
        (d / "train.idx").write_text("".join(lines))
    total = sum(len(s[2]) for s in samples)
    print(
        f"make_image_dataset: {len(samples)} JPEGs ({args.classes} classes x {args.per_class}"
        f"{f', {args.corrupt} corrupt' if args.corrupt else ''}), {total / 2**20:.1f} MiB, "
        f"layouts {','.join(sorted(formats))} under {args.out} in {time.perf_counter() - t0:.1f}s"
    )
    return 0


def _example(cls: int, synset: str, name: str, data: bytes) -> bytes:
    with Image.open(io.BytesIO(data)) as im:
        w, h = im.size
    return encode_example(
        {
            "image/height": h,
            "image/width": w,
            "image/colorspace": "RGB",
            "image/channels": 3,
            "image/class/label": cls + 1,  # TF's ImageNet converter: 1..1000, 0 = background
            "image/class/synset": synset,
            "image/class/text": synset,
            "image/format": "JPEG",
            "image/filename": name,
            "image/encoded": data,
        }
    )


if __name__ == "__main__":
    raise SystemExit(main())
