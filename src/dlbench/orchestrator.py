"""One job's lifecycle: checks, a telemetry thread, a progress display and a worker process per repeat.

The orchestrator never imports a framework. It collects the worker's events into RepeatRecords, hands
them to the job's MLflow recording (dlbench.recording), and guarantees the run is closed (FINISHED,
FAILED or KILLED) and the worker's process group is gone whatever happens: crash, out-of-memory,
timeout, SIGINT or SIGTERM. The sweep's tally is passed in by the entry point, not kept in a global.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from dlbench import events, signals
from dlbench.backends import capability
from dlbench.backends.interpreter import worker_python
from dlbench.backends.threads import rank_threads, worker_env
from dlbench.config import JobConfig, validate
from dlbench.core.execution import apply_execution, cell_label
from dlbench.core.names import GPU_NAME_TAG, NOT_RUN, SRC_DIR
from dlbench.core.secrets import mask
from dlbench.data.validate import check_dataset
from dlbench.environment import cpu_tags
from dlbench.errors import ConfigError
from dlbench.progress import Progress
from dlbench.recording import JobRecording, job_logs, parent_and_experiment
from dlbench.results import Failure, RepeatRecord
from dlbench.supervisor import Worker, WorkerTimeout
from dlbench.telemetry.guards import ProcessWatch, refuse_if_busy
from dlbench.telemetry.host import HostReader
from dlbench.telemetry.nvml import NvmlReader
from dlbench.telemetry.sampler import Sampler
from dlbench.tracking.resume import config_hash, reuse_finished
from dlbench.tracking.store import StoreError, open_store, resolve_uri
from dlbench.tracking.sweep import SweepTally, record_not_run

log = logging.getLogger("dlbench")
_said_no_gpu = False


@dataclass
class JobContext:
    """What the entry point knows about the job beyond its config."""

    output_dir: Path
    overrides: list[str]
    label: str
    config_yaml: str


def run_job(job: JobConfig, ctx: JobContext, tally: SweepTally) -> str:
    """Run one job to completion, count it in `tally`; return its MLflow status. Raises
    KeyboardInterrupt (signals.Interrupted) after cleanup."""
    signals.check()  # a safe point: between jobs, before anything of this one is made
    if tally.abort:
        log.warning("%s: skipped (fail_fast=true and an earlier job failed)", ctx.label)
        return "SKIPPED"
    try:
        validate(job)
        apply_execution(job.framework, job.execution)  # execution=compiled: torch compile, tf xla
        if job.framework.python is None:  # pythons.<framework>: this framework's own environment
            job.framework.python = job.pythons.get(job.framework.name)
        can = capability.check(job)
        if can.reason is not None:
            return not_run(job, ctx, can.reason, tally)
        data_facts = check_dataset(job)  # fills dataset.path from $dataset.path_env
        check_gpu_free(job)
        worker_python(job.framework)  # an interpreter for the framework: one line if there is none
    except ConfigError as exc:
        log.error("%s: config error: %s", ctx.label, exc)
        tally.add(ctx.label, "FAILED", job.fail_fast)
        return "FAILED"
    for note in can.notes:
        log.warning("%s: %s", ctx.label, note)
    try:
        statuses = []
        for one, one_ctx in per_seed(job, ctx):
            if one.resume and (reused := _reuse(one)):
                log.info("%s: reused FINISHED run %s (resume=true): not run again", one_ctx.label, reused)
                statuses.append("FINISHED")
                continue
            statuses.append(JobRunner(one, one_ctx, data_facts, can.notes).run())
        status = next((s for s in statuses if s != "FINISHED"), "FINISHED")
    except StoreError as exc:  # every later job would fail the same way
        log.error("%s: %s", ctx.label, exc)
        status, tally.abort = "FAILED", True
    tally.add(ctx.label, status, job.fail_fast)
    return status


def not_run(job: JobConfig, ctx: JobContext, reason: str, tally: SweepTally) -> str:
    """A cell this machine cannot run: one line, a note on the sweep's parent for the report, no run."""
    log.warning("%s: not run on this machine: %s", ctx.label, reason)
    cell = cell_label(job)
    cell += f" device={job.device}" if job.device != "auto" else ""
    try:
        record_not_run(config_hash(job.to_dict()), cell, reason)
    except StoreError as exc:  # the line above already told the user; the store's problem comes next
        log.error("%s: %s", ctx.label, exc)
    tally.add(ctx.label, NOT_RUN, job.fail_fast)
    return NOT_RUN


def per_seed(job: JobConfig, ctx: JobContext) -> list[tuple[JobConfig, JobContext]]:
    """mode=converge with `schedule.seeds`: the job once per seed, each its own MLflow run (param
    schedule.seed) and output folder, so the report averages runs that differ only in their seed."""
    if job.mode != "converge" or not job.schedule.seeds:
        return [(job, ctx)]
    out = []
    for seed in job.schedule.seeds:
        one = JobConfig.from_dict(job.to_dict())
        one.schedule.seed = seed
        out.append(
            (one, replace(ctx, output_dir=ctx.output_dir / f"seed{seed}", label=f"{ctx.label} seed={seed}"))
        )
    return out


