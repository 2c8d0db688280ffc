"""What every yardstick shares whatever its framework: the common flags, one run per (precision, mode) of
the comma lists in one process (TensorFlow's: one process each, bare_tf_common.run_all), and the one
`BARE {json}` line with its window statistics.

Framework-free on purpose: bare_common.py (PyTorch), bare_tf_common.py and bare_jax_common.py add their own
flags, precision switches, timing and facts, and say how a finished configuration is released (the torch
cache, `keras.backend.clear_session`, `jax.clear_caches`). Like them it imports nothing from dlbench: a
yardstick is the loop a careful engineer writes by hand.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import gc
import itertools
import json
import math
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import kernel_table

CHOICES = {"precision": ("fp32", "tf32", "amp", "bf16"), "mode": ("train", "infer")}


def parser(doc: str, *, warmup: int, steps: int, windows: int, warmup_help: str) -> argparse.ArgumentParser:
    """The flags of every yardstick; the framework's common module and each script add their own."""
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="auto", choices=["auto", "cuda", "cpu"])
    p.add_argument("--precision", default="amp", help="fp32|tf32|amp|bf16, or a comma list")
    p.add_argument("--mode", default="train", help="train|infer, or a comma list")
    p.add_argument("--warmup", type=int, default=warmup, help=f"untimed steps first ({warmup_help})")
    p.add_argument("--steps", type=int, default=steps, help="steps per timed window")
    p.add_argument("--windows", type=int, default=windows, help="timed windows; the median is the figure")
    p.add_argument(
        "--min-window-s",
        type=float,
        default=0.0,
        help="stretch each timed window to at least this many seconds (0: --steps as given); untimed windows "
        "after the warm-up measure the step, as the harness's schedule.min_timed_s does",
    )
    p.add_argument("--seed", type=int, default=0)
    return p


def profile_flag(p: argparse.ArgumentParser) -> None:
    """--profile, for the frameworks whose common module hands `measure` a profiler (torch, JAX)."""
    p.add_argument(
        "--profile", default=None, metavar="DIR",
        help="after the timed windows, record one more window of --steps steps (never timed) with the "
        "framework's profiler under DIR/<precision>_<mode>/ and print where its GPU time went (kernel_table.py)",
    )  # fmt: skip


def parse(p: argparse.ArgumentParser) -> argparse.Namespace:
    """The flags, with each value of the comma lists checked (one line and exit 2 for a bad one)."""
    a = p.parse_args()
    for key, allowed in CHOICES.items():
        bad = [v for v in getattr(a, key).split(",") if v not in allowed]
        if bad:
            p.error(f"--{key} {','.join(bad)}: choose from {', '.join(allowed)}")
    if a.min_window_s < 0:
        p.error(f"--min-window-s {a.min_window_s:g}: use seconds >= 0 (0 times --steps as given)")
    return a


def configurations(a: argparse.Namespace) -> list[tuple[str, str]]:
    """Every (precision, mode) of the comma lists, in the order given."""
    return list(itertools.product(a.precision.split(","), a.mode.split(",")))


def run_all(
    p: argparse.ArgumentParser,
    run: Callable[[argparse.Namespace], int],
    release: Callable[[argparse.Namespace], None],
) -> int:
    """Run `run` once per (precision, mode) of the comma lists, in one process: one BARE line each, and no
    interpreter start or device initialisation paid again; `release` frees a configuration's model,
    optimizer state and compiled steps before the next. Returns the worst exit code."""
    a = parse(p)
    code = 0
    for precision, mode in configurations(a):
        one = copy.copy(a)
        one.precision, one.mode = precision, mode
        code = max(code, run(one))
        release(one)
        gc.collect()
    return code


def stretch(a: argparse.Namespace, window: Callable[[], float]) -> None:
    """With --min-window-s, run untimed windows of --steps steps after the warm-up (`window` returns its
    seconds), doubling the steps until one lasts half the goal (a window of a step or two right after the
    warm-up runs slow and would time the step long), then set a.steps so a window lasts the goal. Each
    window's edges cost a fixed time (the closing sync drains the device, the next step starts on an idle
    one), so a yardstick timed in shorter windows than its harness job reads low and flatters the harness."""
    if not a.min_window_s:
        return
    seconds = window()
    while seconds < a.min_window_s / 2:
        a.steps *= 2
        seconds = window()
    if seconds < a.min_window_s:
        a.steps = math.ceil(a.steps * a.min_window_s / seconds)


