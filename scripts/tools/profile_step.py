"""Profile a few steps of one PyTorch job with torch.profiler: where the GPU idles, and on what.

Builds the job as a worker would (the same Hydra composition, the same TorchBench), warms it up, then
records --steps steps. Prints one JSON line (prefix PROFILE) and a table of the top GPU kernels:

  step_ms              wall time per profiled step (synchronized at both ends)
  gpu_busy_frac        union of all kernels and copies over the profiled span
  stream_busy_frac     the same per CUDA stream (the busiest is training; DALI runs on its own)
  data_ms_per_step     host time spent in the input source's next() (DALI hand-over)

and writes trace.json.gz (open it in https://ui.perfetto.dev) under --out.

Usage: python scripts/tools/profile_step.py [--steps 10] [--out DIR] [hydra overrides ...]
  e.g. python scripts/tools/profile_step.py --out /tmp/prof model=resnet50 precision=amp device=cuda \
         schedule.batch_size=256 dataset=imagenet dataset.path=/data/folder
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))


def compose_job(overrides: list[str]):
    """The JobConfig that `python src/run.py <overrides>` would hand its worker."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from dlbench.config import JobConfig, register_configs, validate

    register_configs()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides)
    job = JobConfig.from_dict(OmegaConf.to_container(cfg, resolve=True))
    validate(job)
    return job


GPU_WORK = ("kernel", "gpu_memcpy", "gpu_memset")


def is_gpu_work(e) -> bool:
    if hasattr(e, "activity_type"):  # newer torch names the Kineto activity
        return e.activity_type() in GPU_WORK
    from torch.autograd import DeviceType

    return e.device_type() == DeviceType.CUDA and not e.is_user_annotation()


def busy_fraction(intervals: list[tuple[int, int]], span: tuple[int, int]) -> float:
    """Fraction of `span` covered by the union of `intervals` (ns), overlaps counted once."""
    covered, end = 0, span[0]
    for a, b in sorted(intervals):
        a, b = max(a, end), min(b, span[1])
        if b > a:
            covered += b - a
            end = b
    return covered / max(1, span[1] - span[0])


def gpu_intervals(prof) -> dict[int, list[tuple[int, int]]]:
    """Kernel and copy intervals on the GPU, by stream, from the profiler's raw (Kineto) events.
    Annotations (record_function ranges mirrored onto the GPU timeline) are not work: left out."""
    streams: dict[int, list[tuple[int, int]]] = {}
    for e in prof.profiler.kineto_results.events():
        if is_gpu_work(e) and e.duration_ns() > 0:
            streams.setdefault(e.device_resource_id(), []).append((e.start_ns(), e.end_ns()))
    return streams


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--out", type=Path, default=Path("profile"))
    p.add_argument("overrides", nargs="*")
    a = p.parse_args()

    import torch
    from torch.profiler import ProfilerActivity, profile

    from dlbench.backends.torch.bench import TorchBench

    job = compose_job(a.overrides)
    bench = TorchBench(job)
    for _ in range(max(1, job.schedule.warmup_steps)):
        bench.step()
    bench.sync()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if bench.dev.type == "cuda" else [])
    wait0, units0 = bench.data_wait_s(), bench.units()
    with profile(activities=activities) as prof:
        start = time.perf_counter()
        for _ in range(a.steps):
            bench.step()
        bench.sync()
        wall = time.perf_counter() - start
    data_s = bench.data_wait_s() - wait0
    bench.close()

    streams = gpu_intervals(prof)
    every = [iv for ivs in streams.values() for iv in ivs]
    span = (min(s for s, _ in every), max(e for _, e in every)) if every else (0, 1)
    result = {
        "overrides": a.overrides,
        "steps": a.steps,
        "step_ms": 1000 * wall / a.steps,
        "samples_per_s": (bench.units() - units0) / wall,
        "gpu_busy_frac": busy_fraction(every, span) if every else None,
        "stream_busy_frac": {str(k): round(busy_fraction(v, span), 4) for k, v in streams.items()},
        "data_ms_per_step": 1000 * data_s / a.steps,
        "precision": bench.precision_report(),
        "torch": torch.__version__,
    }
    a.out.mkdir(parents=True, exist_ok=True)
    raw = a.out / "trace.json"
    prof.export_chrome_trace(str(raw))
    with raw.open("rb") as src, gzip.open(a.out / "trace.json.gz", "wb") as dst:
        shutil.copyfileobj(src, dst)
    raw.unlink()
    sort = "cuda_time_total" if every else "cpu_time_total"
    print(prof.key_averages().table(sort_by=sort, row_limit=15, max_name_column_width=60))
    print("PROFILE " + json.dumps(result))


if __name__ == "__main__":
    main()
