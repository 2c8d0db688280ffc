"""The COCO 2017 layout on disk, checked before a worker builds anything (pure Python, no DALI).

    ROOT/train2017/*.jpg   ROOT/val2017/*.jpg
    ROOT/annotations/instances_train2017.json   ROOT/annotations/instances_val2017.json

Every way the set can be unusable becomes one `ConfigError` line naming the problem and the fix: no
annotations file, a file that is not COCO JSON, an image folder missing, annotations pointing at image
files that do not exist. Corrupt images are found by the same header/end-marker scan the classification
pipelines use (dlbench.data.formats); `without_images` writes a copy of the annotations without them,
which is how DALI's COCO reader is made to skip them (data.skip_corrupt=true). Boxes are checked too,
before anything trains (DALI's reader takes any numbers, and a negative width becomes a NaN regression
target): a box of zero or negative size, one outside its image, an unknown category or image id is one
line naming the file, the image and the box, or with data.skip_bad_boxes=true is left out and counted.

Labels: DALI's COCO reader numbers the categories 1..N in ascending category id (0 is background),
as DLE's COCODetection does; `category_ids()[label - 1]` maps a label back for pycocotools.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from dlbench.data import formats
from dlbench.errors import ConfigError

SPLITS = {"train": "train2017", "val": "val2017"}
MAKE_HINT = (
    "create a small set with `python scripts/datasets/make_coco_dataset.py --out DIR` "
    "(the set of +experiment=accuracy_ssd: `make coco-easy`)"
)


@dataclass
class CocoSplit:
    """One split of a COCO-layout set: where the images and the annotations are, and what they hold."""

    root: str
    name: str  # train2017 / val2017
    images_dir: str
    annotations_file: str
    data: dict = field(repr=False)
    skipped_boxes: int = 0  # bad boxes left out of `data` (data.skip_bad_boxes=true)

    @property
    def num_images(self) -> int:
        return len(self.data["images"])

    @property
    def annotated_images(self) -> int:
        """Images with at least one box (DALI's reader with skip_empty=True reads only these)."""
        return len({a["image_id"] for a in self.data["annotations"]})

    def category_ids(self) -> list[int]:
        return sorted(c["id"] for c in self.data["categories"])

    def image_paths(self) -> list[str]:
        return [os.path.join(self.images_dir, im["file_name"]) for im in self.data["images"]]


def _load_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"COCO annotations {path} cannot be read ({exc}); replace the file") from None
    missing = [
        k for k in ("images", "annotations", "categories") if not isinstance(data, dict) or k not in data
    ]
    if missing:
        raise ConfigError(
            f"COCO annotations {path} has no {'/'.join(missing)} section: not a COCO instances file; replace it"
        )
    return data


EDGE_SLACK = 1.0  # pixels a box may reach past its image's edge (COCO's float boxes round outward)


def box_problem(box: object, image: dict | None, categories: set[int], category: object) -> str | None:
    """Why one annotation's box cannot train (None when it can): shape, size, place, category."""
    if image is None:
        return "its image_id is not among the file's images"
    if not isinstance(category, int) or category not in categories:
        return f"category_id {category} is not among the file's categories"
    if not (isinstance(box, list) and len(box) == 4 and all(isinstance(v, (int, float)) for v in box)):
        return "bbox is not four numbers [x, y, width, height]"
    x, y, w, h = box
    if w <= 0 or h <= 0:
        return f"{'width' if w <= 0 else 'height'} {w if w <= 0 else h:g} is not positive"
    width, height = image.get("width", 0), image.get("height", 0)
    if x < -EDGE_SLACK or y < -EDGE_SLACK or x + w > width + EDGE_SLACK or y + h > height + EDGE_SLACK:
        return f"it reaches outside the {width}x{height} image"
    return None


