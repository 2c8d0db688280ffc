"""The real CLI in a subprocess, through to the MLflow database: sweeps, failures, interrupts."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import urllib.parse
from pathlib import Path

import psutil
import pytest

from dlbench.telemetry.sampler import MIN_TIMED_SAMPLES
from tests.conftest import TINY

pytestmark = pytest.mark.slow


def children_of(runs, parent_id):
    return [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent_id]


def sweep_parent(runs):
    parents = [r for r in runs if r.data.tags.get("dlbench.kind") == "sweep"]
    assert len(parents) == 1
    return parents[0]


def workers_under(tmp: Path) -> list[psutil.Process]:
    """Worker processes of jobs whose files live under `tmp` (their --job path is there)."""
    found = []
    for p in psutil.process_iter(["cmdline"]):
        cmd = p.info["cmdline"] or []
        if "dlbench.worker" in cmd and any(str(tmp) in c for c in cmd):
            found.append(p)
    return found


def test_two_job_sweep_records_parent_children_series_and_artifacts(cli):
    res = cli.run(["framework=torch", "precision=fp32,amp", *TINY])
    assert res.returncode == 0, res.stderr[-3000:]
    runs = cli.runs()
    parent = sweep_parent(runs)
    assert parent.info.status == "FINISHED"
    kids = children_of(runs, parent.info.run_id)
    assert sorted(r.data.params["precision.name"] for r in kids) == ["amp", "fp32"]
    client = cli.client()
    for run in kids:
        assert run.info.status == "FINISHED"
        m = run.data.metrics
        assert m["throughput"] > 0 and m["throughput_p05"] <= m["throughput"] <= m["throughput_p95"]
        assert m["warmup_s"] > 0 and m["startup_s"] > 0 and m["total_s"] >= m["startup_s"]
        assert m["host_rss_mib_max"] > 50 and "cpu_util_mean" in m
        assert run.data.params["framework.name"] == "torch" and run.data.params["model.params"].isdigit()
        assert float(run.data.params["model.gflops"]) > 0
        assert run.data.tags["version.torch"]
        assert run.data.params["throughput_unit"] == "images"
        assert run.data.tags["run.optimizer"] == "sgd/foreach" and "precision.optimizer" not in run.data.tags
        assert run.data.tags["precision.first_layer_dtype"] == run.data.tags["precision.compute_dtype"]
        assert len(client.get_metric_history(run.info.run_id, "host/cpu_util")) >= 3
        assert len(client.get_metric_history(run.info.run_id, "window/throughput")) == 3
        artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
        assert {
            "config.yaml",
            "overrides.yaml",
            "telemetry.csv",
            "telemetry.png",
            "worker.log",
            "environment.json",
        } <= artifacts
    dtypes = {r.data.params["precision.name"]: r.data.tags["precision.compute_dtype"] for r in kids}
    assert dtypes == {"fp32": "float32", "amp": "bfloat16"}  # CPU: amp means bf16 autocast
    # a timed phase too short for the 10 Hz telemetry says so in the log, once per such job
    rough = [r for r in kids if r.data.metrics["telemetry_samples"] < MIN_TIMED_SAMPLES]
    assert (res.stdout + res.stderr).count("telemetry sample(s), fewer than") == len(rough)


def test_min_timed_s_lengthens_the_windows_until_telemetry_covers_them(cli):
    # The smoke schedule times a few milliseconds; asked for 3 s, the windows get the steps that take
    # (a floor of one step a window, so that only a step slower than a window's whole second would stay at it).
    overrides = ["schedule.min_timed_s=3", "schedule.warmup_steps=3", "schedule.steps_per_window=1"]
    res = cli.run(["framework=torch", *TINY, *overrides], multirun=False)
    assert res.returncode == 0, res.stderr[-3000:]
    (run,) = cli.runs()
    m = run.data.metrics
    assert m["steps_per_window"] > 1 and run.data.params["schedule.min_timed_s"] == "3.0"
    assert m["timed_s"] >= 1.0  # the probe's step and the timed one differ on a busy CPU
    assert m["telemetry_samples"] >= MIN_TIMED_SAMPLES
    log = res.stdout + res.stderr
    assert f"{int(m['steps_per_window'])} steps per window (schedule.min_timed_s)" in log
    assert "fewer than" not in log


def missing_columns(run, keys: list[str]) -> list[str]:
    """Which of a view's column keys (metrics.`x`, params.`x`, tags.`x`) the run has no value for."""
    data = {"metrics": run.data.metrics, "params": run.data.params, "tags": run.data.tags}
    kinds = [key.split(".", 1) for key in keys]
    return [f"{kind}.{name}" for kind, name in kinds if name.strip("`") not in data[kind]]


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="a GPU here would run the cells")
def test_a_gpu_preset_without_a_gpu_names_each_cell_with_its_mode_and_makes_no_report(cli):
    res = cli.run(["+experiment=frameworks_gpu", "framework=torch", "precision=fp32", "model=resnet_cifar"])
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-3000:]
    assert "2 cell(s) not run on this machine" in res.stderr  # eager and compiled, told apart:
    assert "[torch resnet_cifar fp32 train eager]" in out
    assert "[torch resnet_cifar fp32 train torch.compile(default)]" in out
    assert "report: not made: no job of this sweep ran here" in out and "ReportInputError" not in out
    assert [c.split(":")[0] for c in cli.not_run()] == [
        "torch resnet_cifar fp32 train eager device=cuda",
        "torch resnet_cifar fp32 train torch.compile(default) device=cuda",
    ]


