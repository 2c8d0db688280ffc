"""Are the frameworks running the same network? Parameter counts and forward FLOPs per model.

Each installed framework is asked in its own process, under the interpreter its worker uses (JAX: its own
environment, .venv-jax, unless this interpreter imports jax) (frameworks must not share one: triton, shipped
with torch, segfaults when loaded after TensorFlow), through its backend's `model_stats`, which counts
with the framework's own tools. Parameters must be equal; FLOPs (conv + dense, a multiply-add = 2)
within 2%. Exit code 1 when not.

Usage: python scripts/tools/parity.py [--models resnet50,vgg16,resnet_cifar,ncf,ssd300,transformer,small_cnn] [--frameworks torch,tf,mxnet,jax]
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
from dlbench.backends.interpreter import worker_python  # noqa: E402
from dlbench.config import FRAMEWORK_CONFIGS  # noqa: E402
from dlbench.errors import ConfigError  # noqa: E402

TOLERANCE = 0.02
PROBE = """
import json, sys
from dlbench.backends.base import load_backend
from dlbench.config import JobConfig
from dlbench.errors import BackendUnavailable
backend = load_backend(sys.argv[1])
out = {}
for spec in json.loads(sys.argv[2]):
    try:
        stats = backend.model_stats(JobConfig.from_dict({"model": spec}).model)  # the family's schema
    except BackendUnavailable:  # this framework has no such workload yet
        out[spec["name"]] = None
        continue
    out[spec["name"]] = {"params": stats["params"], "gflops": stats["gflops"]}
print("PARITY " + json.dumps(out))
"""


def model_spec(name: str, image_size: int | None) -> dict:
    spec = yaml.safe_load((ROOT / "conf" / "model" / f"{name}.yaml").read_text())
    spec.pop("defaults", None)
    if image_size and "image_size" in spec:
        spec["image_size"] = image_size
    return spec


def interpreter(framework: str) -> str | None:
    """The interpreter that runs `framework`'s worker, or None (said in one line) where there is none."""
    try:
        python = worker_python(FRAMEWORK_CONFIGS[framework]())
    except ConfigError as exc:
        print(f"{framework}: skipped ({exc})")
        return None
    if python == sys.executable and importlib.util.find_spec(BACKENDS[framework][1]) is None:
        print(f"{framework}: not installed, skipped")
        return None
    return python


def ask(framework: str, specs: list[dict], python: str = sys.executable) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    res = subprocess.run(
        [python, "-c", PROBE, framework, json.dumps(specs)], capture_output=True, text=True, env=env
    )
    for line in res.stdout.splitlines():
        if line.startswith("PARITY "):
            return json.loads(line.removeprefix("PARITY "))
    raise RuntimeError(f"{framework}: model_stats failed:\n{res.stderr[-2000:]}")


def check(table: dict[str, dict[str, dict]], models: list[str]) -> list[str]:
    problems = []
    for model in models:
        rows = {fw: r[model] for fw, r in table.items() if r.get(model)}  # frameworks that have it
        if not rows:
            continue
        params = {r["params"] for r in rows.values()}
        if len(params) > 1:
            problems.append(f"{model}: parameter counts differ: {rows}")
        flops = [r["gflops"] for r in rows.values()]
        if max(flops) > (1 + TOLERANCE) * min(flops):
            problems.append(f"{model}: FLOPs differ by more than {TOLERANCE:.0%}: {rows}")
    return problems


def _cells(row: dict | None) -> str:
    return f"{row['params']:>18,}{row['gflops']:>14.6g}" if row else f"{'not yet':>18}{'-':>14}"


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
        python = interpreter(fw)
        if python is not None:
            table[fw] = ask(fw, specs, python)
    print(
        f"{'model':<14}{'input':>10}" + "".join(f"{fw + ' params':>18}{fw + ' GFLOPs':>14}" for fw in table)
    )
    for model, spec in zip(models, specs, strict=True):
        cells = "".join(_cells(table[fw].get(model)) for fw in table)
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
