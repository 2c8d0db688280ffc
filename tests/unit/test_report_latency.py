"""The report's serving section against a real sqlite store filled as mode=serve jobs fill it: the
percentiles and LoadGen's verdict appear as recorded, and a finished serve run is never a failed one."""

from __future__ import annotations

from dlbench.report import build_report
from dlbench.tracking.store import open_store
from tests.unit.test_report import log_job, make_sweep

SERVED = {"latency_p50_ms": 3.25, "latency_p90_ms": 4.5, "latency_p99_ms": 9.75, "latency_max_ms": 12.0}


def test_serve_runs_get_a_latency_table_per_scenario(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client, eid = open_store(uri, "dlbench")
    sweep = make_sweep(client, eid, "framework=tf,torch mode=serve")
    for fw, valid, scale in (("tf", "VALID", 1.0), ("torch", "INVALID", 2.0)):
        metrics = {k: v * scale for k, v in SERVED.items()} | {"qps": 200.0 / scale, "serve_batch_mean": 1.0}
        log_job(client, eid, sweep.run_id, f"{fw} resnet_cifar fp32 serve", None, metrics=metrics,
                tags={"serve.valid": valid})  # fmt: skip
    log_job(client, eid, sweep.run_id, "torch resnet_cifar fp32 train", (95, 100, 105))
    sweep.finish("FINISHED")
    report = build_report(client, uri, tmp_path / "out", run_id=sweep.run_id)
    md = report.markdown.read_text()
    section = md.split("## resnet_cifar serving, single_stream", 1)[1].split("\n## ", 1)[0]
    rows = {line.split(" | ")[0].strip("| "): line for line in section.splitlines() if line.startswith("| t")}
    assert "| 3.25 | 4.50 |" in rows["tf"] and rows["tf"].endswith("| 200 q/s | 1.00 | VALID |")
    assert "| 6.50 | 9.00 |" in rows["torch"] and rows["torch"].endswith("| INVALID |")
    assert "MLPerf's result for this scenario: p90 latency" in section
    assert "Jobs: 3 finished, 0 failed" in md  # a serve run has no throughput and is no failure
    assert len(report.latency.runs) == 2 and len(report.analysis.finished) == 1
    chart = report.out_dir / "latency-resnet_cifar-single_stream.png"
    assert (
        chart in report.files
        and chart.stat().st_size > 0
        and "](latency-resnet_cifar-single_stream.png)" in md
    )


def test_server_runs_at_several_rates_are_rows_and_a_p99_against_rate_chart(tmp_path):
    """A sweep over serve.target_qps keeps one row per rate (not the newest run of the cell) and draws p99
    against the rate LoadGen offered, with its bound."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client, eid = open_store(uri, "dlbench")
    sweep = make_sweep(
        client, eid, "framework=tf,torch mode=serve serve.scenario=server serve.target_qps=100,400"
    )
    for fw in ("tf", "torch"):
        for qps, p99 in ((100.0, 8.0), (400.0, 40.0)):
            params = {"loadgen.target_qps": str(qps), "loadgen.target_latency_ns": "100000000"}
            params["serve.scenario"] = "server"
            metrics = SERVED | {"latency_p99_ms": p99, "samples_per_s": qps, "serve_batch_mean": 2.0}
            log_job(client, eid, sweep.run_id, f"{fw} resnet_cifar fp32 serve", None, metrics=metrics,
                    tags={"serve.valid": "VALID"}, params=params)  # fmt: skip
    sweep.finish("FINISHED")
    report = build_report(client, uri, tmp_path / "out", run_id=sweep.run_id)
    md = report.markdown.read_text()
    section = md.split("## resnet_cifar serving, server", 1)[1].split("\n## ", 1)[0]
    assert sum(line.startswith(("| tf", "| torch")) for line in section.splitlines()) == 4
    assert "| 40.00 |" in section and "| 8.00 |" in section
    chart = report.out_dir / "qps-resnet_cifar.png"
    assert chart in report.files and chart.stat().st_size > 0 and "](qps-resnet_cifar.png)" in md
