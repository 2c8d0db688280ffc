"""One job: an MLflow child run, a telemetry thread, a progress display and a worker process.

The orchestrator never imports a framework. It turns the worker's events into MLflow params, tags,
metrics and artifacts, and guarantees the run is closed (FINISHED, FAILED or KILLED) and the worker's
process group is gone whatever happens: crash, out-of-memory, timeout or Ctrl-C.
"""

from __future__ import annotations

import json
import logging
import math
import os
import sys
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dlbench import events, signals
from dlbench.backends.threads import thread_env
from dlbench.config import ConfigError, JobConfig, validate
from dlbench.core.secrets import mask
from dlbench.data.validate import check_dataset
from dlbench.environment import framework_env, host_facts
from dlbench.progress import Progress
from dlbench.results import LOSS_FLAG_TAG, SPREAD_FLAG, RepeatRecord, summarize_job, window_spans
from dlbench.supervisor import Worker, WorkerTimeout
from dlbench.telemetry.guards import GuardFindings, ProcessWatch, clock_guard, refuse_if_busy, shared_gpu
from dlbench.telemetry.host import HostReader
from dlbench.telemetry.nvml import NvmlReader
from dlbench.telemetry.plot import plot_telemetry
from dlbench.telemetry.sampler import Sampler
from dlbench.tracking.resume import CONFIG_HASH_TAG, config_hash, reuse_finished
from dlbench.tracking.run_logger import RunLogger, flatten
from dlbench.tracking.store import StoreError, open_store, resolve_uri
from dlbench.tracking.sweep import PARENT_ENV, STATE, adopt_mlflow_run, ensure_parent
from dlbench.tracking.ui_records import log_dataset_input

log = logging.getLogger("dlbench")
_said_no_gpu = False
LOG_TAIL_LINES = 200
MESSAGE_CHARS = 500  # failure.message: one line, short enough to read in the MLflow UI


@dataclass
class JobContext:
    """What the entry point knows about the job beyond its config."""

    output_dir: Path
    overrides: list[str]
    label: str
    config_yaml: str


def run_job(job: JobConfig, ctx: JobContext) -> str:
    """Run one job to completion; return its MLflow status. Raises KeyboardInterrupt after cleanup."""
    if STATE.abort:
        log.warning("%s: skipped (fail_fast=true and an earlier job failed)", ctx.label)
        return "SKIPPED"
    try:
        validate(job)
        data_facts = check_dataset(job)  # fills dataset.path from $dataset.path_env
        check_gpu_free(job)
    except ConfigError as exc:
        log.error("%s: config error: %s", ctx.label, exc)
        _tally(job, ctx, "FAILED")
        return "FAILED"
    try:
        if job.resume and (reused := _reuse(job)):
            log.info("%s: reused FINISHED run %s (resume=true): not run again", ctx.label, reused)
            _tally(job, ctx, "FINISHED")
            return "FINISHED"
        status = JobRunner(job, ctx, data_facts).run()
    except StoreError as exc:  # every later job would fail the same way
        log.error("%s: %s", ctx.label, exc)
        status, STATE.abort = "FAILED", True
    _tally(job, ctx, status)
    return status


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


def _parent_and_experiment(client: Any, experiment_id: str) -> tuple[str | None, str]:
    """The sweep's parent run id (made here if this is its first job) and the experiment to use."""
    parent = ensure_parent()  # a sweep's parent run is made with its first job's run
    if parent is not None:
        return parent.run_id, STATE.experiment_id
    return os.environ.get(PARENT_ENV), experiment_id  # a job a launcher started in its own process


def _reuse(job: JobConfig) -> str | None:
    """resume=true: the FINISHED run of this configuration, now counted by this sweep, if there is one."""
    client, experiment_id = open_store(resolve_uri(job.tracking.uri), job.tracking.experiment)
    parent_id, experiment_id = _parent_and_experiment(client, experiment_id)
    return reuse_finished(client, experiment_id, config_hash(job.to_dict()), parent_id)


