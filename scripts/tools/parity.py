"""Are the frameworks running the same network? Parameter counts and forward FLOPs per model.

Each installed framework is asked in its own process (frameworks must not share one: triton, shipped
with torch, segfaults when loaded after TensorFlow), through its backend's `model_stats`, which counts
with the framework's own tools. Parameters must be equal; FLOPs (conv + dense, a multiply-add = 2)
within 2%. Exit code 1 when not.

Usage: python scripts/tools/parity.py [--models resnet50,vgg16,resnet_cifar,ncf,ssd300,transformer,small_cnn] [--frameworks torch,tf,mxnet]
       [--image-size N]   (image models; default: each model's own size from conf/model)
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))

from dlbench.backends.base import BACKENDS  # noqa: E402

TOLERANCE = 0.02
PROBE = """
import json, sys
from dlbench.backends.base import load_backend
from dlbench.config import JobConfig
backend = load_backend(sys.argv[1])
out = {}
for spec in json.loads(sys.argv[2]):
    stats = backend.model_stats(JobConfig.from_dict({"model": spec}).model)  # the family's schema
    out[spec["name"]] = {"params": stats["params"], "gflops": stats["gflops"]}
print("PARITY " + json.dumps(out))
"""


def model_spec(name: str, image_size: int | None) -> dict:
    spec = yaml.safe_load((ROOT / "conf" / "model" / f"{name}.yaml").read_text())
    spec.pop("defaults", None)
    if image_size and "image_size" in spec:
        spec["image_size"] = image_size
    return spec


def ask(framework: str, specs: list[dict]) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    res = subprocess.run(
        [sys.executable, "-c", PROBE, framework, json.dumps(specs)], capture_output=True, text=True, env=env
    )
    for line in res.stdout.splitlines():
        if line.startswith("PARITY "):
            return json.loads(line.removeprefix("PARITY "))
    raise RuntimeError(f"{framework}: model_stats failed:\n{res.stderr[-2000:]}")


def check(table: dict[str, dict[str, dict]], models: list[str]) -> list[str]:
    problems = []
    for model in models:
        rows = {fw: r[model] for fw, r in table.items()}
        params = {r["params"] for r in rows.values()}
        if len(params) > 1:
            problems.append(f"{model}: parameter counts differ: {rows}")
        flops = [r["gflops"] for r in rows.values()]
        if max(flops) > (1 + TOLERANCE) * min(flops):
            problems.append(f"{model}: FLOPs differ by more than {TOLERANCE:.0%}: {rows}")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--models", default="resnet50,vgg16,resnet_cifar,ncf,ssd300,small_cnn")
    parser.add_argument("--frameworks", default=",".join(BACKENDS))
    parser.add_argument("--image-size", type=int, default=None)
    args = parser.parse_args()
    models = args.models.split(",")
    specs = [model_spec(m, args.image_size) for m in models]
    table = {}
    for fw in args.frameworks.split(","):
        if importlib.util.find_spec(BACKENDS[fw][1]) is None:
            print(f"{fw}: not installed, skipped")
            continue
        table[fw] = ask(fw, specs)
    print(
        f"{'model':<14}{'input':>10}" + "".join(f"{fw + ' params':>18}{fw + ' GFLOPs':>14}" for fw in table)
    )
    for model, spec in zip(models, specs, strict=True):
        cells = "".join(
            f"{table[fw][model]['params']:>18,}{table[fw][model]['gflops']:>14.6g}" for fw in table
        )
        size = (
            f"{spec['image_size']}px"
            if "image_size" in spec
            else f"len {spec['max_len']}"
            if "max_len" in spec
            else "ids"
        )
        print(f"{model:<14}{size:>10}" + cells)
    problems = check(table, models)
    for p in problems:
        print("MISMATCH " + p)
    print("parity: OK" if not problems else f"parity: {len(problems)} mismatch(es)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
