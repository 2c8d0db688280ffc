"""Read a sweep's (or an experiment's) job runs out of an MLflow store into plain rows.

Everything goes through MlflowClient, so a sqlite file and a remote `mlflow server` are read the same
way. Bad input (no such experiment, run or database; nothing finished) raises `ReportInputError` with a
one-line message that says what exists, so the CLI can print it without a traceback.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from mlflow.entities import Run, ViewType
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from dlbench.core.execution import execution
from dlbench.core.names import (
    CPU_COUNT_TAG,
    CPU_TAG,
    EVAL_FLAG_TAG,
    EVAL_METRIC_TAG,
    EXECUTION_TAG,
    FAILURE_MESSAGE_TAG,
    FAILURE_TAG,
    GPU_NAME_TAG,
    HOST_PREFIX,
    KIND_SWEEP,
    KIND_TAG,
    LOSS_FLAG_TAG,
    PARENT_TAG,
    SERVE_METRICS,
    SERVE_VALID_TAG,
    SPREAD_FLAG_TAG,
    SUMMARY_METRICS,
)
from dlbench.core.secrets import mask
from dlbench.telemetry.guards import CLOCK_FLAG_TAG, GPU_FLAG_TAG
from dlbench.tracking.resume import CONFIG_HASH_TAG, reused_filter

# Params that make two runs of one framework x model x precision x mode different measurements, beside
# every model-family key (model.*, whatever the family: image_size, depth, vocabulary...).
# Only those that differ inside a (model, mode) group end up in the group's "variant" label.
VARIANT_PARAMS = (
    "batch_size",
    "dataset.name",
    "device",
    "devices",  # data-parallel ranks: runs on 2 devices are compared with 1 only by report/scaling.py
    "data.decode",
    # CPU threads the framework reported using (threads.* params): runs at different counts are never
    # compared with each other, so a framework left on one thread cannot lose to one given two.
    "threads.intra_op",
    "threads.inter_op",
    # JAX's dropout generator: the same step with another generator runs at another speed (1.8% apart at
    # tf32 on an H100), so a sweep over it is two configurations, never one run superseding the other
    "framework.prng",
)
NOT_VARIANT_MODEL_PARAMS = ("model.name", "model.task", "model.batch_size", "model.params", "model.gflops")
# The hardware a run measured, from its host.* and gpu.* tags: a variant key too, so that runs of one store
# (a shared server) or of several stores (`--uri A --uri B`) made on different machines are never compared.
MACHINE_KEY = "machine"
UNIT_PARAM = "throughput_unit"  # the task's throughput unit, logged by the orchestrator
GPU_SERIES = "gpu0/util"
CPU_SERIES = "host/cpu_util"


class ReportInputError(Exception):
    """The store holds nothing to report on; the message is one line naming what exists instead."""


@dataclass
class JobRow:
    """One job run, flattened: identity, outcome, summary metrics (NaN when not logged)."""

    run_id: str
    run_name: str
    status: str
    framework: str
    model: str
    precision: str
    mode: str
    start_ms: int
    metrics: dict[str, float]
    variant_params: dict[str, str]
    failure: str | None = None
    failure_message: str | None = None
    spread_flag: str | None = None
    loss_flag: str | None = None  # "non-finite": the training diverged during the timed windows
    gpu_flag: str | None = None  # "shared": another process used the GPU during the job
    clock_flag: str | None = None  # "throttled" and/or "clock-drop" in the timed phase
    reused: bool = False  # not run by this sweep: resume=true found this FINISHED run of its configuration
    sitting: str = ""  # the sweep that measured it (its parent run id; its own id for a single run)
    store: str = ""  # the tracking URI it was read from (a report may combine several stores)
    compute_dtype: str | None = None  # verified on real layer outputs (tag precision.compute_dtype)
    precision_tags: dict[str, str] = field(default_factory=dict)  # every precision.* tag, prefix removed
    config_hash: str | None = None  # tag dlbench.config_hash: the resolved configuration, seed included
    unit: str = "samples"  # what throughput counts: images, target tokens, samples
    repeats: int = 1
    device: str | None = None
    gpu_name: str | None = None
    host: dict[str, str] = field(default_factory=dict)  # the host.* tags (host_facts)
    threads: str | None = None  # "intra/inter-op" threads the framework reported, e.g. "2/2"
    execution: str = "eager"  # how the step ran: eager, graph, hybridized, xla, torch.compile(mode)
    converge: dict[str, str] = field(default_factory=dict)  # mode=converge: seed, metric, target, flag
    serve: dict[str, str] = field(default_factory=dict)  # mode=serve: scenario, max_batch, valid (LoadGen's)

    def metric(self, key: str) -> float:
        return self.metrics.get(key, math.nan)

    @property
    def machine(self) -> str:
        """The hardware it measured on (machine_label; "" for a run recorded without host tags)."""
        return self.variant_params.get(MACHINE_KEY, "")

    @property
    def devices(self) -> int:
        """Data-parallel ranks of the run (a run recorded before the key existed ran on one)."""
        return int(self.variant_params.get("devices", "1"))

    @property
    def ran(self) -> str:
        """What the run computed in, from its verified precision tags: "float32", "mixed bfloat16"
        (autocast, float32 weights), "pure float16, float16 weights, dynamic loss scaling"... A run
        recorded without the tags is named by its configured precision, marked unverified."""
        tags = self.precision_tags
        compute = tags.get("compute_dtype")
        if not compute or compute == "unknown":
            return f"{self.precision}, not verified"
        if compute == "float32" and not self.autocast:
            return "float32"
        text = (
            f"mixed {compute}" if self.autocast else f"pure {compute}, {tags.get('param_dtype', '?')} weights"
        )
        return text + (
            ", dynamic loss scaling" if tags.get("loss_scale", "none").startswith("dynamic") else ""
        )

    @property
    def autocast(self) -> bool:
        """Verified mixed precision: the run's autocast tag is on (a policy or context, not "off")."""
        return self.precision_tags.get("autocast", "off") != "off"

    @property
    def pure(self) -> bool:
        """A reduced-precision network without autocast (verified): never to be called mixed precision."""
        return (
            self.precision_tags.get("compute_dtype", "float32") not in ("float32", "unknown")
            and not self.autocast
        )

    @property
    def precision_label(self) -> str:
        """The configured precision with what was verified, e.g. "amp (bfloat16)"."""
        return f"{self.precision} ({self.compute_dtype})" if self.compute_dtype else self.precision