def _tally(job: JobConfig, ctx: JobContext, status: str) -> None:
    if status == "FINISHED":
        STATE.finished.append(ctx.label)
    else:
        STATE.failed.append(ctx.label)
        STATE.abort = STATE.abort or job.fail_fast


@dataclass
class Failure:
    """Why a job did not finish: `kind` (crash, oom, timeout, config, interrupted) and one line."""

    kind: str
    message: str

    def __post_init__(self) -> None:
        lines = [line.strip() for line in self.message.strip().splitlines() if line.strip()]
        self.message = (lines[0] if lines else self.kind)[:MESSAGE_CHARS]


class JobRunner:
    def __init__(self, job: JobConfig, ctx: JobContext, data_facts: dict[str, Any] | None = None) -> None:
        self.job = job
        self.data_facts = data_facts or {}  # dataset facts from check_dataset, logged as params
        self.ctx = ctx
        self.records: list[RepeatRecord] = []
        self.dir = ctx.output_dir
        self.dir.mkdir(parents=True, exist_ok=True)
        self.run_log: RunLogger | None = None
        self.sampler: Sampler | None = None
        self.window_step = 0  # window/* series step, continuous across repeats
        self.watch: ProcessWatch | None = None  # other processes on the GPU (telemetry/guards.py)
        self.guard = GuardFindings()
        # What the framework must find in its environment before it starts its thread pools.
        self.thread_env = thread_env(job.framework.name, job.threads) if job.mode != "data" else {}

    @property
    def rec(self) -> RepeatRecord:
        return self.records[-1]

    # ---- lifecycle -------------------------------------------------------------------------
    def run(self) -> str:
        """All repeats of the job, each in a fresh worker; stop at the first failed repeat."""
        status, failure, samples, gpu = "FAILED", Failure("crash", "the orchestrator stopped"), [], None
        try:
            self.run_log = self._open_run()
            self.sampler, gpu = self._start_telemetry()
            for repeat in range(self.job.schedule.repeats):
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
            samples = self.sampler.stop() if self.sampler else []
            if gpu is not None:
                gpu.close()
            if self.run_log is not None:
                self._finish(status, failure, samples)
        return status

    def _run_worker(self, repeat: int) -> tuple[str, Failure | None]:
        self.records.append(RepeatRecord())
        label = self.ctx.label + (
            f" (repeat {repeat + 1}/{self.job.schedule.repeats})" if self.job.schedule.repeats > 1 else ""
        )
        s = self.job.schedule
        self.progress = Progress(label, s.warmup_steps, s.windows, s.steps_per_window)
        python = self.job.framework.python or sys.executable
        worker = Worker(python, self._write_job(), self.dir / "worker.log", self.thread_env)
        try:
            pid = worker.start()
            for reader in self.sampler.readers if self.sampler else ():
                if isinstance(reader, HostReader | ProcessWatch):
                    reader.attach(pid)
            deadline = time.monotonic() + self.job.timeout_s
            for event in worker.events(deadline):
                self._on_event(event)
            return self._classify(worker.wait())
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

    def _classify(self, returncode: int) -> tuple[str, Failure | None]:
        error = self.rec.error
        if returncode == 0 and self.rec.done is not None:
            return "FINISHED", None
        if error is not None:
            failure = Failure(error["kind"], error["message"])
            log.error("%s: %s: %s", self.ctx.label, failure.kind, failure.message)
            return "FAILED", failure
        reason = f"signal {-returncode}" if returncode < 0 else f"exit code {returncode}"
        message = f"worker died ({reason}); see worker_tail.log"
        log.error("%s: worker died (%s); see %s", self.ctx.label, reason, self.dir / "worker.log")
        return "FAILED", Failure("crash", message)

    # ---- events ----------------------------------------------------------------------------
    def _on_event(self, ev: dict[str, Any]) -> None:
        kind = ev["event"]
        rec, run = self.rec, self.run_log
        if kind == events.BUILT:
            rec.built = ev
            if len(self.records) == 1:
                run.tags({f"version.{k}": v for k, v in ev["versions"].items()} | {"device": ev["device"]})
                run.params({"model.params": ev["params"], "throughput_unit": ev["unit"]})
                # what the framework reports it uses, not the setting: the report compares only equals
                run.params({f"threads.{k}": v for k, v in ev.get("threads", {}).items()})
            self.progress.unit = ev["unit"]
            self.progress.message(f"built on {ev['device']} in {ev['import_s'] + ev['build_s']:.1f}s")
        elif kind == events.WARMUP_STEP:
            self.progress.warmup_step(ev["step"], ev["of"])
        elif kind == events.WARMUP_DONE:
            rec.warmup = ev
        elif kind == events.WINDOW:
            rec.windows.append(ev)
            series = {"window/throughput": ev["throughput"], "window/loss": ev["loss"]}
            run.metrics(series, step=self.window_step, timestamp=ev["t"])
            self.window_step += 1
            self.progress.window(ev["index"], ev["throughput"])
        elif kind == events.DONE:
            rec.done = ev
            if ev.get("gflops") is not None and len(self.records) == 1:
                run.params({"model.gflops": f"{ev['gflops']:.4f}"})
        elif kind == events.ERROR:
            rec.error = ev

    # ---- MLflow ----------------------------------------------------------------------------
    def _open_run(self) -> RunLogger:
        client, experiment_id = open_store(resolve_uri(self.job.tracking.uri), self.job.tracking.experiment)
        parent_id, experiment_id = _parent_and_experiment(client, experiment_id)
        if parent_id is None and (adopted := adopt_mlflow_run(client, experiment_id)):
            parent, experiment_id = adopted
            parent_id = parent.run_id
        j = self.job
        name = f"{j.framework.name}-{j.model.name}-{j.precision.name}-{j.mode}"
        tags = {
            "dlbench.kind": "job",
            "dlbench.output_dir": str(self.dir),
            CONFIG_HASH_TAG: config_hash(j.to_dict()),
        }
        tags.update({f"host.{k}": v for k, v in host_facts().items()})
        with signals.held():  # a signal here must not leave a RUNNING run nobody will close
            run = RunLogger.create(client, experiment_id, name, parent_id, tags)
            self.run_log = run
        run.params(flatten(j.to_dict()) | {"batch_size": j.batch_size} | self.data_facts)
        if "dataset.digest" in self.data_facts:  # a real dataset: MLflow's dataset views show it
            facts = self.data_facts
            context = "training" if j.mode == "train" else "evaluation"
            log_dataset_input(
                client, run.run_id, j.dataset.name, facts["dataset.digest"], facts["dataset.resolved_path"],
                context, facts.get("dataset.found_samples"),
            )  # fmt: skip
        (self.dir / "config.yaml").write_text(mask(self.ctx.config_yaml))
        overrides = "".join(f"- {mask(o)}\n" for o in self.ctx.overrides) or "[]\n"
        (self.dir / "overrides.yaml").write_text(overrides)
        run.artifact(self.dir / "config.yaml")
        run.artifact(self.dir / "overrides.yaml")
        log.info("%s: MLflow run %s", self.ctx.label, run.run_id)
        return run

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
            self.watch = ProcessWatch(gpu)
            readers += [gpu, self.watch]
            self.run_log.tags({f"gpu.{k}": v for k, v in gpu.info().items()})
        readers.append(HostReader())
        sampler = Sampler(readers, self.job.telemetry.interval_s, self.dir / "telemetry.csv")
        return sampler.start(), gpu

    def _finish(self, status: str, failure: Failure | None, samples: list[dict[str, float]]) -> None:
        """Log everything collected, whatever the outcome, then close the run."""
        run = self.run_log
        metrics: dict[str, float] = {}
        try:
            metrics = summarize_job(self.records, samples)
            self.guard = clock_guard(samples, window_spans(self.records))
            self.guard.merge(shared_gpu(self.watch.foreign() if self.watch else []))
            metrics.update(self.guard.metrics)
            if status != "FINISHED" and "throughput" in metrics:
                # a search on `throughput` must find finished runs only; the windows stay as a series
                metrics["throughput_partial"] = metrics.pop("throughput")
            run.metrics(metrics)
            self._log_repeats()
            run.series(samples)
            self._log_tags_and_artifacts(status, failure, samples, metrics)
        except Exception as exc:  # never let a logging problem hide the job's own outcome
            log.error("%s: logging to MLflow failed: %s", self.ctx.label, exc)
            status = "FAILED"
        finally:
            try:
                run.finish(status)
            except Exception as exc:
                log.error("%s: could not close the MLflow run: %s", self.ctx.label, exc)
        if status == "FINISHED":
            spread = (
                f", spread {100 * metrics['throughput_spread']:.1f}%"
                if "throughput_spread" in metrics
                else ""
            )
            log.info(
                "%s: %.2f %s/s (p5 %.2f, p95 %.2f%s)",
                self.ctx.label,
                metrics["throughput"],
                self.progress.unit,
                metrics["throughput_p05"],
                metrics["throughput_p95"],
                spread,
            )

    def _log_repeats(self) -> None:
        """Per-repeat figures as series (step = repeat index) when a job ran more than once."""
        if self.job.schedule.repeats < 2:
            return
        for i, rec in enumerate(self.records):
            if rec.windows:
                series = {"repeat/throughput": rec.median_throughput}
                self.run_log.metrics(series, step=i, timestamp=rec.windows[-1]["t"])

    def _log_tags_and_artifacts(
        self, status: str, failure: Failure | None, samples: list[dict[str, float]], metrics: dict[str, float]
    ) -> None:
        run = self.run_log
        done = next((r.done for r in reversed(self.records) if r.done), None)
        built = next((r.built for r in self.records if r.built), None)
        tags: dict[str, Any] = {"dlbench.status": status}
        if failure:
            tags["failure"], tags["failure.message"] = failure.kind, failure.message
        if metrics.get("throughput_spread", 0.0) > SPREAD_FLAG:
            tags["dlbench.spread_flag"] = "high"
            log.warning(
                "%s: repeats differ by %.1f%% (> %.0f%%)",
                self.ctx.label,
                100 * metrics["throughput_spread"],
                100 * SPREAD_FLAG,
            )
        if not math.isfinite(metrics.get("loss_last", 0.0)):
            tags[LOSS_FLAG_TAG] = "non-finite"
            log.warning(
                "%s: the loss is %s at the last window: the training diverged, so this is not a sound "
                "training throughput (the GPU may have skipped or short-cut work)",
                self.ctx.label,
                metrics["loss_last"],
            )
        tags.update(self.guard.tags)
        for warning in self.guard.warnings:
            log.warning("%s: %s", self.ctx.label, warning)
        precision, run_facts = (done["precision"], done.get("run", {})) if done else ({}, {})
        tags.update({f"precision.{k}": v for k, v in precision.items()})
        tags.update({f"run.{k}": v for k, v in run_facts.items()})
        run.tags(tags)
        warmups = [span for r in self.records if (span := r.warmup_span())]
        png = self.dir / "telemetry.png"
        if plot_telemetry(samples, png, self.records[0].t_start, warmups, f"{self.ctx.label}: {run.run_id}"):
            run.artifact(png)
        run.artifact(self.dir / "telemetry.csv")
        env = {
            "host": host_facts(),
            "versions": built["versions"] if built else {},
            "precision": precision,
            "run": run_facts,
            "env": framework_env() | self.thread_env,
        }
        (self.dir / "environment.json").write_text(json.dumps(env, indent=2))
        run.artifact(self.dir / "environment.json")
        log_path = self.dir / "worker.log"
        run.artifact(log_path)
        if status != "FINISHED" and log_path.exists():
            tail = deque(log_path.read_text(errors="replace").splitlines(), maxlen=LOG_TAIL_LINES)
            run.text("\n".join(tail) + "\n", "worker_tail.log")