@contextlib.contextmanager
def host_clock() -> Iterator[Callable[[], float]]:
    """The wall clock around a window; the window's closing sync makes it cover the device's work."""
    elapsed = [math.nan]
    t0 = time.perf_counter()
    yield lambda: elapsed[0]
    elapsed[0] = time.perf_counter() - t0


def measure(
    step: Callable[[], tuple[int, Any]],
    a: argparse.Namespace,
    sync: Callable[[Any], object],
    clock: Callable[[], contextlib.AbstractContextManager[Callable[[], float]]] = host_clock,
    profiler: Callable[[Path], contextlib.AbstractContextManager[object]] | None = None,
) -> tuple[list[float], Any]:
    """Warm-up, then `windows` windows of `steps` steps (stretched by --min-window-s), the device synchronized
    only at window edges: `sync` of the last step's outputs closes each (JAX blocks on them, TensorFlow drains
    its devices) inside `clock` (the wall clock; PyTorch's CUDA events); with --profile, one more window
    inside `profiler(folder)`, after the timed ones so that the profiler's cost touches no figure. `step`
    returns (units done, its outputs). Returns (units/s per window, the last outputs)."""
    out = None

    def window() -> tuple[int, float]:
        nonlocal out
        with clock() as seconds:
            units = 0
            for _ in range(a.steps):
                n, out = step()
                units += n
            sync(out)
        return units, seconds()

    for _ in range(a.warmup):
        _, out = step()
    sync(out)
    stretch(a, lambda: window()[1])
    rates = []
    for _ in range(a.windows):
        units, seconds = window()
        rates.append(units / seconds)
    if getattr(a, "profile", None) and profiler is not None:
        profile_window(a, window, profiler)
    return rates, out


def profile_window(
    a: argparse.Namespace,
    window: Callable[[], object],
    profiler: Callable[[Path], contextlib.AbstractContextManager[object]],
) -> None:
    """One window of --steps steps inside the profiler, writing under --profile's DIR/<precision>_<mode>/; its
    GPU time by category and top kernels to stderr, the summary to profile.json beside the trace. The profile
    is an extra: whatever it raises becomes one line, and the timed windows' figures are still reported."""
    folder = Path(a.profile) / f"{a.precision}_{a.mode}"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with profiler(folder):
            window()
        summary = kernel_table.profile(folder, a.steps)
        (folder / "profile.json").write_text(json.dumps(summary, indent=1))
    except Exception as exc:  # noqa: BLE001 - a failed profile must not cost the timed figures
        print(
            f"--profile {a.profile}: no profile of {a.precision} {a.mode}: {type(exc).__name__}: {exc}",
            file=sys.stderr,
        )
        return
    print(f"profile of {a.precision} {a.mode}, {a.steps} steps:", file=sys.stderr)
    kernel_table.print_table(summary)


def report(a: argparse.Namespace, rates: list[float], loss: Any, facts: dict[str, Any]) -> int:
    """Print the one BARE line (the flags, the framework's `facts`, median and p5/p95 over windows, final
    loss) and return the exit code: 3 when a training loss ended NaN or inf, which voids the figure."""
    cuts = statistics.quantiles(rates, n=20, method="inclusive") if len(rates) > 1 else rates * 19
    last = None if loss is None else float(loss)
    finite = last is None or math.isfinite(last)
    window = {"throughput": statistics.median(rates), "p05": cuts[0], "p95": cuts[18], "all": rates}
    result = {**vars(a), **facts, **window, "loss_last": last, "loss_finite": finite}
    print("BARE " + json.dumps(result), flush=True)
    if not finite:
        print(f"non-finite final loss {last}: the figure is void", file=sys.stderr)
        return 3
    return 0
