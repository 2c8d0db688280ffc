"""One job's MLflow child run: what the worker reported, as params, tags, metrics and artifacts.

Split from the worker lifecycle (dlbench.orchestrator) so that running a job and recording it can be
read, and changed, apart: the orchestrator hands over events and the collected records; this module
decides what MLflow gets. Every value goes through RunLogger, which masks credentials.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
from collections import deque
from pathlib import Path
from typing import Any

from dlbench import signals
from dlbench.config import JobConfig
from dlbench.converge import converge_summary, diverged
from dlbench.core.execution import execution
from dlbench.core.names import (
    CAPABILITY_NOTE_TAG,
    EVAL_FLAG_TAG,
    EVAL_METRIC_TAG,
    EXECUTION_TAG,
    FAILURE_MESSAGE_TAG,
    FAILURE_TAG,
    GPU_PREFIX,
    KIND_JOB,
    KIND_TAG,
    LOSS_FLAG_TAG,
    OUTPUT_DIR_TAG,
    SPREAD_FLAG_TAG,
    SPREAD_LIMIT,
    STATUS_TAG,
    THROUGHPUT,
    THROUGHPUT_PARTIAL,
)
from dlbench.core.secrets import mask
from dlbench.environment import framework_env, host_facts, host_tags
from dlbench.results import Failure, RepeatRecord, summarize_job, window_spans
from dlbench.serving.record import record_served
from dlbench.serving.settings import allowed_batch_sizes
from dlbench.telemetry.guards import GuardFindings, ProcessWatch, clock_guard, shared_gpu
from dlbench.telemetry.plot import plot_telemetry
from dlbench.telemetry.sampler import MIN_TIMED_SAMPLES, rough
from dlbench.tracking.resume import CONFIG_HASH_TAG, config_hash
from dlbench.tracking.run_logger import RunLogger, flatten
from dlbench.tracking.store import open_store, resolve_uri
from dlbench.tracking.sweep import PARENT_ENV, STATE, adopt_mlflow_run, ensure_parent, note_job_mode
from dlbench.tracking.ui_records import log_dataset_input

log = logging.getLogger("dlbench")
LOG_TAIL_LINES = 200


def parent_and_experiment(experiment_id: str) -> tuple[str | None, str]:
    """The sweep's parent run id (made now if this is its first job) and the experiment to record in; a
    job a launcher started in a process of its own finds the parent's id in the environment."""
    parent = ensure_parent()  # a sweep's parent run is made with its first job's run
    if parent is not None:
        return parent.run_id, STATE.experiment_id
    return os.environ.get(PARENT_ENV), experiment_id


def job_logs() -> list[Path]:
    """The files this process logs to (Hydra's job log, run.log), flushed: where the job's own lines are."""
    out = []
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.FileHandler):
            handler.flush()
            out.append(Path(handler.baseFilename))
    return out


