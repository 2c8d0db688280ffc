#!/usr/bin/env python
"""Write a small COCO-format detection set: JPEG scenes with objects pasted at known boxes.

    python scripts/datasets/make_coco_dataset.py --out /tmp/coco --train 64 --val 16 --seed 0

OUT/train2017/<id>.jpg, OUT/val2017/<id>.jpg
OUT/annotations/instances_train2017.json, instances_val2017.json   (COCO "instances" format)

Why: `dataset=coco2017` and the detection accuracy mode need a set that DALI's COCO reader and
pycocotools read exactly as they read COCO 2017, small enough for a CPU test, and learnable, so mAP can
rise above zero in minutes. Objects are Fashion-MNIST items (the Debian package dataset-fashion-mnist,
/usr/share/datasets/fashion-mnist; train images for train2017, test images for val2017), tinted and
scaled, pasted on textured backgrounds; without that package (or with --objects shapes), ten kinds of
generated shapes. Each
object's box is the tight box of its visible mask, so the ground truth is exact. Category ids have gaps
(1, 3, 5, ...) as COCO's do, so a reader that forgets to map ids to contiguous labels is caught.
Deterministic for a given --seed.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

FASHION_DIR = Path("/usr/share/datasets/fashion-mnist")
FASHION_NAMES = (
    "t-shirt", "trouser", "pullover", "dress", "coat", "sandal", "shirt", "sneaker", "bag", "ankle boot",
)  # fmt: skip
SHAPE_NAMES = (
    "disc", "square", "triangle", "diamond", "ring", "cross", "bar", "pillar", "star", "half-disc",
)  # fmt: skip
SPLITS = (("train", "train2017"), ("val", "val2017"))


def category_id(cls: int) -> int:
    return 2 * cls + 1


def load_fashion(split: str) -> tuple[np.ndarray, np.ndarray] | None:
    """Fashion-MNIST images (n, 28, 28) uint8 and labels, or None when the package is absent."""
    prefix = "train" if split == "train" else "t10k"
    images, labels = (
        FASHION_DIR / f"{prefix}-images-idx3-ubyte.gz",
        FASHION_DIR / f"{prefix}-labels-idx1-ubyte.gz",
    )
    if not (images.is_file() and labels.is_file()):
        return None
    with gzip.open(images) as f:
        x = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 28, 28)
    with gzip.open(labels) as f:
        y = np.frombuffer(f.read(), np.uint8, offset=8)
    return x, y


def shape_mask(cls: int, rng: np.random.Generator, size: int = 64) -> np.ndarray:
    """A generated object of kind `cls` as a 0..255 mask (the fallback for Fashion-MNIST)."""
    img = Image.new("L", (size, size), 0)
    d = ImageDraw.Draw(img)
    m, s = 4, size - 4
    c = size / 2
    shade = int(rng.integers(170, 256))
    if cls == 0:
        d.ellipse([m, m, s, s], fill=shade)
    elif cls == 1:
        d.rectangle([m, m, s, s], fill=shade)
    elif cls == 2:
        d.polygon([(c, m), (s, s), (m, s)], fill=shade)
    elif cls == 3:
        d.polygon([(c, m), (s, c), (c, s), (m, c)], fill=shade)
    elif cls == 4:
        d.ellipse([m, m, s, s], outline=shade, width=size // 6)
    elif cls == 5:
        d.rectangle([c - size / 8, m, c + size / 8, s], fill=shade)
        d.rectangle([m, c - size / 8, s, c + size / 8], fill=shade)
    elif cls == 6:
        d.rectangle([m, c - size / 6, s, c + size / 6], fill=shade)
    elif cls == 7:
        d.rectangle([c - size / 6, m, c + size / 6, s], fill=shade)
    elif cls == 8:
        ang = np.pi / 2 + np.arange(10) * np.pi / 5
        r = np.where(np.arange(10) % 2 == 0, c - m, (c - m) * 0.45)
        d.polygon(
            [(c + ri * np.cos(a), c - ri * np.sin(a)) for ri, a in zip(r, ang, strict=True)], fill=shade
        )
    else:
        d.pieslice([m, m, s, s], 180, 360, fill=shade)
    return np.asarray(img)


def background(rng: np.random.Generator, w: int, h: int, plain: bool = False) -> np.ndarray:
    """A textured scene: a two-colour gradient, a few soft blobs and sensor-like noise; or (plain) one
    flat colour, the easy scene of a set meant to be learnt in CPU minutes."""
    if plain:
        return np.broadcast_to(rng.uniform(40, 220, 3), (h, w, 3)).astype(np.float32)
    a, b = rng.uniform(40, 220, 3), rng.uniform(40, 220, 3)
    angle = rng.uniform(0, 2 * np.pi)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    t = ((np.cos(angle) * xx / w + np.sin(angle) * yy / h) + 1) / 2
    img = Image.fromarray((a * (1 - t[..., None]) + b * t[..., None]).astype(np.uint8))
    draw = ImageDraw.Draw(img)
    for _ in range(int(rng.integers(3, 8))):
        x0, y0 = rng.uniform(-0.2, 1.0) * w, rng.uniform(-0.2, 1.0) * h
        r = rng.uniform(0.1, 0.4) * min(w, h)
        draw.ellipse(
            [x0, y0, x0 + r, y0 + r * rng.uniform(0.5, 1.5)],
            fill=tuple(int(v) for v in rng.integers(0, 256, 3)),
        )
    img = img.filter(ImageFilter.GaussianBlur(radius=float(rng.uniform(4, 12))))
    noisy = np.asarray(img, np.float32) + rng.normal(0, 6, (h, w, 3))
    return np.clip(noisy, 0, 255)


def _overlaps(box: tuple[int, int, int, int], boxes: list[tuple[int, int, int, int]], limit: float) -> bool:
    x0, y0, x1, y1 = box
    for u0, v0, u1, v1 in boxes:
        iw, ih = min(x1, u1) - max(x0, u0), min(y1, v1) - max(y0, v0)
        if iw > 0 and ih > 0 and iw * ih / min((x1 - x0) * (y1 - y0), (u1 - u0) * (v1 - v0)) > limit:
            return True
    return False


@dataclass(frozen=True)
class SceneStyle:
    """How hard the scenes are: objects per image, which kinds, how large, what behind them."""

    max_objects: int = 4
    classes: int = 10  # the first N kinds only
    min_size: float = 0.15  # object side as a fraction of the scene's shorter side
    max_size: float = 0.55
    plain: bool = False  # flat-colour backgrounds instead of textured ones


def make_scene(
    rng: np.random.Generator, source: tuple[np.ndarray, np.ndarray] | None, style: SceneStyle
) -> tuple[Image.Image, list[tuple[int, list[float]]]]:
    """One scene and its objects as (class, [x, y, w, h]) with the tight box of each pasted mask."""
    w = int(rng.integers(320, 481))
    h = int(np.clip(w / rng.uniform(0.75, 1.333), 240, 520))
    img = np.array(background(rng, w, h, style.plain))
    placed: list[tuple[int, int, int, int]] = []
    objects: list[tuple[int, list[float]]] = []
    for _ in range(int(rng.integers(1, style.max_objects + 1))):
        if source is not None:
            k = int(rng.integers(len(source[1])))
            mask, cls = source[0][k], int(source[1][k])
        else:
            cls = int(rng.integers(style.classes))
            mask = shape_mask(cls, rng)
        side = rng.uniform(style.min_size, style.max_size) * min(w, h)
        ow, oh = (max(8, int(side * f)) for f in (rng.uniform(0.8, 1.25), rng.uniform(0.8, 1.25)))
        for _attempt in range(10):
            x, y = int(rng.integers(0, w - ow + 1)), int(rng.integers(0, h - oh + 1))
            if not _overlaps((x, y, x + ow, y + oh), placed, 0.3):
                break
        else:
            continue
        alpha = np.asarray(Image.fromarray(mask).resize((ow, oh), Image.BILINEAR), np.float32) / 255.0
        ys, xs = np.nonzero(alpha > 0.15)
        if len(xs) == 0:
            continue
        colour = rng.uniform(0, 255, 3)
        shaded = colour * (0.55 + 0.45 * alpha[..., None])
        a = np.clip(alpha * 2.0, 0, 1)[..., None]
        region = img[y : y + oh, x : x + ow]
        img[y : y + oh, x : x + ow] = region * (1 - a) + shaded * a
        placed.append((x, y, x + ow, y + oh))
        bx0, by0, bx1, by1 = x + xs.min(), y + ys.min(), x + xs.max() + 1, y + ys.max() + 1
        objects.append((cls, [float(bx0), float(by0), float(bx1 - bx0), float(by1 - by0)]))
    return Image.fromarray(img.astype(np.uint8)), objects


def write_split(
    root: Path,
    split: str,
    folder: str,
    count: int,
    seed: int,
    style: SceneStyle,
    first_image_id: int,
    objects: str,
) -> dict:
    source = load_fashion(split) if objects != "shapes" else None
    if objects == "fashion" and source is None:
        raise SystemExit(
            f"--objects fashion: no Fashion-MNIST in {FASHION_DIR} (apt-get install dataset-fashion-mnist)"
        )
    if source is not None:
        keep = source[1] < style.classes
        source = (source[0][keep], source[1][keep])
    names = (FASHION_NAMES if source is not None else SHAPE_NAMES)[: style.classes]
    (root / folder).mkdir(parents=True, exist_ok=True)
    images, annotations = [], []
    for i in range(count):
        rng = np.random.default_rng([seed, 0 if split == "train" else 1, i])
        scene, objects = make_scene(rng, source, style)
        image_id = first_image_id + i
        name = f"{image_id:012d}.jpg"
        scene.save(root / folder / name, quality=90)
        images.append({"id": image_id, "file_name": name, "width": scene.width, "height": scene.height})
        for cls, (x, y, bw, bh) in objects:
            annotations.append(
                {
                    "id": len(annotations) + 1,
                    "image_id": image_id,
                    "category_id": category_id(cls),
                    "bbox": [x, y, bw, bh],
                    "area": bw * bh,
                    "iscrowd": 0,
                    "segmentation": [[x, y, x + bw, y, x + bw, y + bh, x, y + bh]],
                }
            )
    categories = [{"id": category_id(c), "name": n, "supercategory": "object"} for c, n in enumerate(names)]
    data = {
        "info": {
            "description": f"dlbench synthetic COCO-format set ({'fashion-mnist' if source is not None else 'shapes'})"
        },
        "images": images,
        "annotations": annotations,
        "categories": categories,
    }
    (root / "annotations").mkdir(parents=True, exist_ok=True)
    (root / "annotations" / f"instances_{folder}.json").write_text(json.dumps(data))
    return data


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--train", type=int, default=64, help="training images")
    ap.add_argument("--val", type=int, default=16, help="validation images")
    ap.add_argument("--max-objects", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--classes", type=int, default=10, help="object kinds: the first N of the ten")
    ap.add_argument(
        "--object-size", type=float, nargs=2, default=(0.15, 0.55), metavar=("MIN", "MAX"),
        help="object side as a fraction of the scene's shorter side",
    )  # fmt: skip
    ap.add_argument("--plain", action="store_true", help="flat-colour backgrounds (an easier set)")
    ap.add_argument(
        "--objects", choices=("auto", "fashion", "shapes"), default="auto",
        help="pasted objects: Fashion-MNIST items, generated shapes, or Fashion-MNIST when installed (auto)",
    )  # fmt: skip
    args = ap.parse_args(argv)
    lo, hi = args.object_size
    if args.train < 1 or args.val < 0 or args.max_objects < 1 or not 1 <= args.classes <= 10:
        ap.error("--train must be >= 1, --val >= 0, --max-objects >= 1, --classes 1..10")
    if not 0.02 <= lo <= hi <= 1.0:
        ap.error("--object-size MIN MAX: 0.02 <= MIN <= MAX <= 1")
    style = SceneStyle(args.max_objects, args.classes, lo, hi, args.plain)
    counts = {"train": args.train, "val": args.val}
    for n, (split, folder) in enumerate(SPLITS):
        data = write_split(
            args.out,
            split,
            folder,
            counts[split],
            args.seed,
            style,
            1 + n * 1_000_000,
            args.objects,
        )
        print(f"{args.out / folder}: {len(data['images'])} images, {len(data['annotations'])} objects")
    return 0


if __name__ == "__main__":
    sys.exit(main())
