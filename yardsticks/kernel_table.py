#!/usr/bin/env python
"""Where a step's GPU time goes: kernel time by category and by kernel, from a profiler's trace.

Framework-free, as every yardstick module: it reads the Chrome-trace JSON that torch.profiler exports
(``trace.json[.gz]``; GPU work is the events of category kernel, gpu_memcpy, gpu_memset) and the one
``jax.profiler.trace`` writes (``plugins/profile/*/*.trace.json.gz``; GPU work is the events on the stream
threads of a ``/device:GPU:`` process), and gives, per step: GPU busy time (the union of the kernels'
intervals), the kernels' summed time, the time by category (convolution, matmul, batch norm, XLA fusion, ...,
from the kernel's name) and the top kernels. profile_tf_step.py reads TensorFlow's XSpace and summarises it
here too, so the three frameworks' tables share one set of categories.

    python yardsticks/kernel_table.py DIR_OR_TRACE --steps N     # prints PROFILE {json} and a table
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

CONV = ("conv", "cudnn", "implicit_gemm", "implicit", "fprop", "dgrad", "wgrad", "winograd", "fft")
LAYOUT = ("transpose", "tonhwc", "tonchw", "layout", "swizzle", "swapdimension", "shuffleintensor")
ELEMENTWISE = ("elementwise", "eigen", "relu", "add", "mul", "cast", "bias", "scalar", "tensorexecutor")
REDUCE = ("reduce", "reduction")
TORCH_GPU_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")

# Lines of an XLA GPU plane that the profiler derives from the streams' kernels: never kernels, never counted.
DERIVED_LINES = {
    "steps",
    "xla modules",
    "xla ops",
    "xla tracemes",
    "tensorflow ops",
    "tensorflow name scope",
    "framework ops",
    "framework name scope",
    "source code",
    "launch stats",
}

# (kernel name, start in ns or None when the tracer only counted it, duration in ns, occurrences)
Event = tuple[str, float | None, float, int]


def categorize(kernel: str) -> str:
    """A GPU kernel's category, from its name (first match wins; the order matters)."""
    k = kernel.lower()
    if "bn_fw" in k or "bn_bw" in k or "batch_norm" in k or "batchnorm" in k or k.startswith("bn_"):
        return "batch norm"
    if "memcpy" in k or "memset" in k:
        return "copies"
    if any(p in k for p in LAYOUT):
        return "layout transpose"
    if "fusion" in k:  # XLA-generated kernels: loop_*_fusion, input_reduce_fusion, triton_gemm_*_fusion
        return "matmul" if "gemm" in k or "triton" in k else "xla fusion"
    kc = k.replace("convert", "")
    if any(p in kc for p in CONV):
        return "convolution"
    if "gemm" in k or "cublas" in k:
        return "matmul"
    if any(p in k for p in ("xmma", "sm90", "sm80", "cutlass")):
        return "convolution"
    if any(p in k for p in REDUCE):  # TF's Row/Column/BlockReduceKernel: e.g. unfused batch-norm moments
        return "reduction"
    if any(p in k for p in ELEMENTWISE):
        return "elementwise"
    if "nchw" in k or "nhwc" in k:
        return "layout transpose"
    return "other"


def kernel_lines(names: dict) -> set:
    """Of a GPU plane's lines (key -> name), those holding its kernels: the stream lines, or every line not
    derived from them where none is named a stream. XSpace planes and JAX's trace JSON name them alike."""
    lines = {k for k, name in names.items() if name.lower() not in DERIVED_LINES}
    return {k for k in lines if names[k].lower().startswith("stream")} or lines


def union_ns(intervals: list[tuple[float, float]]) -> float:
    """The length of the union of (start, end) intervals: overlapping kernels on two streams count once."""
    total, end = 0.0, float("-inf")
    for s, e in sorted(intervals):
        if e <= end:
            continue
        total += e - max(s, end)
        end = e
    return total


def summarize(events: Iterable[Event], steps: int) -> dict:
    """Per step: GPU busy time, the kernels' summed time, their count (copies apart), time by category and
    every kernel as [name, ms/step, n/step, category], longest first."""
    by_name: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    intervals = []
    for name, start, dur, n in events:
        by_name[name][0] += dur
        by_name[name][1] += n
        if start is not None:
            intervals.append((start, start + dur))
    by_cat: dict[str, float] = defaultdict(float)
    for name, (dur, _) in by_name.items():
        by_cat[categorize(name)] += dur
    ms = 1e-6 / steps
    kernels = sorted(by_name.items(), key=lambda kv: -kv[1][0])
    n_all = sum(c for _, c in by_name.values())
    n_copies = sum(c for k, (_, c) in by_name.items() if categorize(k) == "copies")
    return {
        "busy_ms_per_step": union_ns(intervals) * ms,
        "kernel_sum_ms_per_step": sum(d for d, _ in by_name.values()) * ms,
        "kernels_per_step": (n_all - n_copies) / steps,
        "events_per_step": n_all / steps,
        "span_ms": (max(e for _, e in intervals) - min(s for s, _ in intervals)) * 1e-6 if intervals else 0.0,
        "by_category": {k: round(v * ms, 3) for k, v in sorted(by_cat.items(), key=lambda kv: -kv[1])},
        "kernels": [[k, round(d * ms, 4), round(c / steps, 2), categorize(k)] for k, (d, c) in kernels],
    }


