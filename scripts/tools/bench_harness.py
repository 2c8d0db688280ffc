"""What the harness itself costs, printed as figures (not a test: numbers depend on the machine).

  1. per-job orchestration overhead: job start -> first worker step, minus the import and build
     time the worker reports (metric `overhead_s`), over several single runs through the real CLI;
  2. throughput with telemetry at 10 Hz vs off, alternating runs (ABAB...) to spread drift;
  3. time to log 50,000 telemetry points to a fresh sqlite store with dlbench's batched logger.

Usage: python scripts/tools/bench_harness.py [--runs N] [--skip-cli] [overrides ...]
Default job: the CIFAR ResNet-20 at batch 32 on whatever device the framework picks.
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))

from dlbench.tracking.run_logger import RunLogger  # noqa: E402
from dlbench.tracking.store import open_store  # noqa: E402

JOB = ["model=resnet_cifar", "model.depth=20", "schedule.batch_size=32", "schedule.warmup_steps=3",
       "schedule.steps_per_window=5", "schedule.windows=5"]  # fmt: skip


def cli_run(tmp: Path, overrides: list[str], tag: str) -> dict[str, float]:
    uri = f"sqlite:///{tmp / 'mlflow.db'}"
    cmd = [sys.executable, str(ROOT / "src" / "run.py"), *overrides, f"tracking.uri={uri}",
           f"tracking.experiment={tag}", f"hydra.run.dir={tmp / tag}"]  # fmt: skip
    subprocess.run(cmd, check=True, capture_output=True, cwd=ROOT)
    client, exp = open_store(uri, tag)
    (run,) = client.search_runs([exp], max_results=1, order_by=["attributes.start_time DESC"])
    return run.data.metrics


def overhead(tmp: Path, runs: int, extra: list[str]) -> None:
    values = [cli_run(tmp, [*JOB, *extra], f"overhead{i}")["overhead_s"] for i in range(runs)]
    print(f"orchestration overhead (job start -> first step, less import+build): "
          f"median {statistics.median(values):.3f} s, max {max(values):.3f} s over {runs} jobs (goal <= 2 s)")  # fmt: skip


def telemetry_cost(tmp: Path, runs: int, extra: list[str]) -> None:
    on, off = [], []
    for i in range(runs):
        for enabled, into in ((True, on), (False, off)) if i % 2 == 0 else ((False, off), (True, on)):
            m = cli_run(
                tmp, [*JOB, *extra, f"telemetry.enabled={str(enabled).lower()}"], f"telemetry{i}{enabled}"
            )
            into.append(m["throughput"])
    a, b = statistics.median(on), statistics.median(off)
    print(f"throughput telemetry 10 Hz: {a:.2f}/s, off: {b:.2f}/s, difference {100 * (b - a) / b:+.2f}% "
          f"(medians of {runs} alternating pairs; goal <= 0.5%)")  # fmt: skip
    print(f"  on : {', '.join(f'{x:.2f}' for x in on)}\n  off: {', '.join(f'{x:.2f}' for x in off)}")


def logging_cost(tmp: Path, points: int = 50_000) -> None:
    client, exp = open_store(f"sqlite:///{tmp / 'log.db'}", "logging")
    run = RunLogger.create(client, exp, "50k points")
    names = ["gpu0/util", "gpu0/mem_util", "gpu0/mem_used_mib", "gpu0/power_w", "gpu0/sm_clock_mhz",
             "gpu0/temp_c", "host/cpu_util", "host/rss_mib"]  # fmt: skip
    rng = random.Random(0)
    t0 = time.time()
    rows = [
        {"t": t0 + 0.1 * i, **{n: rng.random() * 100 for n in names}} for i in range(points // len(names))
    ]
    start = time.perf_counter()
    logged = run.series(rows)
    seconds = time.perf_counter() - start
    stored = len(client.get_metric_history(run.run_id, "gpu0/util"))
    print(f"logging {logged:,} telemetry points: {seconds:.2f} s ({logged / seconds:,.0f} points/s; "
          f"{stored} per series read back; goal <= 5 s)")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--skip-cli", action="store_true", help="only the logging figure")
    parser.add_argument("overrides", nargs="*", help="extra job overrides, e.g. device=cuda model=resnet50")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        logging_cost(tmp)
        if not args.skip_cli:
            overhead(tmp, args.runs, args.overrides)
            telemetry_cost(tmp, args.runs, args.overrides)


if __name__ == "__main__":
    main()
