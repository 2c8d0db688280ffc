"""The bulk series path stores exactly what MLflow's public log_batch stores."""

from __future__ import annotations

import math

import pytest
from mlflow.entities import Metric
from mlflow.exceptions import MlflowException

from dlbench.tracking.bulk_metrics import bulk_log_metrics
from dlbench.tracking.run_logger import RunLogger, flatten
from dlbench.tracking.store import open_store


def history(client, run_id, key):
    return [
        (m.step, m.timestamp, m.value if not math.isnan(m.value) else "nan")
        for m in client.get_metric_history(run_id, key)
    ]


def test_bulk_and_public_paths_store_identical_series(tmp_path):
    client, exp = open_store(f"sqlite:///{tmp_path / 'm.db'}", "bulk")
    rows = [
        {"t": 1000.0 + 0.1 * i, "gpu0/util": float(i % 7), "host/rss_mib": 100.0 + i} for i in range(2500)
    ]
    rows[3]["gpu0/util"] = float("nan")
    fast = RunLogger.create(client, exp, "fast")
    assert fast.series(rows) == 5000
    slow = RunLogger.create(client, exp, "slow")
    items = [
        Metric(k, v, int(r["t"] * 1000), i) for i, r in enumerate(rows) for k, v in r.items() if k != "t"
    ]
    slow._log_metrics(items)  # MLflow's public log_batch, 1,000 at a time
    for key in ("gpu0/util", "host/rss_mib"):
        assert history(client, fast.run_id, key) == history(client, slow.run_id, key)
        assert len(history(client, fast.run_id, key)) == 2500
    # the run's latest values (what the UI's table shows) agree too
    assert client.get_run(fast.run_id).data.metrics == client.get_run(slow.run_id).data.metrics
    assert client.get_run(fast.run_id).data.metrics["host/rss_mib"] == 100.0 + 2499


def test_bulk_path_refuses_a_deleted_run_as_mlflow_does(tmp_path):
    client, exp = open_store(f"sqlite:///{tmp_path / 'm.db'}", "bulk")
    run = RunLogger.create(client, exp, "gone")
    client.delete_run(run.run_id)
    with pytest.raises(MlflowException, match="active"):
        bulk_log_metrics(client, run.run_id, [Metric("x", 1.0, 0, 0)])
    with pytest.raises(MlflowException, match="active"):
        client.log_batch(run.run_id, metrics=[Metric("x", 1.0, 0, 0)])


def test_flatten_nests_with_dots():
    assert flatten({"a": {"b": 1, "c": {"d": None}}, "e": "x"}) == {"a.b": 1, "a.c.d": None, "e": "x"}