def test_the_sweep_link_opens_a_view_of_its_results(cli):
    res = cli.run(["framework=torch", "precision=fp32,amp", *TINY])
    assert res.returncode == 0, res.stderr[-3000:]
    (line,) = [x for x in (res.stdout + res.stderr).splitlines() if "MLflow UI:" in x]
    link = urllib.parse.urlsplit(line.split("MLflow UI: ", 1)[1].strip())
    page, _, query = link.fragment.partition("?")
    (key,) = urllib.parse.parse_qs(query)["viewStateShareKey"]
    assert urllib.parse.parse_qs(query)["workflowType"] == ["machine_learning"]
    client, runs = cli.client(), cli.runs()
    parent = sweep_parent(runs)
    assert page == f"/experiments/{parent.info.experiment_id}/runs"  # the table, not the parent's page
    tags = client.get_experiment(parent.info.experiment_id).tags
    view = json.loads(tags[f"mlflow.sharedViewState.{key}"])  # what the UI loads for that key
    kids = children_of(runs, parent.info.run_id)
    shown = client.search_runs([parent.info.experiment_id], view["searchFilter"])
    assert sorted(r.info.run_id for r in shown) == sorted(r.info.run_id for r in kids)  # this sweep's jobs
    keys = [*view["selectedColumns"], view["orderByKey"]]
    assert {"metrics.`throughput`", "params.`framework.name`", "params.`precision.name`"} <= set(keys)
    assert all(missing_columns(run, keys) == [] for run in kids), [missing_columns(r, keys) for r in kids]
    columns = view["selectedColumns"]
    assert view["columnOrder"][-len(columns) :] == columns  # shown in this order
    assert set(view["columnWidths"]) <= set(view["columnOrder"])  # the UI sizes listed columns only


def test_single_run_has_no_parent(cli):
    res = cli.run(TINY, multirun=False)
    assert res.returncode == 0, res.stderr[-3000:]
    (run,) = cli.runs()
    assert run.info.status == "FINISHED" and "mlflow.parentRunId" not in run.data.tags


@pytest.mark.parametrize("option", ["nope", "pytorch", "torch_schema"])
def test_bad_option_fails_before_anything_runs_in_one_line(cli, option):
    res = cli.run([f"framework={option}", *TINY])
    out = (res.stdout + res.stderr).strip()
    assert res.returncode == 2
    assert out.count("\n") == 0 and f"framework={option} is not an option" in out  # not Hydra's 15 lines
    assert "(options: jax, mxnet, tf, torch;" in out and "_schema" not in out.split("(options: ")[1]
    assert "did you mean torch?" in out or option == "nope"
    assert "Traceback" not in out
    assert not cli.db.exists()  # nothing started, not even the store


