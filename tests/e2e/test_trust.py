"""Issue #10 through the real CLI and a real sqlite store: signals whatever was inherited, a store that
survives concurrent first use and interrupts, no secret recorded, strict keys, readable failures,
threads recorded as the framework reports them."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from tests.conftest import ROOT, TINY
from tests.e2e.test_cli import children_of, sweep_parent, workers_under
from tests.e2e.test_mlflow_server import server  # noqa: F401  (fixture)

pytestmark = pytest.mark.slow
LONG_JOB = ["+experiment=smoke", "model=vgg16", "model.image_size=224", "schedule.windows=50"]


class Started:
    """A CLI process started through bash (so the test can set its inherited signal disposition); its
    output is read in a thread so the test can wait for a log line instead of sleeping."""

    def __init__(
        self, cli, overrides: list[str], ignore: str | None = None, last: tuple[str, ...] = ()
    ) -> None:
        trap = f'trap "" {ignore}; ' if ignore else ""
        command = " ".join(f"'{a}'" for a in [*cli.args(overrides), *last])  # `last` wins over cli's store
        self.proc = subprocess.Popen(
            ["bash", "-c", f"{trap}exec {command}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=cli.env(),
            cwd=ROOT,
            start_new_session=True,  # its own group: the test can always kill all of it
        )
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line)

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def wait_for(self, pattern: str, timeout: float = 300) -> None:
        deadline = time.monotonic() + timeout
        while not re.search(pattern, self.output):
            assert self.proc.poll() is None, (
                f"exited {self.proc.returncode} before {pattern!r}: {self.output[-3000:]}"
            )
            assert time.monotonic() < deadline, f"no {pattern!r} after {timeout}s: {self.output[-3000:]}"
            time.sleep(0.1)

    def finish(self, timeout: float = 120) -> int:
        code = self.proc.wait(timeout=timeout)
        self.reader.join(timeout=10)
        return code

    def kill(self) -> None:
        """Whatever happened: nothing the test started outlives it (workers run in their own group)."""
        with contextlib.suppress(psutil.NoSuchProcess):
            for child in psutil.Process(self.proc.pid).children(recursive=True):
                child.kill()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)


@pytest.mark.parametrize("inherited", ["default", "ignored"])
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_stops_the_sweep_whatever_was_inherited(cli, sig, inherited):
    started = Started(cli, LONG_JOB, ignore=sig.name.removeprefix("SIG") if inherited == "ignored" else None)
    try:
        started.wait_for(r"warm-up step 1/")  # the worker is running the model
        workers = workers_under(cli.tmp)
        assert workers
        started.proc.send_signal(sig)
        code = started.finish(timeout=120)
        assert code == 128 + sig, started.output[-3000:]
        _, alive = psutil.wait_procs(workers, timeout=10)
        assert alive == [] and workers_under(cli.tmp) == []
        assert "Traceback" not in started.output
        assert len([x for x in started.output.splitlines() if f"stopped by {sig.name}" in x]) == 1
        runs = cli.runs()
        parent = sweep_parent(runs)
        (kid,) = children_of(runs, parent.info.run_id)
        assert parent.info.status == "KILLED" and kid.info.status == "KILLED"
        assert kid.data.tags["failure"] == "interrupted" and sig.name in kid.data.tags["failure.message"]
    finally:
        started.kill()


def test_a_second_ctrl_c_during_cleanup_leaves_no_running_run(cli):
    started = Started(cli, LONG_JOB)
    try:
        started.wait_for(r"window 1/50")
        started.proc.send_signal(signal.SIGINT)
        time.sleep(0.3)
        started.proc.send_signal(signal.SIGINT)
        time.sleep(0.3)
        if started.proc.poll() is None:
            started.proc.send_signal(signal.SIGINT)
        assert started.finish(timeout=120) == 130, started.output[-3000:]
        assert "Traceback" not in started.output
        runs = cli.runs()
        assert {r.info.status for r in runs} == {"KILLED"}, [(r.info.run_name, r.info.status) for r in runs]
        (kid,) = [r for r in runs if r.data.tags.get("dlbench.kind") == "job"]
        # an unfinished job keeps its windows, but not the headline figure searches use
        assert "throughput" not in kid.data.metrics and kid.data.metrics["throughput_partial"] > 0
        assert len(cli.client().get_metric_history(kid.info.run_id, "window/throughput")) >= 1
        assert workers_under(cli.tmp) == []
    finally:
        started.kill()


def test_ctrl_c_while_starting_is_one_line_and_leaves_no_store(cli):
    started = Started(cli, TINY)
    try:
        time.sleep(1.0)  # inside the imports (hydra, mlflow: several seconds here) or just after
        started.proc.send_signal(signal.SIGINT)
        assert started.finish(timeout=120) == 130, started.output[-3000:]
        assert "Traceback" not in started.output and "KeyboardInterrupt" not in started.output
        assert len(started.output.strip().splitlines()) <= 3, started.output
    finally:
        started.kill()


def test_ctrl_c_while_the_store_is_created_leaves_no_half_made_store(cli):
    started = Started(cli, TINY)
    try:
        deadline = time.monotonic() + 300
        while not list(cli.tmp.glob(".mlflow.db.*.creating")):  # the migration has begun
            assert started.proc.poll() is None and time.monotonic() < deadline, started.output[-3000:]
            time.sleep(0.01)
        started.proc.send_signal(signal.SIGINT)
        assert started.finish(timeout=120) == 130, started.output[-3000:]
    finally:
        started.kill()
    assert not cli.db.exists() or _tables(cli.db) > 60
    res = cli.run(TINY)  # the store is made (or found whole) by the next run
    assert res.returncode == 0, res.stderr[-3000:]
    assert len(children_of(cli.runs(), sweep_parent(cli.runs()).info.run_id)) == 1


def _tables(db: Path) -> int:
    with sqlite3.connect(db) as c:
        return c.execute("select count(*) from sqlite_master where type='table'").fetchone()[0]


def test_a_half_made_store_is_one_line_naming_the_file_and_the_fix(cli):
    with sqlite3.connect(cli.db) as c:  # what an interrupted migration by an older dlbench left
        c.execute("create table experiments (experiment_id integer primary key, name varchar(256))")
    res = cli.run(TINY)
    out = res.stdout + res.stderr
    assert res.returncode == 1 and "Traceback" not in out
    (line,) = [x for x in out.splitlines() if "cannot be opened" in x]
    assert str(cli.db) in line and f"mv {cli.db} {cli.db}.broken" in line


@pytest.mark.parametrize("sweeps", [2, 4])
def test_sweeps_started_together_on_a_new_store_all_land(tmp_path, sweeps):
    res = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "tools" / "concurrent_sweeps.py"), "--sweeps", str(sweeps),
         "--store", str(tmp_path / "store"), "--jobs", "1", "+experiment=smoke", "model=resnet_cifar",
         "model.depth=8"],
        capture_output=True, text=True, timeout=1200, cwd=ROOT,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    assert f"all {sweeps} sweeps landed" in res.stdout


@pytest.mark.parametrize(
    ("override", "suggestion"),
    [
        ("precison=amp", "precision"),
        ("+precison=amp", "precision"),
        ("model.batchsize=3", "model.batch_size"),
    ],
)
def test_an_unknown_key_is_refused_naming_the_closest_keys(cli, override, suggestion):
    res = cli.run([*TINY, override])
    out = res.stdout + res.stderr
    assert res.returncode == 2 and "Traceback" not in out
    (line,) = [x for x in out.splitlines() if "unknown key" in x]
    assert f"did you mean {suggestion}" in line
    assert not cli.db.exists()


def test_a_sweep_given_a_key_of_another_framework_is_refused_before_any_job(cli):
    res = cli.run([*TINY, "framework=jax,torch", "framework.prng=threefry2x32"])
    out = res.stdout + res.stderr
    assert res.returncode == 2 and "Traceback" not in out and "HYDRA_FULL_ERROR" not in out
    (line,) = [x for x in out.splitlines() if "framework.prng" in x]
    assert "a key of framework=jax only, and this command composes framework=torch" in line
    assert not cli.db.exists()  # the JAX job, first in the sweep, never ran


@pytest.mark.parametrize("bad", ["schedule.windows=-1", "device=gpu"])
def test_a_sweep_refused_by_validation_leaves_no_empty_parent(cli, bad):
    res = cli.run([*TINY, bad])
    assert res.returncode == 1 and "Traceback" not in res.stdout + res.stderr
    assert "config error" in res.stdout + res.stderr
    if cli.db.exists():
        exp = cli.client().get_experiment_by_name("dlbench")
        assert exp is None or cli.client().search_runs([exp.experiment_id]) == []


def test_a_crashed_job_has_a_one_line_message_and_no_headline_throughput(cli):
    res = cli.run(["debug.fault=abort", *TINY], multirun=False)
    assert res.returncode == 1
    (run,) = cli.runs()
    tags, m = run.data.tags, run.data.metrics
    assert tags["failure"] == "crash" and "\n" not in tags["failure.message"]
    assert "worker died" in tags["failure.message"]
    assert "throughput" not in m
    best = cli.client().search_runs([run.info.experiment_id], "metrics.throughput > 0")
    assert best == []


def test_threads_are_recorded_as_the_framework_reports_them(cli):
    res = cli.run(["framework=torch,mxnet", "threads=1", *TINY])
    assert res.returncode == 0, res.stderr[-3000:]
    runs = cli.runs()
    kids = children_of(runs, sweep_parent(runs).info.run_id)
    for kid in kids:
        assert kid.data.params["threads.intra_op"] == "1" and kid.data.params["threads.inter_op"] == "1"
    report = (cli.tmp / "sweep" / "report" / "report.md").read_text()
    assert "CPU threads" in report and "| 1/1 |" in report
    parent = sweep_parent(runs).info.run_id
    assert f"`{parent}` (FINISHED)" in report  # written before the close: the status the parent then got


def test_an_interrupt_before_any_run_says_nothing_was_recorded(cli):
    """The tracking server accepts the connection and never answers: the sweep waits before its first run;
    Ctrl-C then ends it with 130 and says no run had been made (not that runs were marked KILLED)."""
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)  # accepted by the kernel, never read: every request hangs
    port = listener.getsockname()[1]
    started = Started(cli, ["framework=torch", *TINY], last=(f"tracking.uri=http://127.0.0.1:{port}",))
    try:
        started.wait_for(r"#0 : ")  # Hydra launched the first job: past the start-up handler
        time.sleep(3)
        started.proc.send_signal(signal.SIGINT)
        assert started.finish() == 130, started.output[-3000:]
    finally:
        started.kill()
        listener.close()
    assert "no run had been made yet, so nothing was recorded" in started.output, started.output[-3000:]
    assert "marked KILLED" not in started.output


def test_a_dead_tracking_server_fails_in_seconds_in_one_masked_line(cli):
    """Nothing listens on the port: the sweep stops at its first job with one line naming the server (its
    token masked) instead of MLflow's retries with back-off, which took over four minutes."""
    import socket

    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()  # a port nothing listens on
    uri = f"http://u:pw321@127.0.0.1:{port}/?token=tok789"
    t0 = time.monotonic()
    started = Started(cli, ["framework=torch", *TINY], last=(f'tracking.uri="{uri}"',))
    try:
        code = started.finish(timeout=120)
    finally:
        started.kill()
    elapsed = time.monotonic() - t0
    out = started.output
    assert code == 1, out[-3000:]
    assert elapsed < 30, f"{elapsed:.0f} s: {out[-2000:]}"
    [line] = [x for x in out.splitlines() if "is not reachable" in x]
    assert f"127.0.0.1:{port}" in line and "start it (make server)" in line
    assert "pw321" not in line and "tok789" not in line and "Traceback" not in out


