"""One job: an MLflow child run, a telemetry thread, a progress display and a worker process.

The orchestrator never imports a framework. It turns the worker's events into MLflow params, tags,
metrics and artifacts, and guarantees the run is closed (FINISHED, FAILED or KILLED) and the worker's
process group is gone whatever happens: crash, out-of-memory, timeout or Ctrl-C.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dlbench import events
from dlbench.config import ConfigError, JobConfig, validate
from dlbench.data.validate import check_dataset
from dlbench.environment import host_facts
from dlbench.progress import Progress
from dlbench.supervisor import Worker, WorkerTimeout
from dlbench.telemetry.host import HostReader
from dlbench.telemetry.nvml import NvmlReader
from dlbench.telemetry.plot import plot_telemetry
from dlbench.telemetry.sampler import Sampler, summarize
from dlbench.timing import summarize as summarize_windows
from dlbench.tracking.run_logger import RunLogger, flatten
from dlbench.tracking.store import open_store, resolve_uri
from dlbench.tracking.sweep import PARENT_ENV, STATE, adopt_mlflow_run

log = logging.getLogger("dlbench")
_said_no_gpu = False
LOG_TAIL_LINES = 200


@dataclass
class JobContext:
    """What the entry point knows about the job beyond its config."""

    output_dir: Path
    overrides: list[str]
    label: str
    config_yaml: str


@dataclass
class JobRecord:
    """Everything the worker told us, kept as it arrives so a failure loses nothing."""

    t_start: float = field(default_factory=time.time)
    built: dict[str, Any] | None = None
    warmup: dict[str, Any] | None = None
    windows: list[dict[str, Any]] = field(default_factory=list)
    done: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    first_step_t: float | None = None

    def timed_span(self) -> tuple[float, float] | None:
        if not self.windows:
            return None
        return self.windows[0]["t_start"], self.windows[-1]["t"]


def run_job(job: JobConfig, ctx: JobContext) -> str:
    """Run one job to completion; return its MLflow status. Raises KeyboardInterrupt after cleanup."""
    if STATE.abort:
        log.warning("%s: skipped (fail_fast=true and an earlier job failed)", ctx.label)
        return "SKIPPED"
    try:
        data_facts = check_dataset(job)  # first: it fills dataset.path from $dataset.path_env
        validate(job)
    except ConfigError as exc:
        log.error("%s: config error: %s", ctx.label, exc)
        _tally(job, ctx, "FAILED")
        return "FAILED"
    status = JobRunner(job, ctx, data_facts).run()
    _tally(job, ctx, status)
    return status


def _tally(job: JobConfig, ctx: JobContext, status: str) -> None:
    if status == "FINISHED":
        STATE.finished.append(ctx.label)
    else:
        STATE.failed.append(ctx.label)
        STATE.abort = STATE.abort or job.fail_fast


class JobRunner:
    def __init__(self, job: JobConfig, ctx: JobContext, data_facts: dict[str, Any] | None = None) -> None:
        self.job = job
        self.data_facts = data_facts or {}  # dataset facts from check_dataset, logged as params
        self.ctx = ctx
        self.rec = JobRecord()
        self.dir = ctx.output_dir
        self.dir.mkdir(parents=True, exist_ok=True)
        self.run_log: RunLogger | None = None
        self.progress = Progress(
            ctx.label, job.schedule.warmup_steps, job.schedule.windows, job.schedule.steps_per_window
        )

    # ---- lifecycle -------------------------------------------------------------------------
    def run(self) -> str:
        self.run_log = self._open_run()
        sampler, gpu = self._start_telemetry()
        worker = Worker(
            self.job.framework.python or sys.executable, self._write_job(), self.dir / "worker.log"
        )
        status, failure = "FAILED", "crash"
        try:
            pid = worker.start()
            for reader in sampler.readers if sampler else ():
                if isinstance(reader, HostReader):
                    reader.attach(pid)
            deadline = time.monotonic() + self.job.timeout_s
            for event in worker.events(deadline):
                self._on_event(event)
            status, failure = self._classify(worker.wait())
        except WorkerTimeout:
            status, failure = "FAILED", "timeout"
            log.error(
                "%s: timed out after %ss (timeout_s); worker killed", self.ctx.label, self.job.timeout_s
            )
        except ConfigError as exc:
            status, failure = "FAILED", "config"
            log.error("%s: %s", self.ctx.label, exc)
        except KeyboardInterrupt:
            status, failure = "KILLED", "interrupted"
            log.warning("%s: interrupted; stopping the worker", self.ctx.label)
            raise
        finally:
            worker.kill()
            self.progress.close()
            samples = sampler.stop() if sampler else []
            if gpu is not None:
                gpu.close()
            self._finish(status, failure, samples)
        return status

    def _classify(self, returncode: int) -> tuple[str, str | None]:
        error = self.rec.error
        if returncode == 0 and self.rec.done is not None:
            return "FINISHED", None
        if error is not None:
            log.error("%s: %s: %s", self.ctx.label, error["kind"], error["message"].splitlines()[0])
            return "FAILED", error["kind"]
        reason = f"signal {-returncode}" if returncode < 0 else f"exit code {returncode}"
        log.error("%s: worker died (%s); see %s", self.ctx.label, reason, self.dir / "worker.log")
        return "FAILED", "crash"

    # ---- events ----------------------------------------------------------------------------
    def _on_event(self, ev: dict[str, Any]) -> None:
        kind = ev["event"]
        rec, run = self.rec, self.run_log
        if kind == events.BUILT:
            rec.built = ev
            rec.first_step_t = ev["t"]
            run.tags({f"version.{k}": v for k, v in ev["versions"].items()} | {"device": ev["device"]})
            run.params({"model.params": ev["params"]})
            run.metrics(
                {"import_s": ev["import_s"], "build_s": ev["build_s"], "startup_s": self._startup_s()}
            )
            self.progress.message(f"built on {ev['device']} in {ev['import_s'] + ev['build_s']:.1f}s")
        elif kind == events.WARMUP_STEP:
            self.progress.warmup_step(ev["step"], ev["of"])
        elif kind == events.WARMUP_DONE:
            rec.warmup = ev
            run.metrics({"warmup_s": ev["warmup_s"]})
        elif kind == events.WINDOW:
            rec.windows.append(ev)
            run.metrics(
                {"window/throughput": ev["throughput"], "window/loss": ev["loss"]},
                step=ev["index"],
                timestamp=ev["t"],
            )
            self.progress.window(ev["index"], ev["throughput"])
        elif kind == events.DONE:
            rec.done = ev
        elif kind == events.ERROR:
            rec.error = ev

    def _startup_s(self) -> float:
        return self.rec.built["t"] - self.rec.t_start if self.rec.built else float("nan")

    # ---- MLflow ----------------------------------------------------------------------------
    def _open_run(self) -> RunLogger:
        client, experiment_id = open_store(resolve_uri(self.job.tracking.uri), self.job.tracking.experiment)
        parent_id = STATE.parent.run_id if STATE.parent else os.environ.get(PARENT_ENV)
        if STATE.parent is not None:
            experiment_id = STATE.experiment_id
        elif parent_id is None and (adopted := adopt_mlflow_run(client)):
            parent, experiment_id = adopted
            parent_id = parent.run_id
        j = self.job
        name = f"{j.framework.name}-{j.model.name}-{j.precision.name}-{j.mode}"
        tags = {"dlbench.kind": "job", "dlbench.output_dir": str(self.dir)}
        tags.update({f"host.{k}": v for k, v in host_facts().items()})
        run = RunLogger.create(client, experiment_id, name, parent_id, tags)
        run.params(flatten(j.to_dict()) | {"batch_size": j.batch_size} | self.data_facts)
        (self.dir / "config.yaml").write_text(self.ctx.config_yaml)
        (self.dir / "overrides.yaml").write_text("".join(f"- {o}\n" for o in self.ctx.overrides) or "[]\n")
        run.artifact(self.dir / "config.yaml")
        run.artifact(self.dir / "overrides.yaml")
        log.info("%s: MLflow run %s", self.ctx.label, run.run_id)
        return run

    def _write_job(self) -> Path:
        path = self.dir / "job.json"
        path.write_text(json.dumps(self.job.to_dict(), indent=1))
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
            readers.append(gpu)
            self.run_log.tags({f"gpu.{k}": v for k, v in gpu.info().items()})
        readers.append(HostReader())
        sampler = Sampler(readers, self.job.telemetry.interval_s, self.dir / "telemetry.csv")
        return sampler.start(), gpu

    def _finish(self, status: str, failure: str | None, samples: list[dict[str, float]]) -> None:
        """Log everything collected, whatever the outcome, then close the run."""
        run = self.run_log
        try:
            metrics = self._summary(samples)
            run.metrics(metrics)
            run.series(samples)
            self._log_tags_and_artifacts(status, failure, samples)
        except Exception as exc:  # never let a logging problem hide the job's own outcome
            log.error("%s: logging to MLflow failed: %s", self.ctx.label, exc)
            status = "FAILED"
        finally:
            try:
                run.finish(status)
            except Exception as exc:
                log.error("%s: could not close the MLflow run: %s", self.ctx.label, exc)
        if status == "FINISHED":
            log.info(
                "%s: %.2f samples/s (p5 %.2f, p95 %.2f)",
                self.ctx.label,
                metrics["throughput"],
                metrics["throughput_p05"],
                metrics["throughput_p95"],
            )

    def _summary(self, samples: list[dict[str, float]]) -> dict[str, float]:
        rec = self.rec
        out: dict[str, float] = {"total_s": time.time() - rec.t_start}
        if rec.built:
            out["startup_s"] = self._startup_s()
            out["overhead_s"] = out["startup_s"] - rec.built["import_s"] - rec.built["build_s"]
        if rec.warmup:
            out["warmup_s"] = rec.warmup["warmup_s"]
        if rec.windows:
            out.update(
                summarize_windows(
                    [w["throughput"] for w in rec.windows],
                    rec.windows[0]["samples"] // rec.windows[0]["steps"],
                )
            )
            seconds = sum(w["seconds"] for w in rec.windows)
            out["data_wait_frac"] = sum(w["data_wait_s"] for w in rec.windows) / seconds
            losses = [w["loss"] for w in rec.windows if w["loss"] is not None]
            if losses:
                out["loss_first"], out["loss_last"] = losses[0], losses[-1]
            span = rec.timed_span()
            out.update(summarize(samples, *span))
            if "power_w_mean" in out:
                out["energy_j_per_sample"] = (
                    out["power_w_mean"] * seconds / sum(w["samples"] for w in rec.windows)
                )
        if rec.done and rec.done.get("framework_mem_bytes") is not None:
            out["framework_mem_mib_max"] = rec.done["framework_mem_bytes"] / 2**20
        return out

    def _log_tags_and_artifacts(
        self, status: str, failure: str | None, samples: list[dict[str, float]]
    ) -> None:
        run, rec = self.run_log, self.rec
        tags: dict[str, Any] = {"dlbench.status": status}
        if failure:
            tags["failure"] = failure
        if rec.error:
            tags["failure.message"] = rec.error["message"][:5000]
        precision = rec.done["precision"] if rec.done else {}
        tags.update({f"precision.{k}": v for k, v in precision.items()})
        run.tags(tags)
        if rec.first_step_t and rec.warmup:
            warm = (rec.first_step_t, rec.first_step_t + rec.warmup["warmup_s"])
        else:
            warm = None
        png = self.dir / "telemetry.png"
        if plot_telemetry(samples, png, rec.t_start, warm, f"{self.ctx.label}: {run.run_id}"):
            run.artifact(png)
        run.artifact(self.dir / "telemetry.csv")
        env = {
            "host": host_facts(),
            "versions": rec.built["versions"] if rec.built else {},
            "precision": precision,
        }
        (self.dir / "environment.json").write_text(json.dumps(env, indent=2))
        run.artifact(self.dir / "environment.json")
        log_path = self.dir / "worker.log"
        run.artifact(log_path)
        if status != "FINISHED" and log_path.exists():
            tail = deque(log_path.read_text(errors="replace").splitlines(), maxlen=LOG_TAIL_LINES)
            run.text("\n".join(tail) + "\n", "worker_tail.log")
