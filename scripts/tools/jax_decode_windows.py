#!/usr/bin/env python
"""Where JAX greedy decoding spends its windows: dlbench's JAX bench built from a job's job.json (as its
worker builds it), then timed windows of five kinds in one process, one `WINDOW {json}` line each.

    python scripts/tools/jax_decode_windows.py RUN_DIR/job.json [--steps 5] [--windows 6]

  harness         bench.step() as the worker's timed windows run it (source, encoder, one jitted call per
                  position, the tokens stacked and left on the device)
  harness_gc_off  the same with Python's garbage collector off
  direct_read     dlbench's translate() on one batch already on the device (no source), read back per batch
  direct_no_read  the same calls without the read-back: synchronized at the window's end only, as the
                  harness and the hand-written loop (yardsticks/bare_jax_transformer.py --mode infer) are
  harness_again   the first kind once more (does the rate drift within the process?)

Each harness window also gives per step the host's dispatch time (the step's start until its last
position is queued and the ids stacked), XLA compile events (jax.monitoring) and garbage-collector pauses
in it. Dispatch times that add up to the window's time mean the host loop, not the GPU, sets the pace.
The job must be a translation job with mode=infer and framework=jax.
"""

from __future__ import annotations

import argparse
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


class Watch:
    """XLA compile events (jax.monitoring) and garbage-collector pauses, counted from the start."""

    def __init__(self, jax: Any) -> None:
        self.compiles = 0
        self.gc_s, self.gcs, self._t = 0.0, 0, 0.0
        jax.monitoring.register_event_duration_secs_listener(self._event)
        gc.callbacks.append(self._gc)

    def _event(self, name: str, secs: float, **_: Any) -> None:
        self.compiles += "compile" in name

    def _gc(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._t = time.perf_counter()
        else:
            self.gc_s += time.perf_counter() - self._t
            self.gcs += 1

    def now(self) -> tuple[int, float, int]:
        return self.compiles, self.gc_s, self.gcs


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("job", help="a run's job.json (framework=jax model=transformer mode=infer)")
    p.add_argument("--steps", type=int, default=5, help="batches per window")
    p.add_argument("--windows", type=int, default=6, help="windows of each kind")
    a = p.parse_args()
    job = JobConfig.from_dict(json.loads(Path(a.job).read_text()))
    if job.framework.name != "jax" or job.mode != "infer" or job.model.task != "translation":
        print(f"{a.job}: needs framework=jax, a translation model and mode=infer", file=sys.stderr)
        return 2
    backend, _ = framework_for(job)
    import jax

    from dlbench.workloads.translation import jax as tj
    from dlbench.workloads.translation.transformer import BOS, EOS

    watch = Watch(jax)
    t0 = time.perf_counter()
    bench = backend.build(job)
    say(kind="build", s=time.perf_counter() - t0)
    queued: list[float] = []  # when each batch's last position was queued (its ids stacked)
    stack = tj.JaxOps.stack

    def timed_stack(self: Any, columns: list) -> Any:
        out = stack(self, columns)
        queued.append(time.perf_counter())
        return out

    tj.JaxOps.stack = timed_stack
    warm_up(bench, job.schedule.warmup_steps, lambda *_, **__: None)
    say(kind="warm", compiles=watch.compiles)

    def harness(kind: str) -> None:
        for w in range(a.windows):
            (c0, g0, n0), r0, u0 = watch.now(), len(queued), bench.units()
            starts = []
            t = time.perf_counter()
            for _ in range(a.steps):
                starts.append(time.perf_counter())
                bench.step()
            bench.sync()
            dt = time.perf_counter() - t
            c1, g1, n1 = watch.now()
            done = queued[r0:]
            say(kind=kind, window=w, rate=(bench.units() - u0) / dt, s=dt,
                dispatch_ms=[round(1e3 * (q - s), 1) for q, s in zip(done, starts, strict=True)],
                compiles=c1 - c0,
                gc_ms=round(1e3 * (g1 - g0), 2), gcs=n1 - n0)  # fmt: skip

    harness("harness")
    gc.collect()
    gc.disable()
    harness("harness_gc_off")
    gc.enable()

    src, tgt_in = bench.source.next().inputs
    length, n = int(tgt_in.shape[1]), int(src.shape[0])
    variables, module = bench.net.variables, bench.net.module
    device = str(jax.config.jax_default_device)

    def decode_on_device() -> Any:
        start, position = tj._JITTED
        keep, cross, caches = start(module, variables, src, length)
        positions = tj._positions(length, device)
        prev = tj._filled(n, BOS, device)
        done = prev == EOS
        for t in range(length):
            prev, done, caches = position(module, variables, prev, done, positions[t], keep, caches, cross)
        return prev

    def direct(kind: str, read: bool) -> None:
        for w in range(a.windows):
            t = time.perf_counter()
            for _ in range(a.steps):
                last = (
                    tj.translate(bench.net, variables, src, length, check_every=0)
                    if read
                    else decode_on_device()
                )
            jax.block_until_ready(last)
            dt = time.perf_counter() - t
            say(kind=kind, window=w, rate=n * length * a.steps / dt, s=dt)

    direct("direct_read", True)
    direct("direct_no_read", False)
    harness("harness_again")
    say(kind="done", compiles=watch.compiles, sentences=n, positions=length)
    bench.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
