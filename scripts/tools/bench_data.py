"""DALI loader throughput, and per framework training throughput on synthetic vs DALI-fed JPEGs.

Makes (or reuses) an ImageNet-layout JPEG set, then runs one sweep through the real CLI:
`mode=data` (the loader alone), and framework x {synthetic, imagenet} at the same shapes; prints a
table from the sweep's MLflow runs. A figure, not a test: numbers depend on the machine.

Usage: python scripts/tools/bench_data.py [--images DIR] [--frameworks torch,tf,mxnet] [overrides ...]
Defaults (CPU-sized): the CIFAR ResNet-20 at 64x64, batch 32, 3 warm-up steps, 5 windows of 5 steps.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))

from dlbench.tracking.store import open_store  # noqa: E402

SHAPES = ["model=resnet_cifar", "model.depth=20", "model.image_size=64", "schedule.batch_size=32",
          "schedule.warmup_steps=3", "schedule.steps_per_window=5", "schedule.windows=5"]  # fmt: skip


def sweep(tmp: Path, name: str, overrides: list[str]) -> list:
    uri = f"sqlite:///{tmp / 'mlflow.db'}"
    cmd = [sys.executable, str(ROOT / "src" / "run.py"), "-m", *overrides, f"tracking.uri={uri}",
           f"tracking.experiment={name}", f"hydra.sweep.dir={tmp / name}", "report.enabled=false"]  # fmt: skip
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if res.returncode != 0:
        print(f"bench_data: sweep {name} had failures:\n{res.stderr[-2000:]}", file=sys.stderr)
    client, exp = open_store(uri, name)
    return [r for r in client.search_runs([exp]) if r.data.tags.get("dlbench.kind") == "job"]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--images", type=Path, help="an ImageNet-layout folder; default: make 640 JPEGs")
    p.add_argument("--frameworks", default="torch,tf,mxnet")
    p.add_argument("overrides", nargs="*")
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        images = a.images
        if images is None:
            subprocess.run([sys.executable, str(ROOT / "scripts" / "make_image_dataset.py"), "--out", str(tmp / "img"),
                            "--classes", "10", "--per-class", "64", "--formats", "folder"], check=True)  # fmt: skip
            images = tmp / "img" / "folder"
        data = [f"dataset.path={images}", *SHAPES, *a.overrides]
        loader = sweep(tmp, "loader", ["mode=data", "dataset=imagenet", *data])
        for run in loader:
            m = run.data.metrics
            print(f"DALI loader alone ({run.data.tags.get('device')}): {m.get('throughput', 0):,.1f} samples/s "
                  f"(p5 {m.get('throughput_p05', 0):,.1f}, p95 {m.get('throughput_p95', 0):,.1f})")  # fmt: skip
        runs = sweep(tmp, "training", [f"framework={a.frameworks}", "dataset=synthetic,imagenet", *data])
        table: dict[str, dict[str, object]] = {}
        for run in runs:
            m, fw = run.data.metrics, run.data.params["framework.name"]
            cell = (
                f"{m['throughput']:,.1f}"
                if run.info.status == "FINISHED"
                else run.data.tags.get("failure", "failed")
            )
            table.setdefault(fw, {})[run.data.params["dataset.name"]] = cell
            if run.data.params["dataset.name"] == "imagenet" and "data_wait_frac" in m:
                table[fw]["wait"] = f"{100 * m['data_wait_frac']:.1f}%"
        print(
            f"{'framework':<10}{'synthetic':>12}{'DALI JPEG':>12}{'data wait':>11}   (samples/s; {' '.join(SHAPES[:4])})"
        )
        for fw, row in sorted(table.items()):
            print(
                f"{fw:<10}{row.get('synthetic', '–'):>12}{row.get('imagenet', '–'):>12}{row.get('wait', '–'):>11}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
