"""Send SIGINT to N small CPU sweeps at random moments and check that every one stopped cleanly.

    python scripts/tools/interrupt_sweeps.py --runs 50 [--seed 1] [--keep DIR] [override ...]

A first sweep runs uninterrupted to measure how long one takes; then each of the N sweeps (a fresh store
and output folder each) gets one SIGINT at a moment drawn uniformly over that span. A sweep passes when it
exits 130, leaves no RUNNING run in its store and no process behind; one that ended before its signal
arrived is counted apart (neither pass nor fail). Prints one line per sweep and the tally; exit 0 when
none failed. The default overrides are a two-job sweep of the smoke preset.
"""

from __future__ import annotations

import argparse
import contextlib
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[2]
SWEEP = ["+experiment=smoke", "model=resnet_cifar", "model.depth=8", "precision=fp32,bf16"]


@dataclass
class Outcome:
    delay_s: float
    code: int | None
    problems: list[str]
    last_line: str  # the sweep's last line before the signal: where it landed

    @property
    def late(self) -> bool:
        """The sweep ended (cleanly) before its signal was due."""
        return self.delay_s < 0 and not self.problems


def start(where: Path, overrides: list[str]) -> subprocess.Popen:
    args = [sys.executable, str(ROOT / "src" / "run.py"), "-m", *overrides,
            f"tracking.uri=sqlite:///{where / 'mlflow.db'}", f"hydra.sweep.dir={where / 'sweep'}"]  # fmt: skip
    log = (where / "out.log").open("w")
    return subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, start_new_session=True)


def left_behind(where: Path, pids: set[int]) -> list[psutil.Process]:
    """Processes the sweep started (seen while it ran) or whose command line names its folder."""
    found = []
    for p in psutil.process_iter(["cmdline"]):
        with contextlib.suppress(psutil.Error):
            ours = p.pid in pids or any(str(where) in c for c in p.info["cmdline"] or [])
            if ours and p.status() != psutil.STATUS_ZOMBIE:
                found.append(p)
    return found


def running_runs(db: Path) -> list[str]:
    """Runs of any experiment in the store still RUNNING (none when no store was made)."""
    if not db.exists():
        return []
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{db}")
    ids = [e.experiment_id for e in client.search_experiments()]
    return [f"{r.info.run_name} RUNNING" for r in client.search_runs(ids) if r.info.status == "RUNNING"]


def interrupt_once(
    where: Path, delay_s: float, overrides: list[str], after: str | None = None, timeout_s: float = 120
) -> Outcome:
    """One sweep, SIGINT `delay_s` after its start (or after it printed a line matching `after`); what
    was wrong with how it stopped (empty: nothing)."""
    proc = start(where, overrides)
    log = where / "out.log"
    pids: set[int] = set()
    t_end = None if after else time.monotonic() + delay_s
    while (t_end is None or time.monotonic() < t_end) and proc.poll() is None:
        with contextlib.suppress(psutil.Error):
            pids |= {c.pid for c in psutil.Process(proc.pid).children(recursive=True)}
        if t_end is None and re.search(after, log.read_text(errors="replace")):
            t_end = time.monotonic() + delay_s
        time.sleep(0.02)
    lines = log.read_text(errors="replace").splitlines()
    last = lines[-1] if lines else "(nothing printed yet)"
    if proc.poll() is not None:
        problems = [] if proc.returncode == 0 else [f"exit {proc.returncode} before its signal"]
        return Outcome(-delay_s, proc.returncode, problems, "ended before the signal")
    proc.send_signal(signal.SIGINT)
    try:
        code = proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        code = None
    problems = [] if code == 130 else [f"exit {code}, expected 130"]
    out = log.read_text(errors="replace")
    problems += ["a traceback was printed"] if "Traceback" in out else []
    stray = left_behind(where, pids)
    problems += [f"process left: {p.pid} {' '.join(p.cmdline()[:4])}" for p in stray]
    for p in stray:  # nothing outlives the check
        with contextlib.suppress(psutil.Error):
            p.kill()
    problems += running_runs(where / "mlflow.db")
    return Outcome(delay_s, code, problems, last[-120:])


def measure(base: Path, overrides: list[str]) -> float:
    where = base / "baseline"
    where.mkdir()
    t0 = time.monotonic()
    proc = start(where, overrides)
    code = proc.wait(timeout=900)
    if code != 0:
        sys.exit(f"interrupt_sweeps: the uninterrupted sweep exited {code}: see {where / 'out.log'}")
    return time.monotonic() - t0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--seed", type=int, default=None, help="for the random moments (default: random)")
    parser.add_argument("--keep", type=Path, default=None, help="keep each sweep's folder here")
    parser.add_argument("overrides", nargs="*", default=SWEEP)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    base = args.keep or Path(tempfile.mkdtemp(prefix="interrupt_sweeps_"))
    base.mkdir(parents=True, exist_ok=True)
    span = measure(base, args.overrides)
    print(
        f"one sweep takes {span:.1f} s uninterrupted; SIGINT at a moment in [0.2, {span:.1f}] s", flush=True
    )
    passed, failed, late = 0, 0, 0
    for i in range(args.runs):
        where = base / f"run{i}"
        where.mkdir()
        o = interrupt_once(where, rng.uniform(0.2, span), args.overrides)
        if o.late:
            late += 1
            verdict = "ended before the signal"
        elif o.problems:
            failed += 1
            verdict = "FAIL: " + "; ".join(o.problems)
        else:
            passed += 1
            verdict = "ok (exit 130, no RUNNING run, no process left)"
        print(f"{i + 1:3d}/{args.runs} at {abs(o.delay_s):5.2f} s [{o.last_line}]: {verdict}", flush=True)
    print(f"tally: {passed} ok, {failed} failed, {late} ended before their signal (of {args.runs})")
    if args.keep is None and failed == 0:
        shutil.rmtree(base, ignore_errors=True)
    elif failed:
        print(f"the sweeps' folders are in {base}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
