"""Write a GPU results page (Markdown + CSV) from the MLflow database(s) a GPU run produced.

Usage: python scripts/results_page.py --db run1/mlflow.db [--db run2/mlflow.db ...]
       [--bare run1/bare.jsonl] --out docs/results/h200 [--title "..."] [--notes notes.md]

Every finished or killed job run becomes a CSV row; the Markdown page has the table and the ratios
that matter (harness vs the hand-written loop, DALI-fed vs synthetic, compiled vs eager), each
computed from the numbers in the table. --notes appends a hand-written section (method, commands,
what the numbers mean) so the page says how it was measured.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

from mlflow.tracking import MlflowClient

COLUMNS = [
    ("model", "p:model.name"), ("mode", "p:mode"), ("precision", "p:precision.name"), ("data", "p:dataset.name"),
    ("compile", "p:framework.compile"), ("batch", "p:batch_size"), ("status", "status"),
    ("throughput", "m:throughput"), ("p05", "m:throughput_p05"), ("p95", "m:throughput_p95"),
    ("warmup_s", "m:warmup_s"), ("startup_s", "m:startup_s"), ("gpu_util", "m:gpu_util_mean"),
    ("gpu_mem_mib", "m:gpu_mem_used_mib_max"), ("torch_mem_mib", "m:framework_mem_mib_max"),
    ("power_w", "m:power_w_mean"), ("j_per_sample", "m:energy_j_per_sample"), ("data_wait", "m:data_wait_frac"),
    ("cpu_util", "m:cpu_util_mean"), ("compute_dtype", "t:precision.compute_dtype"), ("tf32", "t:precision.tf32_cudnn"),
    ("loss_scale", "t:precision.loss_scale"),
]  # fmt: skip


def rows_from(db: Path) -> list[dict]:
    client = MlflowClient(tracking_uri=f"sqlite:///{db.resolve()}")
    out = []
    for exp in client.search_experiments():
        for run in client.search_runs([exp.experiment_id], max_results=5000):
            if run.data.tags.get("dlbench.kind") != "job":
                continue
            row = {}
            for name, src in COLUMNS:
                kind, _, key = src.partition(":")
                value = {"p": run.data.params, "m": run.data.metrics, "t": run.data.tags}.get(kind, {}).get(
                    key
                )
                row[name] = run.info.status if kind == "status" else value
            row["_versions"] = {k: v for k, v in run.data.tags.items() if k.startswith(("version.", "gpu."))}
            out.append(row)
    return out


def fmt(value, spec: str = ",.0f") -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return format(value, spec)
    return str(value)


def find(rows: list[dict], **match) -> dict | None:
    for r in rows:
        if all(str(r[k]) == str(v) for k, v in match.items()) and r["status"] == "FINISHED":
            return r
    return None


def ratio_lines(rows: list[dict], bare: list[dict]) -> list[str]:
    lines = []
    base = dict(model="resnet50", mode="train", precision="amp")
    synth = find(rows, **base, data="synthetic", compile="False")
    eager_bare = [b["samples_per_s"] for b in bare if not b["compile"] and b["precision"] == "amp"]
    if synth and eager_bare:
        lo, hi = min(eager_bare), max(eager_bare)
        lines.append(f"- Harness vs hand-written loop (ResNet-50 AMP train, same command): {synth['throughput']:,.0f} vs "
                     f"{lo:,.0f}–{hi:,.0f} img/s (bare loop before and after the sweep) = "
                     f"{100 * synth['throughput'] / max(eager_bare):.1f}–{100 * synth['throughput'] / min(eager_bare):.1f}% (goal ≥ 99%).")  # fmt: skip
    for precision in ("amp", "bf16"):
        for mode in ("train", "infer"):
            s = find(
                rows, model="resnet50", mode=mode, precision=precision, data="synthetic", compile="False"
            )
            d = find(rows, model="resnet50", mode=mode, precision=precision, data="imagenet", compile="False")
            if s and d:
                lines.append(f"- DALI-fed vs synthetic, ResNet-50 {precision} {mode}: {d['throughput']:,.0f} vs {s['throughput']:,.0f} "
                             f"img/s = {100 * d['throughput'] / s['throughput']:.1f}% (data_wait {100 * d['data_wait']:.1f}%, "
                             f"GPU util {d['gpu_util']:.0f}% vs {s['gpu_util']:.0f}%; goal ≥ 97% for amp train).")  # fmt: skip
    cs = find(rows, **base, data="synthetic", compile="True")
    cd = find(rows, **base, data="imagenet", compile="True")
    comp_bare = [b["samples_per_s"] for b in bare if b["compile"]]
    if cs:
        extra = f"; bare compiled loop {max(comp_bare):,.0f}" if comp_bare else ""
        dali = f"; DALI-fed {cd['throughput']:,.0f}" if cd else ""
        lines.append(f"- torch.compile, ResNet-50 AMP train: {cs['throughput']:,.0f} img/s synthetic{dali}{extra} "
                     f"(goal ≥ 7,000); compilation is in warmup_s = {cs['warmup_s']:.0f} s.")  # fmt: skip
    return lines


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--db", action="append", type=Path, required=True)
    p.add_argument("--bare", action="append", type=Path, default=[])
    p.add_argument("--out", type=Path, required=True, help="path without suffix: writes OUT.md and OUT.csv")
    p.add_argument("--title", default="dlbench on one GPU")
    p.add_argument("--notes", type=Path, help="Markdown appended after the tables")
    a = p.parse_args()
    for path in [*a.db, *a.bare]:
        if not path.exists():
            print(f"results_page: {path} does not exist", file=sys.stderr)
            return 2
    rows = [r for db in a.db for r in rows_from(db)]
    rows.sort(key=lambda r: (r["model"], r["mode"], r["data"], r["compile"], r["precision"]))
    bare = [
        json.loads(line.removeprefix("BARE "))
        for f in a.bare
        for line in f.read_text().splitlines()
        if line.startswith("BARE ")
    ]
    a.out.parent.mkdir(parents=True, exist_ok=True)
    names = [n for n, _ in COLUMNS]
    with open(a.out.with_suffix(".csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=names, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    versions = {}
    for r in rows:
        versions.update(r["_versions"])
    md = [f"# {a.title}", "", "Generated by `scripts/results_page.py` from the MLflow databases of the run; "
          f"CSV: [{a.out.with_suffix('.csv').name}]({a.out.with_suffix('.csv').name}).", "",
          "Versions: " + ", ".join(f"{k} {v}" for k, v in sorted(versions.items())), "", "## Ratios", "",
          *ratio_lines(rows, bare), "", "## All jobs", "",
          "| " + " | ".join(names) + " |", "|" + "---|" * len(names)]  # fmt: skip
    for r in rows:
        cells = [
            fmt(
                r[n],
                ".3f"
                if n in ("j_per_sample", "data_wait")
                else ",.1f"
                if n in ("warmup_s", "startup_s", "gpu_util", "cpu_util")
                else ",.0f",
            )
            for n in names
        ]
        md.append("| " + " | ".join(cells) + " |")
    if a.notes:
        md += ["", a.notes.read_text().rstrip()]
    a.out.with_suffix(".md").write_text("\n".join(md) + "\n")
    print(f"results_page: {len(rows)} jobs -> {a.out.with_suffix('.md')}, {a.out.with_suffix('.csv')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