def check_boxes(coco: CocoSplit, skip: bool) -> CocoSplit:
    """The split with every box checked (box_problem): the first bad one raises ConfigError naming the
    file, image and box, unless `skip`, which leaves the bad boxes out of `data` and counts them."""
    images = {im["id"]: im for im in coco.data["images"]}
    categories = {c["id"] for c in coco.data["categories"]}
    bad: list[tuple[dict, str]] = []
    for a in coco.data["annotations"]:
        why = box_problem(a.get("bbox"), images.get(a.get("image_id")), categories, a.get("category_id"))
        if why is not None:
            bad.append((a, why))
    if not bad:
        return coco
    if not skip:
        a, why = bad[0]
        image = images.get(a.get("image_id"), {})
        more = f" ({len(bad) - 1} more bad boxes)" if len(bad) > 1 else ""
        raise ConfigError(
            f"COCO annotations {coco.annotations_file}: image {image.get('file_name', '?')} (id "
            f"{a.get('image_id')}), annotation {a.get('id', '?')} bbox {a.get('bbox')}: {why}{more}; fix "
            "or remove it, or set data.skip_bad_boxes=true to leave such boxes out (counted)"
        )
    drop = {id(a) for a, _ in bad}
    data = {**coco.data, "annotations": [a for a in coco.data["annotations"] if id(a) not in drop]}
    return CocoSplit(coco.root, coco.name, coco.images_dir, coco.annotations_file, data, len(bad))


def resolve_split(root: str | os.PathLike, split: str, skip_bad_boxes: bool = False) -> CocoSplit:
    """The split ('train' or 'val') of the COCO set at root, checked (layout, JSON, image files, boxes:
    check_boxes). Raises ConfigError (one line)."""
    base = Path(root)
    folder = SPLITS[split]
    ann = base / "annotations" / f"instances_{folder}.json"
    if not base.is_dir():
        raise ConfigError(
            f"COCO dataset {base} is not a folder; point dataset.path at the folder that holds {folder}/"
        )
    if not ann.is_file():
        raise ConfigError(f"COCO dataset {base}: no annotations/instances_{folder}.json; {MAKE_HINT}")
    images_dir = base / folder
    if not images_dir.is_dir():
        raise ConfigError(f"COCO dataset {base}: no {folder}/ image folder beside annotations/; {MAKE_HINT}")
    coco = CocoSplit(str(base), folder, str(images_dir), str(ann), _load_json(ann))
    if coco.num_images == 0:
        raise ConfigError(f"COCO annotations {ann} lists no images; {MAKE_HINT}")
    coco = check_boxes(coco, skip_bad_boxes)
    absent = [p for p in coco.image_paths() if not os.path.isfile(p)]
    if absent:
        more = f" (and {len(absent) - 1} more)" if len(absent) > 1 else ""
        raise ConfigError(
            f"COCO annotations {ann} name image {absent[0]}, which does not exist{more}; "
            "restore the images or remove them from the annotations"
        )
    if split == "train" and coco.annotated_images == 0:
        raise ConfigError(f"COCO annotations {ann} have no boxes: nothing to train on; {MAKE_HINT}")
    return coco


def corrupt_images(coco: CocoSplit, full: bool = False, threads: int = 8) -> dict[str, str]:
    """{image path: why} for the split's images that would not decode."""
    return formats.scan_image_files(coco.image_paths(), full=full, threads=threads)


def without_images(coco: CocoSplit, drop: set[str], out_dir: str | os.PathLike) -> CocoSplit:
    """A copy of the split whose annotations leave out the image paths in `drop` (and their boxes)."""
    keep = [im for im in coco.data["images"] if os.path.join(coco.images_dir, im["file_name"]) not in drop]
    ids = {im["id"] for im in keep}
    data = {
        **coco.data,
        "images": keep,
        "annotations": [a for a in coco.data["annotations"] if a["image_id"] in ids],
    }
    path = Path(out_dir) / f"instances_{coco.name}.json"
    path.write_text(json.dumps(data))
    return CocoSplit(coco.root, coco.name, coco.images_dir, str(path), data, coco.skipped_boxes)
