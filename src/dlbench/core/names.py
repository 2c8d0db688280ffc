"""Names every layer shares, in one place: paths, worker events, MLflow tags, summary metrics, thresholds.

The orchestrator writes these names and the report (and scripts) read them back from the store, so a
name spelled twice could drift; everything here is a plain constant (no imports beyond pathlib and os), and one path rule.
"""

from __future__ import annotations

import os
from pathlib import Path

# ---- paths ---------------------------------------------------------------------------------------
PROJECT_ROOT = Path(__file__).resolve().parents[3]  # the checkout: conf/, src/, the default store
SRC_DIR = PROJECT_ROOT / "src"  # put on the worker's PYTHONPATH (it may run another interpreter)
CONF_DIR = PROJECT_ROOT / "conf"


def project_relative(raw: str) -> Path:
    """A dataset path made absolute: a relative one not found from the working directory is taken from the
    project root, where the setup and data scripts write (data/...), so presets work from any directory."""
    path = Path(os.path.expandvars(os.path.expanduser(raw)))
    if not path.is_absolute() and not path.exists():
        path = PROJECT_ROOT / path
    return path.absolute()


# ---- worker -> orchestrator events (dlbench.events carries them) ----------------------------------
HELLO = "hello"  # worker process is up: pid
BUILT = "built"  # import_s, build_s, params, device, unit (throughput unit), batch_size, versions, threads
WARMUP_STEP = "warmup_step"  # step, of
WARMUP_DONE = "warmup_done"  # warmup_s, steps (with a min_timed_s probe), steps_per_window (timed)
# samples: the units (built.unit) the window's steps consumed; throughput = samples / seconds
WINDOW = "window"  # index, steps, samples, seconds, throughput, loss, data_wait_s, t_start
# mode=converge, after each epoch's training window: epoch (1-based), metric (its name), value (on the
# held-out split), train_loss, train_s (training seconds so far, evaluation excluded), eval_s
EPOCH = "epoch"
# mode=serve, after LoadGen's test: log_dir (its mlperf_log_* files), t_start, seconds, steps, samples,
# padding (samples added to reach an allowed batch size), estimates (the warm-up's latency at the smallest
# batch size and samples/s at serve.max_batch), search (Server's peak-rate trials), rows_per_sample (the
# task's rows in one query sample), warmup_sizes and step_sizes (the batch sizes the steps ran at)
SERVED = "served"
DONE = "done"  # precision (report), run (run facts), framework_mem_bytes, gflops (forward, per sample)
ERROR = "error"  # kind (oom|config|crash), message

# ---- MLflow tags ---------------------------------------------------------------------------------
PARENT_TAG = "mlflow.parentRunId"  # MLflow's own: nests a job run under its sweep
KIND_TAG = "dlbench.kind"  # KIND_JOB | KIND_SWEEP
KIND_JOB, KIND_SWEEP = "job", "sweep"
STATUS_TAG = "dlbench.status"
OUTPUT_DIR_TAG = "dlbench.output_dir"
SWEEP_DIR_TAG = "dlbench.sweep_dir"
OVERRIDES_TAG = "dlbench.overrides"
JOBS_FINISHED_TAG, JOBS_FAILED_TAG = "dlbench.jobs_finished", "dlbench.jobs_failed"
JOBS_NOT_RUN_TAG = "dlbench.jobs_not_run"
# On the sweep's parent, one tag per cell this machine cannot run: "<cell label>: <reason>".
NOT_RUN_PREFIX = "dlbench.not_run."
NOT_RUN = "NOT_RUN"  # a job's outcome when its cell cannot run on this machine (not a failure)
EXECUTION_TAG = "run.execution"  # eager, graph, hybridized, xla, torch.compile(<mode>) (core/execution.py)
CAPABILITY_NOTE_TAG = "dlbench.capability_note"  # runs, but not as the hardware could (emulated bf16)
SWEEP_RUN_ID_TAG = "dlbench.sweep_run_id"  # on `mlflow run`'s own run: the sweep it started
MLFLOW_RUN_ID_TAG = "dlbench.mlflow_run_id"  # on the sweep's parent: `mlflow run`'s run
SPREAD_FLAG_TAG = "dlbench.spread_flag"  # "high" when repeats differ by more than SPREAD_LIMIT
LOSS_FLAG_TAG = "dlbench.loss_flag"  # "non-finite" when the last window's loss was NaN or inf
FAILURE_TAG = "failure"  # crash | oom | timeout | config | interrupted
FAILURE_MESSAGE_TAG = "failure.message"  # one line
EVAL_METRIC_TAG = "dlbench.eval_metric"  # mode=converge: the name of the task's quality metric
EVAL_FLAG_TAG = "dlbench.eval_flag"  # mode=converge: "non-finite" when an epoch's loss or metric was NaN/inf