def check_gpu_free(job: JobConfig) -> None:
    """guard.exclusive=true: refuse (GpuBusyError, a ConfigError) while another process uses the GPU."""
    if not job.guard.exclusive or job.device == "cpu":
        return
    gpu, why = NvmlReader.open(os.environ.get("CUDA_VISIBLE_DEVICES"))
    if gpu is None:
        log.info("guard.exclusive: %s; nothing to check", why)
        return
    try:
        refuse_if_busy(gpu, exclusive=True)
    finally:
        gpu.close()


def _reuse(job: JobConfig) -> str | None:
    """resume=true: the FINISHED run of this configuration measured on this machine, now counted by this
    sweep, if there is one."""
    client, experiment_id = open_store(resolve_uri(job.tracking.uri), job.tracking.experiment)
    parent_id, experiment_id = parent_and_experiment(experiment_id)
    return reuse_finished(client, experiment_id, config_hash(job.to_dict()), parent_id, this_machine(job))


def this_machine(job: JobConfig) -> dict[str, str]:
    """The tags that name the hardware a run measures (report/load.machine_label reads the same): the CPU
    model and the CPUs this process may use, and for a GPU job the first visible GPU's model."""
    out = cpu_tags()
    if job.device != "cpu":
        gpu, _ = NvmlReader.open(os.environ.get("CUDA_VISIBLE_DEVICES"))
        if gpu is not None:
            try:
                out[GPU_NAME_TAG] = gpu.info()["gpu0_name"]
            finally:
                gpu.close()
    return out


