"""Write a GPU results page (Markdown + CSV) from the MLflow databases of GPU runs.

Usage: python scripts/results_page.py --run NAME DB [BARE_JSONL] [--run ...] --out docs/results/h200
       [--title "..."] [--notes notes.md]

A --run is one device command (or several sharing one database): its MLflow database and, if any,
the bare_loop.py output of the same command. Every finished or killed job becomes a CSV row. Ratios
(harness vs the hand-written loop, DALI-fed vs synthetic, compiled vs eager) are computed only inside
one run and between jobs with the same optimizer, from the numbers in the table. A job whose loss
ended NaN or inf trained nothing sound: it is listed, marked `diverged`, and left out of every ratio.
--notes appends a hand-written section (method, commands, what the numbers mean).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from pathlib import Path

from mlflow.tracking import MlflowClient

COLUMNS = [
    ("run", "run"), ("model", "p:model.name"), ("mode", "p:mode"), ("precision", "p:precision.name"),
    ("data", "p:dataset.name"), ("compile", "compile"), ("optimizer", "optimizer"), ("batch", "p:batch_size"),
    ("status", "status"), ("throughput", "m:throughput"), ("p05", "m:throughput_p05"),
    ("p95", "m:throughput_p95"), ("warmup_s", "m:warmup_s"), ("startup_s", "m:startup_s"),
    ("gpu_util", "m:gpu_util_mean"), ("gpu_mem_mib", "m:gpu_mem_used_mib_max"),
    ("torch_mem_mib", "m:framework_mem_mib_max"), ("power_w", "m:power_w_mean"),
    ("j_per_sample", "m:energy_j_per_sample"), ("data_wait", "m:data_wait_frac"), ("cpu_util", "m:cpu_util_mean"),
    ("loss_last", "m:loss_last"), ("compute_dtype", "t:precision.compute_dtype"),
    ("tf32", "t:precision.tf32_cudnn"), ("loss_scale", "t:precision.loss_scale"),
]  # fmt: skip
DECIMALS = {"j_per_sample": ".3f", "data_wait": ".3f", "loss_last": ".3f"}
ONE_DECIMAL = ("warmup_s", "startup_s", "gpu_util", "cpu_util")


def _optimizer(params: dict, tags: dict) -> str:
    """The SGD kernel a finished job reported; for a killed one, its setting (auto = fused on CUDA).
    Runs from before framework.optimizer_impl existed used torch's default SGD (foreach on CUDA)."""
    if params.get("mode") != "train":
        return "-"
    if "precision.optimizer" in tags:
        return tags["precision.optimizer"].removeprefix("sgd/")
    impl = params.get("framework.optimizer_impl", "foreach")
    return "fused" if impl == "auto" and params.get("device") == "cuda" else impl


def _compile(params: dict) -> str:
    if params.get("framework.compile") != "True":
        return "-"
    return params.get("framework.compile_mode", "default")


def rows_from(name: str, db: Path) -> list[dict]:
    client = MlflowClient(tracking_uri=f"sqlite:///{db.resolve()}")
    out = []
    for exp in client.search_experiments():
        for run in client.search_runs([exp.experiment_id], max_results=5000):
            p, m, t = run.data.params, run.data.metrics, run.data.tags
            if t.get("dlbench.kind") != "job":
                continue
            derived = {
                "run": name,
                "status": run.info.status,
                "optimizer": _optimizer(p, t),
                "compile": _compile(p),
            }
            row = {}
            for col, src in COLUMNS:
                kind, _, key = src.partition(":")
                row[col] = derived[col] if not key else {"p": p, "m": m, "t": t}[kind].get(key)
            loss = m.get("loss_last")
            row["diverged"] = loss is not None and not math.isfinite(loss)
            if row["diverged"]:
                row["status"] = "FINISHED, diverged"
            row["_start"] = run.info.start_time
            row["_sweep"] = t.get("mlflow.parentRunId")
            row["_versions"] = {k: v for k, v in t.items() if k.startswith(("version.", "gpu."))}
            out.append(row)
    return out


def bare_from(name: str, path: Path) -> list[dict]:
    out = []
    for line in path.read_text().splitlines():
        if line.startswith("BARE "):
            b = json.loads(line.removeprefix("BARE "))
            b["run"] = name  # bare loops before --optimizer existed used torch's default (foreach)
            b.setdefault("optimizer", "foreach")
            b.setdefault("compile_mode", "default")
            out.append(b)
    return out


def fmt(value, spec: str = ",.0f") -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return "NaN" if math.isnan(value) else format(value, spec)
    return str(value)


def sound(rows: list[dict], **match) -> list[dict]:
    """Finished, non-diverged jobs with these column values."""
    return [
        r for r in rows if r["status"] == "FINISHED" and all(str(r[k]) == str(v) for k, v in match.items())
    ]


def _span(values: list[float], spec: str = ",.0f") -> str:
    lo, hi = format(min(values), spec), format(max(values), spec)
    return lo if lo == hi else f"{lo}–{hi}"