def test_crashing_worker_fails_its_job_and_the_sweep_goes_on(cli):
    res = cli.run(["debug.fault=abort,null", *TINY])
    assert res.returncode == 1
    assert "1 job(s) failed" in res.stderr
    runs = cli.runs()
    kids = children_of(runs, sweep_parent(runs).info.run_id)
    by_fault = {r.data.params["debug.fault"]: r for r in kids}
    crashed, fine = by_fault["abort"], by_fault["null"]
    assert crashed.info.status == "FAILED" and crashed.data.tags["failure"] == "crash"
    assert fine.info.status == "FINISHED" and fine.data.metrics["throughput"] > 0
    client = cli.client()
    assert "worker_tail.log" in {a.path for a in client.list_artifacts(crashed.info.run_id)}
    # what was collected before the crash is kept
    assert crashed.data.metrics["warmup_s"] > 0


def test_a_diverged_loss_is_flagged_not_lost(cli):
    res = cli.run(["debug.fault=nan_loss", *TINY])
    assert res.returncode == 0  # the run is kept: its windows are real, its training is not
    [run] = [r for r in cli.runs() if r.data.tags.get("dlbench.kind") == "job"]
    assert run.info.status == "FINISHED" and run.data.tags["dlbench.loss_flag"] == "non-finite"
    assert "the training diverged" in res.stdout + res.stderr


def test_fail_fast_skips_the_rest(cli):
    res = cli.run(["debug.fault=abort,null", "fail_fast=true", *TINY])
    assert res.returncode == 1
    runs = cli.runs()
    kids = children_of(runs, sweep_parent(runs).info.run_id)
    assert len(kids) == 1 and kids[0].data.tags["failure"] == "crash"
    assert "skipped (fail_fast=true" in res.stdout + res.stderr


def test_out_of_memory_is_recorded_as_oom(cli):
    res = cli.run([*TINY, "schedule.batch_size=100000000"], multirun=False)
    assert res.returncode == 1
    (run,) = cli.runs()
    assert run.info.status == "FAILED" and run.data.tags["failure"] == "oom"
    message = run.data.tags["failure.message"]
    assert message.startswith("out of memory at schedule.batch_size=100000000: lower it; ")
    assert "allocate" in message


def test_timeout_kills_the_worker_group(cli):
    res = cli.run(["+experiment=smoke", "model=vgg16", "model.image_size=224", "timeout_s=4"], multirun=False)
    assert res.returncode == 1
    (run,) = cli.runs()
    assert run.info.status == "FAILED" and run.data.tags["failure"] == "timeout"
    assert workers_under(cli.tmp) == []


def test_missing_framework_is_one_line_naming_the_interpreter(cli, tmp_path):
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    python = bare / "bin" / "python"
    res = cli.run([*TINY, f"framework.python={python}"], multirun=False)
    assert res.returncode == 1
    lines = [line for line in (res.stdout + res.stderr).splitlines() if "not installed" in line]
    assert len(lines) == 1 and str(python) in lines[0] and "pip install torch" in lines[0]
    assert "Traceback" not in res.stderr
    (run,) = cli.runs()
    assert run.data.tags["failure"] == "config"


def test_pythons_gives_one_framework_of_a_sweep_its_own_interpreter(cli, tmp_path):
    """A framework installed apart (TF in its own environment, say) still joins a one-command sweep: its
    jobs run under pythons.<name>, recorded as their framework.python; the other frameworks' do not."""
    marker, wrapper = tmp_path / "ran", tmp_path / "torch-python"
    wrapper.write_text(f'#!/bin/sh\necho "$$" >> {marker}\nexec {sys.executable} "$@"\n')
    wrapper.chmod(0o755)
    res = cli.run(["framework=torch,mxnet", "precision=fp32", *TINY, f"pythons.torch={wrapper}"])
    assert res.returncode == 0, res.stderr[-3000:]
    kids = {
        r.data.params["framework.name"]: r
        for r in children_of(cli.runs(), sweep_parent(cli.runs()).info.run_id)
    }
    assert kids["torch"].data.params["framework.python"] == str(wrapper)
    assert kids["mxnet"].data.params["framework.python"] == "null"
    assert len(marker.read_text().split()) == 1  # one torch worker, started through the wrapper
    assert not any(k.startswith("pythons") for r in kids.values() for k in r.data.params)


