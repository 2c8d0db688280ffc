"""One report over several stores (`--uri A --uri B`), and the machine as a variant: stores filled as jobs
fill them (RunLogger, host.* and gpu.* tags as host_facts and the telemetry write them), the CLI in a
subprocess. Runs measured on different hardware must never meet in one table or one sentence."""

from __future__ import annotations

from pathlib import Path

from dlbench.report import build_report
from dlbench.tracking.store import open_store
from tests.unit.test_report import GPU, gpu_series, log_job, make_sweep, run_cli

XEON = {"host.host": "vm", "host.cpu": "Intel(R) Xeon(R) Processor", "host.cpu_count": "16"}
H200 = XEON | {"gpu.gpu0_name": "NVIDIA H200", "host.git_commit": "6435614" + "0" * 33}
H100 = XEON | {"gpu.gpu0_name": "NVIDIA H100 80GB HBM3", "host.git_commit": "dd93507" + "0" * 33}


def sitting(db: Path, jobs: list[tuple[str, tuple[float, float, float], dict[str, str]]]) -> str:
    """A store with one finished sweep of the given jobs (what, (p05, median, p95), tags); its URI."""
    uri = f"sqlite:///{db}"
    client, eid = open_store(uri, "dlbench")
    sweep = make_sweep(client, eid, "+experiment=frameworks_gpu")
    for what, tput, tags in jobs:
        log_job(client, eid, sweep.run_id, what, tput, metrics=GPU, tags=tags, series=gpu_series())
    sweep.finish("FINISHED")
    return uri