class JobRunner:
    """All repeats of one job, each in a fresh worker, with telemetry around them."""

    def __init__(
        self,
        job: JobConfig,
        ctx: JobContext,
        data_facts: dict[str, Any] | None = None,
        notes: list[str] | None = None,
    ) -> None:
        self.job = job
        self.data_facts = data_facts or {}  # dataset facts from check_dataset, logged as params
        self.notes = notes or []  # what the capability check said of this machine (emulated bf16), a tag
        self.ctx = ctx
        self.records: list[RepeatRecord] = []
        self.dir = ctx.output_dir
        self.dir.mkdir(parents=True, exist_ok=True)
        self.sampler: Sampler | None = None
        # What the framework must find in its environment before it starts (thread pools, GPU memory).
        fw = job.framework.name
        threads = rank_threads(job.threads, job.devices, fw)  # devices>1: each rank's share
        self.worker_env = worker_env(fw, threads, job.devices) if job.mode != "data" else {}
        self.recording = JobRecording(job, ctx.label, self.dir, self.worker_env)

    @property
    def rec(self) -> RepeatRecord:
        return self.records[-1]

    def run(self) -> str:
        """All repeats; stop at the first failed one. The run is closed whatever happens."""
        status, failure, samples, gpu = "FAILED", Failure("crash", "the orchestrator stopped"), [], None
        try:
            self.recording.open(self.ctx.config_yaml, self.ctx.overrides, self.data_facts, self.notes)
            self.sampler, gpu = self._start_telemetry()
            for repeat in range(self.job.schedule.repeats):
                signals.check()  # a safe point: the run exists and will be closed KILLED
                status, failure = self._run_worker(repeat)
                if status != "FINISHED":
                    break
        except KeyboardInterrupt as exc:
            status, failure = "KILLED", Failure("interrupted", f"stopped by {getattr(exc, 'name', 'SIGINT')}")
            raise
        except Exception as exc:  # a bug or a store problem: the run is still closed, FAILED
            failure = Failure("crash", f"orchestrator error: {type(exc).__name__}: {exc}")
            raise
        finally:
            with signals.held():  # closing the run is not cut short by the alarm
                samples = self.sampler.stop() if self.sampler else []
                if gpu is not None:
                    gpu.close()
                if self.recording.run is not None:
                    self.recording.finish(status, failure, self.records, samples)
        return status

    def _run_worker(self, repeat: int) -> tuple[str, Failure | None]:
        self.records.append(RepeatRecord())
        label = self.ctx.label + (
            f" (repeat {repeat + 1}/{self.job.schedule.repeats})" if self.job.schedule.repeats > 1 else ""
        )
        s = self.job.schedule
        if self.job.mode == "converge":  # one window per epoch, no warm-up
            self.progress = Progress(label, 0, s.epochs, 1)
        elif self.job.mode == "serve":  # LoadGen paces the test: no windows to count
            self.progress = Progress(label, 0, 1, 1)
        else:
            self.progress = Progress(label, s.warmup_steps, s.windows, s.steps_per_window)
        worker = Worker(
            worker_python(self.job.framework), self._write_job(), self.dir / "worker.log", self.worker_env
        )
        try:
            pid = worker.start()
            for reader in self.sampler.readers if self.sampler else ():
                if isinstance(reader, HostReader | ProcessWatch):
                    reader.attach(pid)
            deadline = time.monotonic() + self.job.timeout_s
            for event in worker.events(deadline, self.progress.quiet):
                self._on_event(event)
            return self._classify(worker.wait(), worker.python)
        except WorkerTimeout:
            message = f"timed out after {self.job.timeout_s}s (timeout_s); worker killed"
            log.error("%s: %s", label, message)
            return "FAILED", Failure("timeout", message)
        except ConfigError as exc:
            log.error("%s: %s", label, exc)
            return "FAILED", Failure("config", str(exc))
        finally:
            worker.kill()
            self.progress.close()

    def _classify(self, returncode: int, python: str) -> tuple[str, Failure | None]:
        error = self.rec.error
        if returncode == 0 and self.rec.done is not None:
            return "FINISHED", None
        if error is not None:
            failure = Failure(error["kind"], error["message"])
            log.error("%s: %s: %s", self.ctx.label, failure.kind, failure.message)
            return "FAILED", failure
        reason = f"signal {-returncode}" if returncode < 0 else f"exit code {returncode}"
        lost = self._lost_dlbench(python)
        if lost is not None:
            log.error("%s: %s", self.ctx.label, lost)
            return "FAILED", Failure("config", lost)
        worker_log, job_log = self.dir / "worker.log", ", ".join(str(p) for p in job_logs()) or "the console"
        if worker_log.exists() and worker_log.stat().st_size > 0:
            here, there = (
                f"see {worker_log} and {job_log}",
                "see worker_tail.log (its last lines) and the job's log",
            )
        else:
            here = f"it printed nothing (worker.log is empty); the job's log: {job_log}"
            there = "it printed nothing; see the job's log"
        log.error("%s: worker died (%s); %s", self.ctx.label, reason, here)
        return "FAILED", Failure("crash", f"worker died ({reason}); {there}")

    def _lost_dlbench(self, python: str) -> str | None:
        """The one line for an interpreter that could not import dlbench at all: the worker is started with
        this checkout's src/ on PYTHONPATH, so a wrapper script (framework.python, pythons.<name>) that sets
        PYTHONPATH instead of extending it loses it, and the worker dies before it can say why."""
        worker_log = self.dir / "worker.log"
        text = worker_log.read_text(errors="replace") if worker_log.exists() else ""
        if "No module named 'dlbench'" not in text:
            return None
        return (
            f"framework.python={python} could not import dlbench: it was started with {SRC_DIR} on "
            "PYTHONPATH; a wrapper must extend PYTHONPATH, not replace it "
            '(export PYTHONPATH="/its/paths${PYTHONPATH:+:$PYTHONPATH}")'
        )

    def _on_event(self, ev: dict[str, Any]) -> None:
        kind, rec, first = ev["event"], self.rec, len(self.records) == 1
        if kind == events.BUILT:
            rec.built = ev
            self.recording.built(ev, first)
            self.progress.unit = ev["unit"]
            self.progress.built(f"built on {ev['device']} in {ev['import_s'] + ev['build_s']:.1f}s")
        elif kind == events.WARMUP_STEP:
            self.progress.warmup_step(ev["step"], ev["of"])
        elif kind == events.WARMUP_DONE:
            rec.warmup = ev
            if "steps_per_window" in ev:  # schedule.min_timed_s may have lengthened the windows
                self.progress.timed_steps(ev["steps_per_window"])
        elif kind == events.WINDOW:
            rec.windows.append(ev)
            self.recording.window(ev)
            self.progress.window(ev["index"], ev["throughput"])
        elif kind == events.EPOCH:
            rec.epochs.append(ev)
            self.recording.epoch(ev)
            self.progress.message(f"epoch {ev['epoch']}: {ev['metric']} {ev['value']:.4f}")
        elif kind == events.SERVED:
            rec.served = ev
            self.progress.message(f"LoadGen's test: {ev['samples']} samples in {ev['seconds']:.1f}s")
        elif kind == events.DONE:
            rec.done = ev
            self.recording.done(ev, first)
        elif kind == events.ERROR:
            rec.error = ev

    def _write_job(self) -> Path:
        path = self.dir / "job.json"
        path.write_text(mask(json.dumps(self.job.to_dict(), indent=1)))  # the worker needs no credentials
        return path

    def _start_telemetry(self) -> tuple[Sampler | None, NvmlReader | None]:
        global _said_no_gpu
        if not self.job.telemetry.enabled:
            return None, None
        readers: list[Any] = []
        gpu = None
        if self.job.device != "cpu":
            gpu, why = NvmlReader.open(os.environ.get("CUDA_VISIBLE_DEVICES"))
            if gpu is None and not _said_no_gpu:
                log.info("telemetry: %s; sampling the host only", why)
                _said_no_gpu = True
        if gpu is not None:
            self.recording.watch = ProcessWatch(gpu)  # other processes on the GPU (telemetry/guards.py)
            readers += [gpu, self.recording.watch]
            self.recording.gpu(gpu.info())
        readers.append(HostReader())
        sampler = Sampler(readers, self.job.telemetry.interval_s, self.dir / "telemetry.csv")
        return sampler.start(), gpu
