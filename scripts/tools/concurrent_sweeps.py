"""Start N sweeps at the same instant on one new MLflow store and check that every one landed.

    python scripts/tools/concurrent_sweeps.py --sweeps 4 --store /tmp/x [override ...]

Each sweep gets its own Hydra output dir and the same sqlite file (tracking.uri); the default
overrides are a tiny two-job sweep. Exit 0 when all N sweep parents are FINISHED, each with all of
its jobs FINISHED; else 1 with one line per missing piece. Reproduces issue #10's lost-sweep race
(MLflow's first-use migration) and proves the file lock in dlbench.tracking.store fixes it.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TINY_SWEEP = ["+experiment=smoke", "model=resnet_cifar", "model.depth=8", "precision=fp32,bf16"]


def start(store: Path, index: int, overrides: list[str]) -> subprocess.Popen:
    args = [
        sys.executable, str(ROOT / "src" / "run.py"), "-m", *overrides,
        f"tracking.uri=sqlite:///{store / 'mlflow.db'}", f"hydra.sweep.dir={store / f'sweep{index}'}",
    ]  # fmt: skip
    log = (store / f"sweep{index}.log").open("w")
    return subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)


def check(store: Path, sweeps: int, jobs: int) -> list[str]:
    """What is missing from the store: one line per problem (empty = all landed)."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{store / 'mlflow.db'}")
    exp = client.get_experiment_by_name("dlbench")
    if exp is None:
        return ["no dlbench experiment in the store"]
    runs = client.search_runs([exp.experiment_id], max_results=1000)
    parents = [r for r in runs if r.data.tags.get("dlbench.kind") == "sweep"]
    problems = [f"{len(parents)} sweep parents, expected {sweeps}"] if len(parents) != sweeps else []
    for p in parents:
        kids = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == p.info.run_id]
        done = [k for k in kids if k.info.status == "FINISHED"]
        if p.info.status != "FINISHED" or len(done) != jobs:
            problems.append(f"sweep {p.info.run_id}: {p.info.status}, {len(done)} of {jobs} jobs FINISHED")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sweeps", type=int, default=2)
    parser.add_argument("--store", type=Path, required=True, help="a new, empty folder for the store")
    parser.add_argument("--jobs", type=int, default=2, help="jobs per sweep (2 for the default overrides)")
    parser.add_argument("overrides", nargs="*", default=TINY_SWEEP)
    args = parser.parse_args()
    args.store.mkdir(parents=True, exist_ok=True)
    if (args.store / "mlflow.db").exists():
        print(f"{args.store / 'mlflow.db'} exists: give a new folder (--store)", file=sys.stderr)
        return 2
    procs = [start(args.store, i, args.overrides) for i in range(args.sweeps)]
    codes = [p.wait(timeout=1800) for p in procs]
    problems = [
        f"sweep {i} exited {c} (see {args.store / f'sweep{i}.log'})" for i, c in enumerate(codes) if c
    ]
    problems += check(args.store, args.sweeps, args.jobs)
    for line in problems:
        print(line, file=sys.stderr)
    if not problems:
        print(f"all {args.sweeps} sweeps landed with {args.jobs} jobs each in {args.store / 'mlflow.db'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