def find_trace(where: Path) -> Path:
    """The trace file itself, or the newest ``*trace.json[.gz]`` under a folder (JAX nests it by date)."""
    if where.is_file():
        return where
    found = [p for pattern in ("*trace.json.gz", "*trace.json") for p in where.rglob(pattern)]
    found = [p for p in found if p.name != "perfetto_trace.json.gz"]  # JAX's copy of the same events
    if not found:
        raise FileNotFoundError(f"no trace.json or *.trace.json.gz under {where}")
    return max(found, key=lambda p: p.stat().st_mtime)


def load(path: Path) -> dict:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        return json.load(f)


def gpu_events(trace: dict) -> list[Event]:
    """GPU kernels and copies of a Chrome trace (µs in the file, ns out): torch's by category; XLA's by
    where they sit, the stream threads of a GPU process (its derived lines, such as XLA Ops, left out)."""
    evs = [e for e in trace.get("traceEvents", []) if isinstance(e, dict)]
    done = [e for e in evs if e.get("ph") == "X" and "dur" in e]
    if any(e.get("cat") in TORCH_GPU_CATEGORIES for e in done):
        picked = [e for e in done if e.get("cat") in TORCH_GPU_CATEGORIES]
    else:
        gpus = {
            e["pid"] for e in evs if e.get("name") == "process_name" and "/device:GPU" in e["args"]["name"]
        }
        names = {
            (e["pid"], e["tid"]): e["args"]["name"]
            for e in evs
            if e.get("name") == "thread_name" and e.get("pid") in gpus
        }
        keep = kernel_lines(names)
        picked = [e for e in done if (e.get("pid"), e.get("tid")) in keep]
    return [(e["name"], float(e["ts"]) * 1e3, float(e["dur"]) * 1e3, 1) for e in picked]


def profile(where: Path, steps: int) -> dict:
    """The summary of the trace at `where`, with its path; `kernels` empty when the trace holds no GPU work."""
    path = find_trace(where)
    return {"trace": str(path), "steps": steps, **summarize(gpu_events(load(path)), steps)}


def print_table(s: dict, out=sys.stderr, top: int = 15) -> None:
    """The summary for a reader: busy time, time by category, the top kernels."""
    if not s["kernels"]:
        print(f"no GPU kernels in {s['trace']} (a CPU run, or the GPU tracer, CUPTI, did not load)", file=out)
        return
    busy = s["busy_ms_per_step"]
    print(
        f"GPU busy {busy:.3f} ms/step, kernels {s['kernel_sum_ms_per_step']:.3f} ms/step summed, "
        f"{s['kernels_per_step']:.0f} kernels/step ({s['trace']})",
        file=out,
    )
    print(f"{'category':<20}{'ms/step':>10}{'% of sum':>10}", file=out)
    total = sum(s["by_category"].values()) or 1.0
    for k, v in s["by_category"].items():
        print(f"{k:<20}{v:>10.3f}{100 * v / total:>9.1f}%", file=out)
    print(f"{'top kernels':<82}{'ms/step':>9}{'n/step':>8}", file=out)
    for name, ms, n, _ in s["kernels"][:top]:
        print(f"{name[:80]:<82}{ms:>9.3f}{n:>8.1f}", file=out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("trace", type=Path, help="a trace file, or a folder holding one")
    p.add_argument("--steps", type=int, default=1, help="steps the trace holds (figures are per step)")
    p.add_argument("--top", type=int, default=15, help="kernels listed")
    a = p.parse_args(argv)
    try:
        s = profile(a.trace, a.steps)
    except (FileNotFoundError, json.JSONDecodeError, OSError) as exc:
        print(f"kernel_table: {exc}", file=sys.stderr)
        return 2
    print_table(s, sys.stdout, a.top)
    print(
        "PROFILE "
        + json.dumps({k: v for k, v in s.items() if k != "kernels"} | {"top": s["kernels"][: a.top]})
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