def test_two_stores_of_one_machine_kind_make_one_comparison(tmp_path):
    """Sittings on two machines of one kind (different commits, fresh hosts) are one machine: their runs
    share a table and a finding, the overview names both stores, and each run's GPU series is read from
    the store that holds it."""
    a = sitting(tmp_path / "a.db", [("tf resnet50 amp train", (190, 200, 210), H200)])
    later = H200 | {"host.git_commit": H100["host.git_commit"] + "+dirty"}  # another tree, the same hardware
    b = sitting(tmp_path / "b.db", [("torch resnet50 amp train", (95, 100, 105), later)])
    out = tmp_path / "out"
    done = run_cli("--uri", a, "--uri", b, "--out", str(out), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("report for experiment dlbench: 2 finished, 0 failed")
    md = (out / "report.md").read_text()
    assert f"Stores `{a}` (1 runs); `{b}` (1 runs); experiment `dlbench` in each" in md
    assert "## resnet50 train\n" in md and "machine=" not in md
    assert "tf is 2.0× faster than torch" in md and "different sweeps" in md
    assert (
        "- Host vm: Intel(R) Xeon(R) Processor, 16 CPUs, ? GiB; git 643561400000, dd9350700000+dirty\n" in md
    )
    assert (out / "utilization-resnet50-train.png").stat().st_size > 0


def test_runs_on_different_gpus_are_never_compared(tmp_path):
    """One store holding runs of an H200 and an H100 (a shared server): a table per machine, named in its
    title, no framework sentence across them, and the overview lists each machine with its runs."""
    uri = sitting(
        tmp_path / "mlflow.db",
        [
            ("tf resnet50 amp train", (190, 200, 210), H200),
            ("torch resnet50 amp train", (95, 100, 105), H100),
            ("torch resnet50 fp32 train", (45, 50, 55), H100),
        ],
    )
    client, _ = open_store(uri, "dlbench")
    report = build_report(client, uri, tmp_path / "out", experiment="dlbench")
    titles = sorted(g.title for g in report.analysis.groups)
    assert titles == [
        "resnet50 train (machine=NVIDIA H100 80GB HBM3, Intel(R) Xeon(R) Processor ×16)",
        "resnet50 train (machine=NVIDIA H200, Intel(R) Xeon(R) Processor ×16)",
    ]
    frameworks = [f.text for f in report.analysis.findings if f.kind in ("framework", "tie")]
    assert frameworks == [], frameworks  # tf on one GPU against torch on another is no result
    assert any("amp speeds up" in f.text or "mixed precision" in f.text for f in report.analysis.findings)
    md = report.markdown.read_text()
    assert "- Machine `NVIDIA H200, Intel(R) Xeon(R) Processor ×16` (1 runs). Host vm:" in md
    assert "- Machine `NVIDIA H100 80GB HBM3, Intel(R) Xeon(R) Processor ×16` (2 runs). Host vm:" in md


def test_several_stores_refuse_a_run_id_and_name_a_missing_store(tmp_path):
    a = sitting(tmp_path / "a.db", [("tf resnet50 amp train", (190, 200, 210), H200)])
    done = run_cli("--uri", a, "--uri", a.replace("a.db", "b.db"), cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert f"no MLflow database at {tmp_path / 'b.db'}" in done.stderr
    b = sitting(tmp_path / "b.db", [("torch resnet50 amp train", (95, 100, 105), H200)])
    done = run_cli("--uri", a, "--uri", b, "--run", "0123abcd", cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "give one --uri with --run, or --experiment NAME to combine the stores" in done.stderr
    listed = run_cli("--list", "uri=" + a, "uri=" + b, cwd=tmp_path)  # Hydra-style words repeat too
    assert listed.returncode == 0 and listed.stdout.count("experiment 'dlbench'") == 2


def test_one_serving_cell_on_two_machines_keeps_both_rows(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client, eid = open_store(uri, "dlbench")
    sweep = make_sweep(client, eid, "mode=serve")
    for tags, p50 in ((H200, 2.0), (H100, 3.0)):
        metrics = {"latency_p50_ms": p50, "latency_p90_ms": 2 * p50, "qps": 100.0}
        log_job(client, eid, sweep.run_id, "torch resnet_cifar fp32 serve", None, metrics=metrics,
                tags=tags | {"serve.valid": "VALID"})  # fmt: skip
    sweep.finish("FINISHED")
    md = build_report(client, uri, tmp_path / "out", run_id=sweep.run_id).markdown.read_text()
    section = md.split("## resnet_cifar serving, single_stream", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| torch")]
    assert len(rows) == 2 and "| machine |" in section
    assert rows[0].startswith("| torch | fp32 |") and "| 2.00 |" in rows[0] + rows[1]
    assert any(r.endswith("| NVIDIA H100 80GB HBM3, Intel(R) Xeon(R) Processor ×16 |") for r in rows)


def test_converge_runs_of_two_machines_are_two_tasks(tmp_path):
    """The same seeds on an H200 and an H100: the configuration's hash is the same, but neither machine's
    runs supersede the other's, and their seeds are never pooled in one cell."""
    from tests.unit.test_accuracy_report import log_converge

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client, eid = open_store(uri, "dlbench")
    sweep = make_sweep(client, eid, "mode=converge schedule.seeds=[0,1]")
    for tags in (H200, H100):
        for precision in ("fp32", "amp"):
            for seed in (0, 1):
                log_converge(client, eid, sweep.run_id, f"torch small_cnn {precision}", seed,
                             [0.80, 0.86 + 0.01 * seed], tags=tags)  # fmt: skip
    sweep.finish("FINISHED")
    accuracy = build_report(client, uri, tmp_path / "out", run_id=sweep.run_id).accuracy
    assert len(accuracy.runs) == 8
    assert sorted(t.title for t in accuracy.tasks) == [
        "small_cnn on fashion_mnist: accuracy (machine=NVIDIA H100 80GB HBM3, Intel(R) Xeon(R) Processor ×16)",
        "small_cnn on fashion_mnist: accuracy (machine=NVIDIA H200, Intel(R) Xeon(R) Processor ×16)",
    ]
    assert all(len(c.runs) == 2 for t in accuracy.tasks for c in t.cells)
    assert [v.kind for v in accuracy.verdicts].count("duplicates") == 0 and len(accuracy.verdicts) == 2
