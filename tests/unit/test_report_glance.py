"""The report's "At a glance" section against a real sqlite store filled as jobs fill it: a row per
precision, a column per framework and execution mode with compiled columns first, each figure in the table's
units with its energy per sample, and no section where nothing is compared."""

from __future__ import annotations

from dlbench.report import build_report
from dlbench.tracking.store import open_store
from tests.unit.test_report import GPU, log_job, make_sweep


def section(md: str, heading: str) -> str:
    return md.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]


def test_glance_lays_out_frameworks_and_modes_compiled_first(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client, eid = open_store(uri, "dlbench")
    sweep = make_sweep(client, eid, "+experiment=frameworks_gpu precision=fp32,amp")
    cells = [  # framework, knobs, precision, median img/s, J per image
        ("torch", {}, "fp32", 2_000, 0.30),
        ("torch", {}, "amp", 6_039, 0.114),
        ("tf", {"xla": True}, "fp32", 2_400, 0.25),
        ("tf", {"xla": True}, "amp", 7_183, 0.096),
        ("torch", {"compile": True}, "amp", 7_000, 0.1),
        ("jax", {}, "amp", 7_100, 0.0975),
    ]
    for fw, knobs, precision, tput, joules in cells:
        log_job(client, eid, sweep.run_id, f"{fw} resnet50 {precision} train", (tput * 0.99, tput, tput * 1.01),
                metrics=GPU | {"energy_j_per_sample": joules}, knobs=knobs,
                params={"throughput_unit": "images"})  # fmt: skip
    sweep.finish("FINISHED")
    md = build_report(client, uri, tmp_path / "out", run_id=sweep.run_id).markdown.read_text()
    assert md.index("## Findings") < md.index("## At a glance") < md.index("## resnet50 train, compiled")
    glance = section(md, "At a glance")
    assert (
        "compiled: jax (jit), tf (xla), torch (torch.compile(default)); eager/graph: torch (eager)" in glance
    )
    table = [line for line in glance.splitlines() if line.startswith("|") and "---" not in line]
    assert table == [
        "| resnet50 train: images/s · mJ per image | tf (xla) | torch (torch.compile(default)) | jax (jit) "
        "| torch (eager) |",
        "| fp32 | 2,400 · 250 | – | – | 2,000 · 300 |",
        "| amp | 7,183 · 96.0 | 7,000 · 100 | 7,100 · 97.5 | 6,039 · 114 |",
    ]


def test_rates_in_millions_and_no_glance_without_a_comparison(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client, eid = open_store(uri, "dlbench")
    sweep = make_sweep(client, eid, "model=ncf")
    for fw, tput in (("torch", 178.3e6), ("jax", 160.0e6)):
        log_job(client, eid, sweep.run_id, f"{fw} ncf amp train", (tput * 0.99, tput, tput * 1.01),
                metrics=GPU | {"energy_j_per_sample": 3.37e-6}, knobs={"compile": True} if fw == "torch" else {})  # fmt: skip
    sweep.finish("FINISHED")
    glance = section(
        build_report(client, uri, tmp_path / "a", run_id=sweep.run_id).markdown.read_text(), "At a glance"
    )
    assert "| ncf train: M samples/s · µJ per sample | torch (torch.compile(default)) | jax (jit) |" in glance
    assert "| amp | 178.3 · 3.37 | 160.0 · 3.37 |" in glance

    alone = make_sweep(client, eid, "model=ncf framework=torch")
    log_job(client, eid, alone.run_id, "torch ncf amp train", (99, 100, 101), metrics=GPU)
    alone.finish("FINISHED")
    assert (
        "## At a glance"
        not in build_report(client, uri, tmp_path / "b", run_id=alone.run_id).markdown.read_text()
    )


def test_a_cell_whose_gpu_waited_on_its_host_is_marked(tmp_path):
    """torch.compile at a small batch kept the GPU busy 45% of the timed phase: its cell says so, since the
    column's gap is then the host's dispatch; a cell of too few telemetry samples to tell is not marked."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client, eid = open_store(uri, "dlbench")
    sweep = make_sweep(client, eid, "+experiment=frameworks_gpu precision=amp")
    busy = {"gpu_util_mean": 45.0, "telemetry_samples": 50}
    for fw, knobs, tput, metrics in (
        ("tf", {"xla": True}, 4_990, {"gpu_util_mean": 95.0, "telemetry_samples": 50}),
        ("torch", {"compile": True}, 1_935, busy),
        ("jax", {}, 5_000, {"gpu_util_mean": 30.0, "telemetry_samples": 3}),
    ):
        log_job(client, eid, sweep.run_id, f"{fw} resnet50 amp train", (tput * 0.99, tput, tput * 1.01),
                metrics=GPU | metrics, knobs=knobs, params={"throughput_unit": "images"})  # fmt: skip
    sweep.finish("FINISHED")
    glance = section(
        build_report(client, uri, tmp_path / "out", run_id=sweep.run_id).markdown.read_text(), "At a glance"
    )
    assert "| amp | 4,990 · 1.50 | 1,935 · 1.50 ◔ | 5,000 · 1.50 † |" in glance
    assert "◔: the GPU was busy less than 70% of the timed phase, waiting on its host" in glance