class JobRecording:
    """The child run of one job (all its repeats)."""

    def __init__(self, job: JobConfig, label: str, output_dir: Path, worker_env: dict[str, str]) -> None:
        self.job = job
        self.label = label
        self.dir = output_dir
        # what the worker got beyond ours (threads, JAX's memory): environment.json
        self.worker_env = worker_env
        self.run: RunLogger | None = None
        self.window_step = 0  # window/* series step, continuous across repeats
        self.unit = "samples"
        self.watch: ProcessWatch | None = None  # set by the orchestrator on GPU runs
        self.guard = GuardFindings()

    # ---- the run -----------------------------------------------------------------------------
    def open(
        self, config_yaml: str, overrides: list[str], data_facts: dict[str, Any], notes: list[str] = ()
    ) -> RunLogger:
        """Create the child run (under the sweep's parent, if any) with the job's params and config."""
        client, experiment_id = open_store(resolve_uri(self.job.tracking.uri), self.job.tracking.experiment)
        parent_id, experiment_id = parent_and_experiment(experiment_id)
        note_job_mode(self.job.mode)  # the sweep's view shows this mode's columns
        if parent_id is None and (adopted := adopt_mlflow_run(client, experiment_id)):
            parent, experiment_id = adopted
            parent_id = parent.run_id
        j = self.job
        name = f"{j.framework.name}-{j.model.name}-{j.precision.name}-{j.mode}"
        name += f"-seed{j.schedule.seed}" if j.mode == "converge" else ""
        tags = {KIND_TAG: KIND_JOB, OUTPUT_DIR_TAG: str(self.dir), CONFIG_HASH_TAG: config_hash(j.to_dict())}
        tags |= {CAPABILITY_NOTE_TAG: " ".join(notes)} if notes else {}
        tags[EXECUTION_TAG] = execution(j.framework.name, dataclasses.asdict(j.framework))
        tags.update(host_tags())
        with signals.held():  # a signal here must not leave a RUNNING run nobody will close
            run = RunLogger.create(client, experiment_id, name, parent_id, tags)
            self.run = run
            STATE.job_runs += 1
        config = j.to_dict()
        config.pop("pythons")  # framework.python holds the one this job ran under
        if j.mode != "serve":  # LoadGen's settings only where LoadGen runs
            config.pop("serve")
        else:  # the batch sizes steps run at, null resolved (what the run used)
            config["serve"]["batch_sizes"] = allowed_batch_sizes(j.serve)
        # batch_size is per device (what one rank's step takes); the global batch is over `devices` ranks
        batches = {"batch_size": j.batch_size, "global_batch_size": j.global_batch_size}
        run.params(flatten(config) | batches | data_facts)
        if "dataset.digest" in data_facts:  # a real dataset: MLflow's dataset views show it
            context = "training" if j.mode == "train" else "evaluation"
            log_dataset_input(
                client, run.run_id, j.dataset.name, data_facts["dataset.digest"],
                data_facts["dataset.resolved_path"], context, data_facts.get("dataset.found_samples"),
            )  # fmt: skip
        (self.dir / "config.yaml").write_text(mask(config_yaml))
        (self.dir / "overrides.yaml").write_text("".join(f"- {mask(o)}\n" for o in overrides) or "[]\n")
        run.artifact(self.dir / "config.yaml")
        run.artifact(self.dir / "overrides.yaml")
        log.info("%s: MLflow run %s", self.label, run.run_id)
        return run

    def gpu(self, info: dict[str, Any]) -> None:
        self.run.tags({GPU_PREFIX + k: v for k, v in info.items()})

    # ---- events --------------------------------------------------------------------------------
    def built(self, ev: dict[str, Any], first: bool) -> None:
        self.unit = ev["unit"]
        if first:
            self.run.tags({f"version.{k}": v for k, v in ev["versions"].items()} | {"device": ev["device"]})
            self.run.params({"model.params": ev["params"], "throughput_unit": ev["unit"]})
            # what the framework reports it uses, not the setting: the report compares only equals
            self.run.params({f"threads.{k}": v for k, v in ev.get("threads", {}).items()})
            # devices>1: the process group's backend and what each rank's torch reported ("1/1,1/1")
            self.run.params({f"ranks.{k}": v for k, v in ev.get("ranks", {}).items()})

    def window(self, ev: dict[str, Any]) -> None:
        series = {"window/throughput": ev["throughput"], "window/loss": ev["loss"]}
        self.run.metrics(series, step=self.window_step, timestamp=ev["t"])
        self.window_step += 1

    def epoch(self, ev: dict[str, Any]) -> None:
        """mode=converge: the held-out metric and the training loss and time so far, step = epoch."""
        series = {f"eval/{ev['metric']}": ev["value"], "epoch/train_loss": ev["train_loss"]}
        series |= {f"eval/{k}": v for k, v in ev.get("extra", {}).items()}  # e.g. eval/map beside eval/map50
        self.run.metrics(series | {"epoch/train_s": ev["train_s"]}, step=ev["epoch"], timestamp=ev["t"])

    def done(self, ev: dict[str, Any], first: bool) -> None:
        if ev.get("gflops") is not None and first:
            self.run.params({"model.gflops": f"{ev['gflops']:.4f}"})

    # ---- the end -------------------------------------------------------------------------------
    def finish(
        self,
        status: str,
        failure: Failure | None,
        records: list[RepeatRecord],
        samples: list[dict[str, float]],
    ) -> None:
        """Log everything collected, whatever the outcome, then close the run."""
        run = self.run
        metrics: dict[str, float] = {}
        try:
            metrics = summarize_job(records, samples)
            if self.job.mode == "converge" and records:
                metrics |= converge_summary(records[-1].epochs, self.job.schedule.target)
            self.guard = clock_guard(samples, window_spans(records))
            self.guard.merge(shared_gpu(self.watch.foreign() if self.watch else []))
            metrics.update(self.guard.metrics)
            if self.job.mode == "serve" and records:
                record_served(run, records[-1].served, self.label)
            if status != "FINISHED" and THROUGHPUT in metrics:
                # a search on `throughput` must find finished runs only; the windows stay as a series
                metrics[THROUGHPUT_PARTIAL] = metrics.pop(THROUGHPUT)
            run.metrics(metrics)
            self._log_repeats(records)
            run.series(samples)
            self._log_tags_and_artifacts(status, failure, records, samples, metrics)
        except Exception as exc:  # never let a logging problem hide the job's own outcome
            log.error("%s: logging to MLflow failed: %s", self.label, exc)
            status = "FAILED"
        finally:
            try:
                run.finish(status)
            except Exception as exc:
                log.error("%s: could not close the MLflow run: %s", self.label, exc)
        if status == "FINISHED" and THROUGHPUT in metrics:
            spread = (
                f", spread {100 * metrics['throughput_spread']:.1f}%"
                if "throughput_spread" in metrics
                else ""
            )
            log.info(
                "%s: %.2f %s/s (p5 %.2f, p95 %.2f%s)",
                self.label,
                metrics[THROUGHPUT],
                self.unit,
                metrics["throughput_p05"],
                metrics["throughput_p95"],
                spread,
            )
            if rough(metrics.get("telemetry_samples")):
                log.warning(
                    "%s: its timed phase held %d telemetry sample(s), fewer than %d: its utilization and "
                    "energy figures are rough; lengthen it with schedule.min_timed_s=5 (seconds)",
                    self.label,
                    metrics["telemetry_samples"],
                    MIN_TIMED_SAMPLES,
                )

    def _log_repeats(self, records: list[RepeatRecord]) -> None:
        """Per-repeat figures as series (step = repeat index) when a job ran more than once."""
        if self.job.schedule.repeats < 2:
            return
        for i, rec in enumerate(records):
            if rec.windows:
                series = {"repeat/throughput": rec.median_throughput}
                self.run.metrics(series, step=i, timestamp=rec.windows[-1]["t"])

    def _log_tags_and_artifacts(
        self,
        status: str,
        failure: Failure | None,
        records: list[RepeatRecord],
        samples: list[dict[str, float]],
        metrics: dict[str, float],
    ) -> None:
        run = self.run
        done = next((r.done for r in reversed(records) if r.done), None)
        built = next((r.built for r in records if r.built), None)
        tags: dict[str, Any] = {STATUS_TAG: status}
        if failure:
            tags[FAILURE_TAG], tags[FAILURE_MESSAGE_TAG] = failure.kind, failure.message
        tags.update(self._flags(metrics))
        tags.update(self._eval_tags(records))
        tags.update(self.guard.tags)
        for warning in self.guard.warnings:
            log.warning("%s: %s", self.label, warning)
        precision, run_facts = (done["precision"], done.get("run", {})) if done else ({}, {})
        tags.update({f"precision.{k}": v for k, v in precision.items()})
        tags.update({f"run.{k}": v for k, v in run_facts.items()})
        run.tags(tags)
        warmups = [span for r in records if (span := r.warmup_span())]
        png = self.dir / "telemetry.png"
        t0 = records[0].t_start if records else None  # none: stopped before its first worker started
        if t0 is not None and plot_telemetry(samples, png, t0, warmups, f"{self.label}: {run.run_id}"):
            run.artifact(png)
        run.artifact(self.dir / "telemetry.csv")
        env = {
            "host": host_facts(),
            "versions": built["versions"] if built else {},
            "precision": precision,
            "run": run_facts,
            "env": framework_env() | self.worker_env,
        }
        (self.dir / "environment.json").write_text(json.dumps(env, indent=2))
        run.artifact(self.dir / "environment.json")
        log_path = self.dir / "worker.log"
        run.artifact(log_path)
        for path in job_logs():  # the orchestrator's side (Hydra's run.log): what the job did, masked
            run.artifact(path)
        if status != "FINISHED" and log_path.exists():
            tail = deque(log_path.read_text(errors="replace").splitlines(), maxlen=LOG_TAIL_LINES)
            run.text("\n".join(tail) + "\n", "worker_tail.log")

    def _eval_tags(self, records: list[RepeatRecord]) -> dict[str, str]:
        """mode=converge: which metric the run was scored by, and a flag when some epoch diverged."""
        epochs = records[-1].epochs if records else []
        if self.job.mode != "converge" or not epochs:
            return {}
        tags = {EVAL_METRIC_TAG: epochs[-1]["metric"]}
        if diverged(epochs):
            tags[EVAL_FLAG_TAG] = "non-finite"
            log.warning("%s: a loss or held-out metric was NaN or inf: flagged, never a match", self.label)
        return tags

    def _flags(self, metrics: dict[str, float]) -> dict[str, str]:
        """Tags (and warnings) for a figure that deserves suspicion: repeats that disagree, a diverged loss."""
        flags = {}
        if metrics.get("throughput_spread", 0.0) > SPREAD_LIMIT:
            flags[SPREAD_FLAG_TAG] = "high"
            log.warning(
                "%s: repeats differ by %.1f%% (> %.0f%%)",
                self.label,
                100 * metrics["throughput_spread"],
                100 * SPREAD_LIMIT,
            )
        if not math.isfinite(metrics.get("loss_last", 0.0)):
            flags[LOSS_FLAG_TAG] = "non-finite"
            log.warning(
                "%s: the loss is %s at the last window: the training diverged, so this is not a sound "
                "training throughput (the GPU may have skipped or short-cut work)",
                self.label,
                metrics["loss_last"],
            )
        return flags