def test_a_wrapper_that_replaces_pythonpath_gets_one_line_naming_the_fix(cli, tmp_path):
    """The worker imports this checkout's dlbench through PYTHONPATH; a wrapper interpreter that drops it
    (here: -I ignores it, -S the site-packages where this test environment installed dlbench, as another
    environment would not have it) fails with the line that says so, not a bare 'worker died'."""
    wrapper = tmp_path / "tf-python"
    wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} -I -S "$@"\n')
    wrapper.chmod(0o755)
    res = cli.run(["framework=torch", "precision=fp32", *TINY, f"pythons.torch={wrapper}"])
    out = res.stdout + res.stderr
    assert res.returncode != 0
    assert f"framework.python={wrapper} could not import dlbench" in out
    assert "a wrapper must extend PYTHONPATH, not replace it" in out
    assert "Traceback" not in out and "worker died" not in out
    (kid,) = children_of(cli.runs(), sweep_parent(cli.runs()).info.run_id)
    assert kid.info.status == "FAILED"
    assert kid.data.tags["failure"] == "config"
    assert "extend PYTHONPATH" in kid.data.tags["failure.message"]


def test_mlflow_run_id_becomes_the_parent(cli):
    client = cli.client()
    exp = client.create_experiment("outer")
    outer = client.create_run(exp, run_name="started by mlflow run")
    res = cli.run(
        ["precision=fp32,bf16", *TINY], MLFLOW_RUN_ID=outer.info.run_id, MLFLOW_TRACKING_URI=cli.uri
    )
    assert res.returncode == 0, res.stderr[-3000:]
    runs = client.search_runs([exp])
    kids = children_of(runs, outer.info.run_id)
    assert len(kids) == 2 and all(k.info.status == "FINISHED" for k in kids)
    assert len(runs) == 3  # the outer run plus two children: no extra parent
    assert client.get_run(outer.info.run_id).info.status == "RUNNING"  # `mlflow run` closes it itself


def test_repeats_run_fresh_workers_and_record_the_spread(cli):
    res = cli.run([*TINY, "schedule.repeats=2"], multirun=False)
    assert res.returncode == 0, res.stderr[-3000:]
    (run,) = cli.runs()
    m = run.data.metrics
    assert m["repeats_done"] == 2 and m["throughput_spread"] >= 0
    assert (run.data.tags.get("dlbench.spread_flag") == "high") == (m["throughput_spread"] > 0.05)
    client = cli.client()
    assert len(client.get_metric_history(run.info.run_id, "repeat/throughput")) == 2
    assert len(client.get_metric_history(run.info.run_id, "window/throughput")) == 6
    assert "repeat 2/2" in res.stdout + res.stderr


