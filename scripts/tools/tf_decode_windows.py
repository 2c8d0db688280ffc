#!/usr/bin/env python
"""Where TensorFlow greedy decoding spends its windows: dlbench's TF bench built from a job's job.json (as its
worker builds it: the same environment and CPU threads), then timed windows of five kinds in one process, one
`WINDOW {json}` line each.

    python scripts/tools/tf_decode_windows.py RUN_DIR/job.json [--steps 5] [--windows 4]

  harness          bench.step() as the worker's timed windows run it (source, encoder, one call per position
                   inside the bench's device scope, the tokens left on the device)
  harness_gc_off   the same with Python's garbage collector off
  direct_scope     the model's translate() on one batch already on the device, in the bench's device scope,
                   the tokens left on the device as the bench's step leaves them
  direct_no_scope  the same without a device scope (as a hand-written loop calls it)
  harness_again    the first kind once more (does the rate drift within the process?)

Harness windows also give each step's milliseconds and the garbage collector's runs and pauses in the window.
Rates that jump between windows of one kind, with no collection in them, mean the host loop, not the GPU or
the harness, sets the pace. The job must be a translation job with mode=infer and framework=tf.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from dlbench.config import JobConfig  # noqa: E402
from dlbench.timing import warm_up  # noqa: E402
from dlbench.worker import framework_for  # noqa: E402


def say(**fields: Any) -> None:
    print("WINDOW " + json.dumps(fields), flush=True)


class Collections:
    """The garbage collector's runs and pause seconds, counted from the start."""

    def __init__(self) -> None:
        self.runs, self.seconds, self._t = 0, 0.0, 0.0
        gc.callbacks.append(self._seen)

    def _seen(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._t = time.perf_counter()
        else:
            self.runs += 1
            self.seconds += time.perf_counter() - self._t


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("job", help="a run's job.json (framework=tf model=transformer mode=infer)")
    p.add_argument("--steps", type=int, default=5, help="batches per window")
    p.add_argument("--windows", type=int, default=4, help="windows of each kind")
    a = p.parse_args()
    job = JobConfig.from_dict(json.loads(Path(a.job).read_text()))
    if job.framework.name != "tf" or job.mode != "infer" or job.model.task != "translation":
        print(f"{a.job}: needs framework=tf, a translation model and mode=infer", file=sys.stderr)
        return 2
    backend, threads = framework_for(job)
    import tensorflow as tf

    collections = Collections()
    t0 = time.perf_counter()
    bench = backend.build(job)
    say(kind="build", s=time.perf_counter() - t0, threads=threads)
    warm_up(bench, job.schedule.warmup_steps, lambda *_, **__: None)

    def harness(kind: str) -> None:
        for _ in range(a.windows):
            runs, paused, units = collections.runs, collections.seconds, bench.units()
            steps_ms = []
            t = time.perf_counter()
            for _ in range(a.steps):
                s = time.perf_counter()
                bench.step()
                steps_ms.append(round(1e3 * (time.perf_counter() - s), 1))
            bench.sync()
            dt = time.perf_counter() - t
            say(kind=kind, rate=(bench.units() - units) / dt, s=dt, step_ms=steps_ms,
                gcs=collections.runs - runs, gc_ms=round(1e3 * (collections.seconds - paused), 2))  # fmt: skip

    harness("harness")
    gc.collect()
    gc.disable()
    harness("harness_gc_off")
    gc.enable()

    src, tgt_in = bench.source.next().inputs
    length, n, model = int(tgt_in.shape[1]), int(src.shape[0]), bench.model
    xla = model.decode_jit_compile

    def direct(kind: str, device: str | None) -> None:
        for _ in range(a.windows):
            t = time.perf_counter()
            for _ in range(a.steps):
                with tf.device(device) if device else contextlib.nullcontext():
                    model.translate(src, length, check_every=0, jit_compile=xla, read_back=False)
            bench.sync()
            dt = time.perf_counter() - t
            say(kind=kind, rate=n * length * a.steps / dt, s=dt)

    direct("direct_scope", "/GPU:0" if bench.on_gpu else "/CPU:0")
    direct("direct_no_scope", None)
    harness("harness_again")
    say(kind="done", sentences=n, positions=length)
    bench.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