@dataclass
class History:
    """A utilization time series of one run: seconds since the run started, and the values."""

    key: str
    seconds: list[float]
    values: list[float]

    @property
    def is_gpu(self) -> bool:
        return self.key == GPU_SERIES


@dataclass
class Selection:
    """What a report covers: the store, the experiment, the sweep's parent run (if any) and its jobs.
    `uri` is the first store; `stores` every store the jobs were read from, in the order given."""

    uri: str
    experiment_id: str
    experiment_name: str
    parent: Run | None
    jobs: list[JobRow]
    parent_tags: dict[str, str] = field(default_factory=dict)
    stores: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.stores = self.stores or [self.uri]
        for job in self.jobs:
            job.store = job.store or self.uri

    @property
    def title(self) -> str:
        if self.parent is not None:
            return f"dlbench report: {self.parent.info.run_name or self.parent.info.run_id}"
        return f"dlbench report: experiment {self.experiment_name}"


def list_hint(uri: str) -> str:
    """The command that lists what a store holds (quoted in every input error)."""
    return f"python src/report.py --list --uri {mask(uri)}"


def open_client(uri: str) -> MlflowClient:
    """A client for an existing store; a missing sqlite file is an input error (MLflow would create it)."""
    if uri.startswith("sqlite:///"):
        db = Path(uri.removeprefix("sqlite:///"))
        if not db.is_file():
            raise ReportInputError(f"no MLflow database at {db} (pass --uri, or run a sweep first)")
    return MlflowClient(tracking_uri=uri)