def test_a_worker_killed_by_sigkill_leaves_its_last_output_in_the_logs_it_names(cli):
    started = Started(cli, [*TINY, "debug.fault=hang"])
    worker_log = cli.tmp / "sweep" / "0" / "worker.log"
    try:
        deadline = time.monotonic() + 300
        while "until killed" not in (worker_log.read_text() if worker_log.exists() else ""):
            assert started.proc.poll() is None and time.monotonic() < deadline, started.output[-3000:]
            time.sleep(0.2)
        (worker,) = workers_under(cli.tmp)
        worker.kill()  # SIGKILL: nothing of the worker runs after it
        assert started.finish(timeout=120) == 1, started.output[-3000:]
    finally:
        started.kill()
    (line,) = [x for x in started.output.splitlines() if "worker died (signal 9)" in x]
    assert f"see {worker_log}" in line and "run.log" in line
    (kid,) = [r for r in cli.runs() if r.data.tags.get("dlbench.kind") == "job"]
    assert "see worker_tail.log" in kid.data.tags["failure.message"]
    client = cli.client()
    files = {a.path for a in client.list_artifacts(kid.info.run_id)}
    assert {"worker.log", "worker_tail.log", "run.log"} <= files
    get = lambda name: Path(client.download_artifacts(kid.info.run_id, name, str(cli.tmp))).read_text()  # noqa: E731
    assert "until killed" in get("worker_tail.log") and "(stderr)" in get("worker_tail.log")
    assert "warm-up step 1/" in get("run.log")


def test_a_worker_that_printed_nothing_says_so_and_names_the_jobs_log(cli):
    res = cli.run(["debug.fault=abort", *TINY])
    assert res.returncode == 1
    (line,) = [x for x in (res.stdout + res.stderr).splitlines() if "worker died" in x]
    assert (
        "it printed nothing (worker.log is empty)" in line
        and str(cli.tmp / "sweep" / "0" / "run.log") in line
    )
    (kid,) = [r for r in cli.runs() if r.data.tags.get("dlbench.kind") == "job"]
    assert "run.log" in {a.path for a in cli.client().list_artifacts(kid.info.run_id)}


@pytest.mark.parametrize("bad", ["dataset.path=/data/café", "tracking.uri=http://h:5000/?a=1"])
def test_a_value_hydra_cannot_read_is_one_line_with_the_quoting_hint(cli, bad):
    res = cli.run([*TINY, bad])
    out = res.stdout + res.stderr
    assert res.returncode == 2 and "Traceback" not in out and "LexerNoViableAltException" not in out
    assert out.strip().count("\n") == 0 and "quote the value for Hydra" in out, out
    assert not cli.db.exists()
