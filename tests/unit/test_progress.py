"""The progress bar's total follows the warm-up the bench really runs (translation warms up at least one
step per batch shape, more than schedule.warmup_steps), so the bar ends at 100%, not past it; a worker silent
for a minute gets a line naming the step it is in."""

import io
import time

import pytest
from tqdm import tqdm

from dlbench.progress import Progress
from dlbench.supervisor import Worker, WorkerTimeout


def test_bar_total_grows_when_the_bench_warms_up_longer():
    p = Progress("job", warmup_steps=2, windows=3, steps_per_window=4)
    p._bar = tqdm(total=p.total, file=io.StringIO())  # what a terminal gets
    for step in range(1, 6):
        p.warmup_step(step, 5)
    for w in range(3):
        p.window(w, 100.0)
    assert p._bar.total == 5 + 12 and p._bar.n == p._bar.total
    p.close()


def test_log_lines_without_a_terminal_name_the_real_warm_up(caplog):
    p = Progress("job", warmup_steps=2, windows=1, steps_per_window=1)
    with caplog.at_level("INFO", logger="dlbench"):
        p.warmup_step(1, 7)
        p.warmup_step(7, 7)
    assert [r.getMessage() for r in caplog.records] == ["job: warm-up step 1/7", "job: warm-up step 7/7"]
    assert p.total == 8


def test_a_silent_worker_gets_a_line_a_minute_naming_its_step(caplog):
    """A first step that compiles or autotunes for minutes gets a line at each minute of silence, naming the
    step; an event ends the silence, and the count starts again."""
    p = Progress("job", warmup_steps=20, windows=5, steps_per_window=1)
    with caplog.at_level("INFO", logger="dlbench"):
        p.quiet(59.5)
        p.built("built on cuda:0 in 10.2s")
        for silent in (30.0, 60.2, 90.0, 120.4, 121.0):
            p.quiet(silent)
        p.warmup_step(1, 20)
        p.quiet(0.5)
        p.quiet(61.0)
        for step in range(2, 21):
            p.warmup_step(step, 20)
        p.quiet(65.0)
    assert [r.getMessage() for r in caplog.records] == [
        "job: built on cuda:0 in 10.2s",
        "job: warm-up step 1/20 (the first steps compile and autotune): nothing new from the worker for 60 s",
        "job: warm-up step 1/20 (the first steps compile and autotune): nothing new from the worker for 120 s",
        "job: warm-up step 1/20",
        "job: warm-up step 2/20 (the first steps compile and autotune): nothing new from the worker for 61 s",
        "job: warm-up step 20/20",
        "job: running: nothing new from the worker for 65 s",
    ]


def test_before_the_model_is_built_the_line_says_so(caplog):
    p = Progress("job", warmup_steps=2, windows=1, steps_per_window=1)
    with caplog.at_level("INFO", logger="dlbench"):
        p.quiet(75.0)
    assert [r.getMessage() for r in caplog.records] == [
        "job: starting (imports, building the model): nothing new from the worker for 75 s"
    ]


def test_the_supervisor_reports_a_silent_workers_growing_silence(tmp_path):
    """A real process that never writes an event: while it is silent the supervisor passes the seconds since
    it started to `on_quiet`, about twice a second, until the deadline."""
    silent = tmp_path / "silent-python"
    silent.write_text("#!/bin/sh\nexec sleep 30\n")
    silent.chmod(0o755)
    worker = Worker(str(silent), tmp_path / "job.json", tmp_path / "worker.log")
    worker.start()
    seen: list[float] = []
    try:
        with pytest.raises(WorkerTimeout):
            for _ in worker.events(time.monotonic() + 2.2, seen.append):
                pass
    finally:
        worker.kill()
    assert len(seen) >= 3 and seen == sorted(seen) and 1.4 <= seen[-1] <= 2.5, seen