def search_all(
    client: MlflowClient, experiment_ids: list[str], filter_string: str = "", **kw: Any
) -> list[Run]:
    """search_runs over every page (MLflow caps a page at a few thousand runs)."""
    out: list[Run] = []
    token = None
    while True:
        page = client.search_runs(
            experiment_ids,
            filter_string,
            run_view_type=ViewType.ACTIVE_ONLY,
            max_results=1000,
            page_token=token,
            **kw,
        )
        out.extend(page)
        token = page.token
        if not token:
            return out


def select(
    client: MlflowClient, uri: str, run_id: str | None = None, experiment: str | None = None
) -> Selection:
    """Resolve the report's subject: a sweep's parent run, an experiment, or (neither) the latest
    sweep of the `dlbench` experiment."""
    if run_id:
        return _select_run(client, uri, run_id)
    name = experiment or "dlbench"
    exp = _experiment(client, uri, name)
    if experiment:
        runs = [r for r in search_all(client, [exp.experiment_id]) if _is_job(r)]
        return Selection(uri, exp.experiment_id, exp.name, None, [job_row(r) for r in runs])
    latest = client.search_runs(
        [exp.experiment_id],
        f"tags.`{KIND_TAG}` = '{KIND_SWEEP}'",
        run_view_type=ViewType.ACTIVE_ONLY,
        max_results=1,
        order_by=["attributes.start_time DESC"],
    )
    if not latest:
        raise ReportInputError(
            f"experiment '{name}' in {uri} has no sweep runs; pass --experiment {name} to report its "
            f"single runs, or list what exists with: {list_hint(uri)}"
        )
    return _select_run(client, uri, latest[0].info.run_id)


def select_stores(clients: dict[str, MlflowClient], experiment: str | None = None) -> Selection:
    """The job runs of one experiment (default `dlbench`) in several stores, as one selection: sittings kept
    in a store each, reported on one page (runs of different machines stay in tables of their own, as
    MACHINE_KEY makes them). Each store must hold the experiment."""
    parts = []
    for uri, client in clients.items():
        try:
            parts.append(select(client, uri, experiment=experiment or "dlbench"))
        except MlflowException as exc:  # name the store that failed among several
            raise ReportInputError(f"MLflow store {uri}: {str(exc).splitlines()[0]}") from None
    first = parts[0]
    jobs = [job for part in parts for job in part.jobs]
    return Selection(first.uri, first.experiment_id, first.experiment_name, None, jobs, stores=list(clients))


def _select_run(client: MlflowClient, uri: str, run_id: str) -> Selection:
    try:
        run = client.get_run(run_id)
    except MlflowException:
        raise ReportInputError(
            f"no run '{run_id}' in {uri}; list the sweeps with: {list_hint(uri)}"
        ) from None
    eid = run.info.experiment_id
    exp = client.get_experiment(eid)
    children = [r for r in search_all(client, [eid], f"tags.`{PARENT_TAG}` = '{run_id}'") if _is_job(r)]
    reused = [r for r in search_all(client, [eid], reused_filter(run_id)) if _is_job(r)]
    if children or reused:
        jobs = [job_row(r) for r in children] + [replace(job_row(r), reused=True) for r in reused]
        return Selection(uri, eid, exp.name, run, jobs, dict(run.data.tags))
    if _is_job(run):  # a single run (no sweep): report on it alone
        return Selection(uri, eid, exp.name, None, [job_row(run)])
    raise ReportInputError(
        f"run '{run_id}' in {uri} has no job runs under it; list the sweeps with: {list_hint(uri)}"
    )