# The machine a run measured on: environment.host_facts as host.<fact>, the telemetry's GPU facts as gpu.<fact>.
# Its hardware (what a report groups by and resume matches on) is the CPU model, the CPUs the job may use and
# the first visible GPU's model.
HOST_PREFIX, GPU_PREFIX = "host.", "gpu."
CPU_TAG, CPU_COUNT_TAG, GPU_NAME_TAG = (
    HOST_PREFIX + "cpu",
    HOST_PREFIX + "cpu_count",
    GPU_PREFIX + "gpu0_name",
)

SERVE_VALID_TAG = "serve.valid"  # mode=serve: LoadGen's verdict, VALID or INVALID
SERVE_INVALID_TAG = "serve.invalid_because"  # mode=serve, INVALID only: LoadGen's unmet checks and advice
SERVE_SCENARIO_TAG = "serve.scenario"  # mode=serve: LoadGen's scenario name (SingleStream...)

# ---- thresholds ----------------------------------------------------------------------------------
SPREAD_LIMIT = 0.05  # repeats whose medians differ by more than this are flagged (tag and report)

# ---- summary metrics ------------------------------------------------------------------------------
THROUGHPUT = "throughput"  # the headline: finished runs only
THROUGHPUT_PARTIAL = "throughput_partial"  # the same figure for a run that did not finish
# The job summary metrics a report reads (results.summarize_job, plus the repeat spread).
SUMMARY_METRICS = (
    THROUGHPUT,
    "throughput_p05",
    "throughput_p95",
    "throughput_cv",
    "throughput_spread",
    "throughput_samples",  # samples/s when the unit is not the sample (sentences/s beside target tokens/s)
    "step_time_ms",
    "warmup_s",
    "startup_s",
    "total_s",
    "gpu_util_mean",
    "gpu_mem_used_mib_max",
    "framework_mem_mib_max",
    "power_w_mean",
    "energy_j_per_sample",
    "cpu_util_mean",
    "host_rss_mib_max",
    "timed_s",  # seconds inside the timed windows, all repeats
    "steps_per_window",  # steps each window ran (schedule.min_timed_s may raise schedule.steps_per_window)
    "telemetry_samples",  # readings inside the timed phase (too few make the means above rough)
    "data_wait_frac",
    "loss_first",
    "loss_last",
    # mode=converge (dlbench.converge.converge_summary; the report's Accuracy section)
    "eval_final",
    "eval_best",
    "epochs_to_target",
    "time_to_target_s",
    "train_s",
)
# mode=serve: LoadGen's own figures (serving/summary.py), never recomputed
SERVE_METRICS = (
    "latency_p50_ms",
    "latency_p90_ms",
    "latency_p95_ms",
    "latency_p97_ms",
    "latency_p99_ms",
    "latency_p999_ms",
    "latency_min_ms",
    "latency_mean_ms",
    "latency_max_ms",
    "qps",
    "samples_per_s",
    "serve_batch_mean",  # samples per inference step: what coalescing up to serve.max_batch did
    "serve_padded_fraction",  # padding samples per answered one: what padding to serve.batch_sizes cost
    "server_peak_qps",  # serve.search=true: the highest Server rate whose p99 met the bound (0: none)
)