def test_mlflow_run_reproduces_a_sweep_through_the_mlproject(cli):
    mlflow = Path(sys.executable).parent / "mlflow"
    env = cli.env(MLFLOW_TRACKING_URI=cli.uri, PATH=f"{Path(sys.executable).parent}:{cli.env()['PATH']}")
    overrides = f"-m precision=fp32,bf16 {' '.join(TINY)} hydra.sweep.dir={cli.tmp / 'sweep'}"
    res = subprocess.run(
        [str(mlflow), "run", str(Path(__file__).resolve().parents[2]), "--env-manager", "local", "-P", f"overrides={overrides}"],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    client = cli.client()
    (outer,) = client.search_runs(["0"])  # `mlflow run`'s own run, in "Default" (no --experiment-name)
    runs = cli.runs()  # the sweep went to the dlbench experiment, under its own parent
    parent = sweep_parent(runs)
    assert parent.info.status == "FINISHED" and parent.data.tags["dlbench.mlflow_run_id"] == outer.info.run_id
    assert outer.data.tags["dlbench.sweep_run_id"] == parent.info.run_id
    kids = children_of(runs, parent.info.run_id)
    assert sorted(k.data.params["precision.name"] for k in kids) == ["bf16", "fp32"]
    assert all(k.info.status == "FINISHED" for k in kids)
    # the sweep's artifacts beside the database (README), not in mlruns/ of the cwd (`mlflow run` made
    # the store, so "Default" and its run keep MLflow's own location; that run holds no artifacts)
    for run in [parent, *kids]:
        location = Path(client.get_run(run.info.run_id).info.artifact_uri.removeprefix("file://"))
        assert location.is_relative_to(cli.tmp / "mlartifacts"), location
    assert {a.path for a in client.list_artifacts(kids[0].info.run_id)} >= {"config.yaml", "worker.log"}


def test_a_cell_this_machine_cannot_run_is_skipped_with_its_reason_not_failed(cli):
    """oneDNN capped to AVX2 (any x86 CPU then computes like an AVX2-only one): MXNet's amp (bfloat16) cell
    cannot run. The sweep skips it in one line, exits 0, makes no run for it and lists it in the report; the
    other cells run. A single run of that cell also ends 0 with the line, and leaves nothing in the store."""
    cap = {"ONEDNN_MAX_CPU_ISA": "AVX2", "DNNL_MAX_CPU_ISA": "AVX2"}
    res = cli.run(["framework=mxnet,torch", "precision=fp32,amp", *TINY], **cap)
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-3000:]
    assert out.count("not run on this machine: MXNet 1.9.1 computes bfloat16 only with oneDNN") == 1
    assert (
        "1 cell(s) not run on this machine" in res.stderr
        and "[mxnet resnet_cifar amp train hybridized]" in res.stderr
    )
    runs = cli.runs()
    parent = sweep_parent(runs)
    kids = children_of(runs, parent.info.run_id)
    assert parent.info.status == "FINISHED" and parent.data.tags["dlbench.jobs_not_run"] == "1"
    assert sorted((r.data.params["framework.name"], r.data.params["precision.name"]) for r in kids) == [
        ("mxnet", "fp32"),
        ("torch", "amp"),
        ("torch", "fp32"),
    ]
    assert all(r.info.status == "FINISHED" for r in kids)
    assert [c.split(":")[0] for c in cli.not_run()] == ["mxnet resnet_cifar amp train hybridized"]
    report = (cli.tmp / "sweep" / "report" / "report.md").read_text()
    section = report.split("## Not run on this machine", 1)[1]
    assert "| mxnet resnet_cifar amp train hybridized | MXNet 1.9.1 computes bfloat16" in section
    assert "ONEDNN_MAX_CPU_ISA=AVX2" in section and "1 not run on this machine" in report
    # the article's claims, re-tested on these runs: MXNet on small images against PyTorch, on this CPU
    claims = report.split("## The 2019 article's claims, re-tested", 1)[1].split("\n## ", 1)[0]
    small = next(line for line in claims.splitlines() if line.startswith("| On small images"))
    verdict, where = small.split(" | ")[1:3]
    assert verdict in ("holds", "does not hold", "no measurable difference") and where.startswith("on a CPU")
    assert "the article measured a GPU" in where
    assert (
        "- Small images: resnet_cifar train fp32: MXNet " in claims
        and "against the fastest other, PyTorch" in claims
    )
    assert (
        "| On large inputs (ImageNet-size images) TensorFlow and PyTorch are faster than MXNet. | not testable here |"
        in claims
    )

    single = cli.run(["framework=mxnet", "precision=amp", *TINY], multirun=False, **cap)
    assert single.returncode == 0, single.stderr[-3000:]
    assert "not run on this machine" in single.stdout + single.stderr
    assert len(cli.runs()) == len(runs)  # no run made for it


def test_a_reader_that_goes_away_loses_no_run(cli):
    """`run.py -m ... | head -1`: the pipe closes after the first line while the sweep goes on. Every job
    still finishes and is recorded, the exit code is 0, and no line becomes a logging traceback."""
    proc = subprocess.Popen(
        cli.args(["framework=torch", "precision=fp32,amp", *TINY]),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=cli.env(),
        cwd=Path(__file__).resolve().parents[2],
    )
    assert proc.stdout.readline()  # what `head -1` reads, then it exits
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=600) == 0, err[-2000:]
    assert "Logging error" not in err and "BrokenPipeError" not in err, err[-2000:]
    jobs = children_of(cli.runs(), sweep_parent(cli.runs()).info.run_id)
    assert sorted(r.info.status for r in jobs) == ["FINISHED", "FINISHED"]


def test_a_silent_worker_gets_a_line_naming_its_step(cli):
    # debug.fault=hang: the worker stops at its first timed step and says nothing more; after a minute of
    # that the console names where it is (as for a first step autotuning for minutes), then the cap ends it
    res = cli.run([*TINY, "debug.fault=hang", "timeout_s=75"], multirun=False)
    assert res.returncode == 1
    out = res.stdout + res.stderr
    assert "running: nothing new from the worker for 60 s" in out, out[-3000:]
    assert "for 120 s" not in out  # one line a minute, not one per poll
    (run,) = cli.runs()
    assert run.data.tags["failure"] == "timeout"
    assert workers_under(cli.tmp) == []