def _experiment(client: MlflowClient, uri: str, name: str) -> Any:
    exp = client.get_experiment_by_name(name)
    if exp is None or exp.lifecycle_stage != "active":
        names = ", ".join(e.name for e in client.search_experiments()) or "(none)"
        raise ReportInputError(
            f"no experiment '{name}' in {uri}; experiments there: {names} (details: {list_hint(uri)})"
        )
    return exp


def _is_job(run: Run) -> bool:
    return run.data.tags.get(KIND_TAG) != KIND_SWEEP and "framework.name" in run.data.params


def _is_variant_param(key: str) -> bool:
    return key in VARIANT_PARAMS or (key.startswith("model.") and key not in NOT_VARIANT_MODEL_PARAMS)


def job_row(run: Run) -> JobRow:
    """Flatten one job run (params are the flattened job config, see orchestrator._open_run)."""
    p, m, t = run.data.params, run.data.metrics, run.data.tags
    message = t.get(FAILURE_MESSAGE_TAG)
    repeats = p.get("schedule.repeats", "1")
    return JobRow(
        run_id=run.info.run_id,
        run_name=run.info.run_name or run.info.run_id,
        sitting=t.get("mlflow.parentRunId", run.info.run_id),
        status=run.info.status,
        framework=p.get("framework.name", "?"),
        model=p.get("model.name", "?"),
        precision=p.get("precision.name", "?"),
        mode=p.get("mode", "?"),
        start_ms=run.info.start_time or 0,
        metrics={k: float(m[k]) for k in (*SUMMARY_METRICS, *SERVE_METRICS) if k in m},
        variant_params={k: v for k, v in p.items() if _is_variant_param(k)} | _prng(p, t) | _machine(t),
        failure=t.get(FAILURE_TAG),
        failure_message=message.strip().splitlines()[0][:300] if message and message.strip() else None,
        spread_flag=t.get(SPREAD_FLAG_TAG),
        loss_flag=t.get(LOSS_FLAG_TAG),
        gpu_flag=t.get(GPU_FLAG_TAG),
        clock_flag=t.get(CLOCK_FLAG_TAG),
        compute_dtype=t.get("precision.compute_dtype"),
        precision_tags={k.removeprefix("precision."): v for k, v in t.items() if k.startswith("precision.")},
        config_hash=t.get(CONFIG_HASH_TAG),
        unit=p.get(UNIT_PARAM, "samples"),
        repeats=int(m["repeats_done"]) if "repeats_done" in m else int(repeats) if repeats.isdigit() else 1,
        device=t.get("device"),
        gpu_name=t.get(GPU_NAME_TAG),
        host={k.removeprefix(HOST_PREFIX): v for k, v in t.items() if k.startswith(HOST_PREFIX)},
        threads=f"{p['threads.intra_op']}/{p.get('threads.inter_op', '?')}"
        if "threads.intra_op" in p
        else None,
        converge=_converge_facts(p, t),
        serve=_serve_facts(p, t),
        execution=t.get(EXECUTION_TAG) or _execution(p),
    )


def machine_label(tags: dict[str, str]) -> str | None:
    """The hardware a run measured on, e.g. "NVIDIA H200, Intel(R) Xeon(R) Processor ×16": its GPU model
    (when the machine had one) and CPU model with the CPUs the job could use. Not the hostname: two
    sittings on machines of one kind measure the same hardware. None for runs recorded without host tags."""
    cpu = tags.get(CPU_TAG)
    if not cpu:
        return None
    label = f"{cpu} ×{tags[CPU_COUNT_TAG]}" if tags.get(CPU_COUNT_TAG) else cpu
    gpu = tags.get(GPU_NAME_TAG)
    return f"{gpu}, {label}" if gpu else label


def _prng(params: dict[str, str], tags: dict[str, str]) -> dict[str, str]:
    """A JAX run recorded before framework.prng existed: its generator from the run.prng tag, else rbg (the
    only one the worker used then), so such a run and a threefry one stay two configurations."""
    if params.get("framework.name") != "jax" or "framework.prng" in params:
        return {}
    return {"framework.prng": tags.get("run.prng", "rbg")}