def harness_vs_bare(rows: list[dict], bare: list[dict]) -> list[str]:
    lines = []
    for b_opt in sorted({b["optimizer"] for b in bare if not b["compile"] and b["precision"] == "amp"}):
        refs = [
            b["samples_per_s"]
            for b in bare
            if not b["compile"] and b["precision"] == "amp" and b["optimizer"] == b_opt
        ]
        for r in sound(
            rows,
            model="resnet50",
            mode="train",
            precision="amp",
            data="synthetic",
            compile="-",
            optimizer=b_opt,
        ):
            pct = [100 * r["throughput"] / x for x in refs]
            lines.append(f"- [{r['run']}] harness vs hand-written loop, ResNet-50 AMP train, SGD {b_opt}: "
                         f"{r['throughput']:,.0f} vs {_span(refs)} img/s = {_span(pct, '.1f')}% (goal ≥ 99%).")  # fmt: skip
    return lines


def dali_vs_synthetic(rows: list[dict]) -> list[str]:
    lines = []
    for d in sound(rows, model="resnet50", data="imagenet", compile="-"):
        match = dict(model="resnet50", mode=d["mode"], precision=d["precision"], optimizer=d["optimizer"])
        synthetic = sound(rows, **match, data="synthetic", compile="-")
        synthetic.sort(key=lambda s: s["_sweep"] != d["_sweep"])  # the same sweep's first, if it ran one
        for s in synthetic[:1]:
            pct = 100 * d["throughput"] / s["throughput"]
            goal = "; goal ≥ 97%" if (d["mode"], d["precision"]) == ("train", "amp") else ""
            opt = f", SGD {d['optimizer']}" if d["optimizer"] != "-" else ""
            lines.append(f"- [{d['run']}] DALI-fed vs synthetic, ResNet-50 {d['precision']} {d['mode']}{opt}: "
                         f"{d['throughput']:,.0f} vs {s['throughput']:,.0f} img/s = {pct:.1f}% (data_wait "
                         f"{100 * d['data_wait']:.1f}%, GPU util {d['gpu_util']:.0f}% vs {s['gpu_util']:.0f}%{goal}).")  # fmt: skip
    return lines


def compiled(rows: list[dict], bare: list[dict]) -> list[str]:
    lines = []
    for c in sound(rows, model="resnet50", mode="train", precision="amp", data="synthetic"):
        if c["compile"] == "-":
            continue
        refs = [b["samples_per_s"] for b in bare if b["compile"] and b["compile_mode"] == c["compile"] and b["optimizer"] == c["optimizer"]]  # fmt: skip
        extra = f"; bare compiled loop {_span(refs)}" if refs else ""
        lines.append(f"- [{c['run']}] torch.compile ({c['compile']}), ResNet-50 AMP train, SGD {c['optimizer']}: "
                     f"{c['throughput']:,.0f} img/s{extra} (goal ≥ 7,000); compilation is in warmup_s = {c['warmup_s']:.0f} s.")  # fmt: skip
    return lines


def ratio_lines(rows: list[dict], bare: list[dict], runs: list[str]) -> list[str]:
    out = []
    for name in runs:
        mine, my_bare = [r for r in rows if r["run"] == name], [b for b in bare if b["run"] == name]
        out += harness_vs_bare(mine, my_bare) + dali_vs_synthetic(mine) + compiled(mine, my_bare)
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--run", nargs="+", action="append", required=True, metavar="NAME DB [BARE]")
    p.add_argument("--out", type=Path, required=True, help="path without suffix: writes OUT.md and OUT.csv")
    p.add_argument("--title", default="dlbench on one GPU")
    p.add_argument("--notes", type=Path, help="Markdown appended after the tables")
    a = p.parse_args()
    rows, bare = [], []
    for spec in a.run:
        if len(spec) not in (2, 3):
            print(f"results_page: --run {' '.join(spec)}: give NAME DB [BARE_JSONL]", file=sys.stderr)
            return 2
        for path in map(Path, spec[1:]):
            if not path.exists():
                print(f"results_page: {path} does not exist", file=sys.stderr)
                return 2
        rows += rows_from(spec[0], Path(spec[1]))
        bare += bare_from(spec[0], Path(spec[2])) if len(spec) == 3 else []
    order = [spec[0] for spec in a.run]
    rows.sort(key=lambda r: (r["model"], r["mode"], r["data"], r["compile"], r["precision"], order.index(r["run"]), r["_start"]))  # fmt: skip
    a.out.parent.mkdir(parents=True, exist_ok=True)
    names = [n for n, _ in COLUMNS]
    with open(a.out.with_suffix(".csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=names, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    versions = {}
    for r in rows:
        versions.update(r["_versions"])
    csv_name = a.out.with_suffix(".csv").name
    md = [f"# {a.title}", "", f"Generated by `scripts/results_page.py` from the MLflow databases of the runs; CSV: [{csv_name}]({csv_name}).",
          "", "Versions: " + ", ".join(f"{k} {v}" for k, v in sorted(versions.items())), "", "## Ratios", "",
          "Each ratio compares jobs of one run (one device command or one machine's consecutive commands) and one optimizer.",
          "", *ratio_lines(rows, bare, order), "", "## All jobs", "",
          "| " + " | ".join(names) + " |", "|" + "---|" * len(names)]  # fmt: skip
    for r in rows:
        cells = [fmt(r[n], DECIMALS.get(n, ",.1f" if n in ONE_DECIMAL else ",.0f")) for n in names]
        md.append("| " + " | ".join(cells) + " |")
    if a.notes:
        md += ["", a.notes.read_text().rstrip()]
    a.out.with_suffix(".md").write_text("\n".join(md) + "\n")
    print(f"results_page: {len(rows)} jobs -> {a.out.with_suffix('.md')}, {a.out.with_suffix('.csv')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
