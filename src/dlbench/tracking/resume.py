"""resume=true: a sweep that broke halfway is finished by running the same command again.

Every job run carries a hash of its resolved configuration (`dlbench.config_hash`). With resume=true a job
whose hash already has a FINISHED run in the experiment, measured on this machine (its host.cpu,
host.cpu_count and, for a GPU job, gpu.gpu0_name tags), is not run again: that run is reused, and it records
which sweeps reused it (`dlbench.reused_by`, parent run ids), so the new sweep's report lists it beside the
jobs the sweep ran, and says it was reused. Nothing is copied: the reused run keeps its own series and
artifacts.

The hash leaves out what does not change the measurement: where it is recorded (tracking), the sweep's
own switches (resume, fail_fast, report) and limits (timeout_s, guard).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from mlflow.entities import Run, ViewType
from mlflow.tracking import MlflowClient

CONFIG_HASH_TAG = "dlbench.config_hash"
REUSED_BY_TAG = "dlbench.reused_by"  # comma-separated parent run ids of the sweeps that reused this run
# pythons: the one a job uses is in framework.python, hashed with the framework
NOT_HASHED = ("tracking", "resume", "fail_fast", "report", "timeout_s", "guard", "pythons")


def config_hash(config: dict[str, Any]) -> str:
    """A stable digest of a resolved job configuration (JobConfig.to_dict()), key order irrelevant."""
    kept = {k: v for k, v in config.items() if k not in NOT_HASHED}
    if kept.get("mode") != "serve":  # serve.* means nothing elsewhere: earlier runs keep their digest
        kept.pop("serve", None)
    if kept.get("devices", 1) == 1:  # one device: runs made before `devices` existed keep their digest
        kept.pop("devices", None)
    return hashlib.sha256(json.dumps(kept, sort_keys=True, default=str).encode()).hexdigest()[:20]


def find_finished(
    client: MlflowClient, experiment_id: str, digest: str, machine: dict[str, str] | None = None
) -> Run | None:
    """The newest FINISHED run of that configuration in the experiment, if any; with `machine` (tag ->
    value, e.g. host.cpu), only one recorded with those very tags: the hash covers the configuration, not
    the hardware, and a store shared by several machines must not hand one machine's figure to another."""
    token = None
    while True:  # page on: the machine's own run may be older than a hundred of another machine's
        found = client.search_runs(
            [experiment_id],
            f"tags.`{CONFIG_HASH_TAG}` = '{digest}' and attributes.status = 'FINISHED'",
            run_view_type=ViewType.ACTIVE_ONLY,
            max_results=100,
            order_by=["attributes.start_time DESC"],
            page_token=token,
        )
        same = (r for r in found if all(r.data.tags.get(k) == v for k, v in (machine or {}).items()))
        run = next(same, None)
        if run is not None or not found.token:
            return run
        token = found.token


def mark_reused(client: MlflowClient, run: Run, parent_id: str) -> None:
    """Record on the reused run that the sweep `parent_id` counts it as one of its jobs."""
    ids = [x for x in run.data.tags.get(REUSED_BY_TAG, "").split(",") if x]
    if parent_id not in ids:
        client.set_tag(run.info.run_id, REUSED_BY_TAG, ",".join([*ids, parent_id]))


def reuse_finished(
    client: MlflowClient,
    experiment_id: str,
    digest: str,
    parent_id: str | None,
    machine: dict[str, str] | None = None,
) -> str | None:
    """resume=true for one job: the id of a FINISHED run of its configuration (on this `machine`, see
    find_finished), marked as reused by the sweep `parent_id` (a single run has none), or None when the
    job has to run."""
    run = find_finished(client, experiment_id, digest, machine)
    if run is None:
        return None
    if parent_id:
        mark_reused(client, run, parent_id)
    return run.info.run_id


def reused_filter(parent_id: str) -> str:
    """search_runs filter for the runs a sweep reused."""
    return f"tags.`{REUSED_BY_TAG}` LIKE '%{parent_id}%'"
