"""The progress bar's total follows the warm-up the bench really runs (translation warms up at least one
step per batch shape, more than schedule.warmup_steps), so the bar ends at 100%, not past it."""

import io

from tqdm import tqdm

from dlbench.progress import Progress


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