def _machine(tags: dict[str, str]) -> dict[str, str]:
    label = machine_label(tags)
    return {MACHINE_KEY: label} if label else {}


def _execution(params: dict[str, str]) -> str:
    """A run recorded before the run.execution tag: its mode from the framework knobs it was given."""
    knobs = {k.removeprefix("framework."): v for k, v in params.items() if k.startswith("framework.")}
    return execution(params.get("framework.name", "?"), knobs)


def _serve_facts(params: dict[str, str], tags: dict[str, str]) -> dict[str, str]:
    """mode=serve: the scenario and batching asked for, and LoadGen's verdict (absent in other modes)."""
    if params.get("mode") != "serve":
        return {}
    facts = {"scenario": params.get("serve.scenario", "?"), "max_batch": params.get("serve.max_batch", "?")}
    # what LoadGen ran with ("Test Parameters Used"): Server's offered rate and its p99 bound
    loadgen = {"target_qps": "loadgen.target_qps", "target_latency_ns": "loadgen.target_latency_ns"}
    facts |= {name: params[key] for name, key in loadgen.items() if key in params}
    return facts | {"valid": tags.get(SERVE_VALID_TAG, "?")}


def _converge_facts(params: dict[str, str], tags: dict[str, str]) -> dict[str, str]:
    """What the Accuracy section needs beyond the summary metrics (empty for speed runs)."""
    if params.get("mode") != "converge":
        return {}
    keys = {"seed": "schedule.seed", "epochs": "schedule.epochs", "target": "schedule.target"}
    out = {name: params[key] for name, key in keys.items() if key in params}
    out["dataset"] = params.get("dataset.name", "?")
    for name, tag in (("metric", EVAL_METRIC_TAG), ("eval_flag", EVAL_FLAG_TAG)):
        if tag in tags:
            out[name] = tags[tag]
    return out


def load_history(client: MlflowClient, run_id: str, start_ms: int) -> History | None:
    """GPU utilization over time, else the host CPU utilization (CPU-only runs have no GPU series)."""
    for key in (GPU_SERIES, CPU_SERIES):
        points = client.get_metric_history(run_id, key)
        if points:
            points = sorted(points, key=lambda p: (p.timestamp, p.step))
            t0 = start_ms or points[0].timestamp
            return History(key, [(p.timestamp - t0) / 1000.0 for p in points], [p.value for p in points])
    return None


def describe_store(client: MlflowClient, uri: str, sweeps_per_experiment: int = 10) -> list[str]:
    """Lines for `--list`: each experiment with its latest sweeps (parent run id, name, status, jobs)."""
    lines = [f"MLflow store {uri}"]
    for exp in client.search_experiments():
        runs = search_all(client, [exp.experiment_id])
        sweeps = sorted(
            (r for r in runs if r.data.tags.get(KIND_TAG) == KIND_SWEEP),
            key=lambda r: -(r.info.start_time or 0),
        )
        jobs = sum(1 for r in runs if _is_job(r))
        lines.append(
            f"experiment '{exp.name}' (id {exp.experiment_id}): {len(sweeps)} sweep(s), {jobs} job run(s)"
        )
        parents: dict[str, int] = {}
        for r in runs:
            if pid := r.data.tags.get(PARENT_TAG):
                parents[pid] = parents.get(pid, 0) + 1
        for s in sweeps[:sweeps_per_experiment]:
            lines.append(
                f"  --run {s.info.run_id}  {s.info.run_name}  {s.info.status}  {parents.get(s.info.run_id, 0)} jobs"
            )
        if len(sweeps) > sweeps_per_experiment:
            lines.append(f"  ... {len(sweeps) - sweeps_per_experiment} older sweeps")
    return lines
