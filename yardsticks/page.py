"""The harness-vs-yardstick results page (Markdown + CSV) of GPU runs, e.g. results/h200/torch.md.

    python yardsticks/page.py --source NAME DB [BARE_JSONL] [--source ...] --out results/h200/NAME
                              [--title "..."] [--notes notes.md]

A source is one device command (or several sharing one database, e.g. `scripts/tools/gpu_run.sh`'s OUT): its
MLflow database and, if any, the yardstick output (BARE lines) of the same command. Every finished or killed
job becomes a CSV row. Ratios (harness vs the hand-written loop, DALI-fed vs synthetic, compiled vs eager)
are computed only inside one source and between jobs with the same optimizer, from the numbers in the
table, each against the goal the yardsticks set. A job whose loss ended NaN or inf trained nothing sound:
it is listed, marked `diverged`, and left out of every ratio. Each job's `guards` column holds what the
guards recorded (another process on the GPU, throttling, clock drops, clocks-event reasons). The page ends
with its provenance: the command, the generator's git commit and each database's SHA-256, so a reader can
tell which data made it. --notes appends a hand-written section (method, commands, what the numbers mean).

Like the yardsticks beside it, this imports nothing from dlbench: it reads dlbench's MLflow records as any
MLflow user would, by the tag and parameter names dlbench writes (the TAGS below; a test checks that they
are dlbench's), so the lab's proof does not depend on the code it judges.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import math
import shlex
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from mlflow.tracking import MlflowClient

ROOT = Path(__file__).resolve().parents[1]
# The MLflow record names dlbench writes (dlbench.core.names, dlbench.telemetry.guards), as a reader sees them.
PARENT_TAG = "mlflow.parentRunId"
KIND_TAG, KIND_JOB = "dlbench.kind", "job"
GPU_FLAG_TAG, CLOCK_FLAG_TAG, CLOCK_EVENTS_TAG = (
    "dlbench.gpu_flag",
    "dlbench.clock_flag",
    "guard.clock_events",
)
EXECUTION_TAG = "run.execution"  # eager, graph, xla, hybridized, torch.compile(<mode>)
SERVE_VALID_TAG, SERVE_SCENARIO_TAG = (
    "serve.valid",
    "serve.scenario",
)  # mode=serve: LoadGen's verdict, scenario

COLUMNS = [
    ("run", "run"), ("framework", "p:framework.name"), ("execution", f"t:{EXECUTION_TAG}"),
    ("model", "p:model.name"), ("mode", "p:mode"),
    ("precision", "p:precision.name"),
    ("data", "p:dataset.name"), ("compile", "compile"), ("prng", "prng"), ("optimizer", "optimizer"),
    ("batch", "p:batch_size"),
    ("status", "status"), ("throughput", "m:throughput"), ("p05", "m:throughput_p05"),
    ("p95", "m:throughput_p95"), ("warmup_s", "m:warmup_s"), ("startup_s", "m:startup_s"),
    ("gpu_util", "m:gpu_util_mean"), ("gpu_mem_mib", "m:gpu_mem_used_mib_max"),
    ("torch_mem_mib", "m:framework_mem_mib_max"), ("power_w", "m:power_w_mean"),
    ("j_per_sample", "m:energy_j_per_sample"), ("data_wait", "m:data_wait_frac"), ("cpu_util", "m:cpu_util_mean"),
    ("loss_last", "m:loss_last"), ("compute_dtype", "t:precision.compute_dtype"),
    ("tf32", "tf32"), ("loss_scale", "t:precision.loss_scale"), ("guards", "guards"),
]  # fmt: skip
DECIMALS = {"j_per_sample": ".3f", "data_wait": ".3f", "loss_last": ".3f"}
ONE_DECIMAL = ("warmup_s", "startup_s", "gpu_util", "cpu_util")


def _optimizer(params: dict, tags: dict) -> str:
    """The optimizer kernel a finished job reported (`run.optimizer`, `precision.optimizer` before): SGD's
    as its implementation alone (fused, foreach), others as kind/implementation (adam/fused); for a killed
    job, its setting (auto = fused on CUDA). Runs from before framework.optimizer_impl existed used torch's
    default SGD (foreach on CUDA). A killed job of another framework reported none and has no such setting:
    unknown (–)."""
    if params.get("mode") != "train":
        return "-"
    reported = tags.get("run.optimizer") or tags.get("precision.optimizer")
    if reported:
        return reported.removeprefix("sgd/")
    if params.get("framework.name", "torch") != "torch":
        return "–"
    impl = params.get("framework.optimizer_impl", "foreach")
    return "fused" if impl == "auto" and params.get("device") == "cuda" else impl


def _tf32(tags: dict) -> str | None:
    """Whether TF32 ran, as the framework reported it: PyTorch's cuDNN flag, TensorFlow's one switch, JAX's
    matmul precision."""
    for key in ("precision.tf32_cudnn", "precision.tf32", "precision.tf32_matmul"):
        if key in tags:
            return tags[key]
    return None


ONE_CALL = (
    " (one call)"  # greedy decoding compiled whole (model.decode_loop=device, a yardstick's --loop device)
)


def _compile(params: dict) -> str:
    """The compiler a job's step ran under: torch.compile's mode, "xla" for TensorFlow's, "jit" for JAX's,
    "-" for none; with " (one call)" where greedy decoding ran every position in one compiled call."""
    whole = ONE_CALL if params.get("model.decode_loop") == "device" and params.get("mode") != "train" else ""
    if params.get("framework.xla") == "True":
        return "xla" + whole
    if params.get("framework.name") == "jax":
        return "jit" + whole if params.get("framework.jit") == "True" else "-"
    if params.get("framework.compile") != "True":
        return "-"
    return params.get("framework.compile_mode", "default")


def _prng_label(params: dict, tags: dict) -> str:
    """The generator a JAX training job drew its dropout masks from (the worker's run.prng tag, else its
    framework.prng setting; unknown (–) for a job from before either existed), "-" where none applies: two
    jobs that differ only in it are two configurations, and the page must tell them apart."""
    if params.get("framework.name") != "jax" or params.get("mode") != "train":
        return "-"
    return tags.get("run.prng") or params.get("framework.prng") or "–"


def _guards(tags: dict) -> str:
    """What the guards recorded for the job (telemetry/guards.py): another process on the GPU, throttling or
    a clock drop (the flags), and the clocks-event reasons of the timed phase; "-" when none."""
    found = [
        tags.get(GPU_FLAG_TAG) and f"gpu: {tags[GPU_FLAG_TAG]}",
        tags.get(CLOCK_FLAG_TAG) and f"clock: {tags[CLOCK_FLAG_TAG]}",
        tags.get(CLOCK_EVENTS_TAG),
    ]
    return "; ".join(f for f in found if f) or "-"


def _dali_settings(params: dict) -> str:
    """How DALI fed a real-data job: decoder and threads (auto decodes on the GPU when there is one)."""
    decode = params.get("data.decode", "auto")
    where = "CPU" if decode == "cpu" else "GPU"
    return f"{where} decode, {params.get('data.num_threads', '?')} threads"


SERVE_COLUMNS = [
    "scenario",
    "max_batch",
    "valid",
    "p50_ms",
    "p90_ms",
    "p99_ms",
    "max_ms",
    "rate",
    "batch_mean",
]


def _serving(params: dict, metrics: dict, tags: dict) -> dict:
    """A mode=serve job's LoadGen figures: its scenario and verdict, latency percentiles (ms) and its rate
    (queries/s where LoadGen reports them, else samples/s; MultiStream reports neither)."""
    rate = next((f"{metrics[k]:,.1f} {u}/s" for k, u in (("qps", "queries"), ("samples_per_s", "samples")) if k in metrics), "–")  # fmt: skip
    figures = {f"{q}_ms": metrics.get(f"latency_{q}_ms") for q in ("p50", "p90", "p99", "max")}
    return {"scenario": tags.get(SERVE_SCENARIO_TAG, params.get("serve.scenario")), "max_batch": params.get("serve.max_batch"),
            "valid": tags.get(SERVE_VALID_TAG, "–"), **figures, "rate": rate, "batch_mean": metrics.get("serve_batch_mean")}  # fmt: skip


def serving_table(rows: list[dict]) -> list[str]:
    """One line per finished mode=serve job: what LoadGen measured (empty when no job served)."""
    served = [r for r in rows if r["_serve"] and r["status"] == "FINISHED"]
    if not served:
        return []
    head = ["run", "framework", "execution", "model", "precision", *SERVE_COLUMNS]
    md = ["## Serving (MLPerf LoadGen)", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in served:
        s = r["_serve"]
        cells = [fmt(r[k]) for k in head[:5]] + [fmt(s[k], ",.2f" if k.endswith("_ms") or k == "batch_mean" else "") for k in SERVE_COLUMNS]  # fmt: skip
        md.append("| " + " | ".join(cells) + " |")
    return [*md, ""]


def rows_from(name: str, db: Path) -> list[dict]:
    client = MlflowClient(tracking_uri=f"sqlite:///{db.resolve()}")
    out = []
    for exp in client.search_experiments():
        for run in client.search_runs([exp.experiment_id], max_results=5000):
            p, m, t = run.data.params, run.data.metrics, run.data.tags
            if t.get(KIND_TAG) != KIND_JOB:
                continue
            derived = {
                "run": name,
                "status": run.info.status,
                "optimizer": _optimizer(p, t),
                "compile": _compile(p),
                "prng": _prng_label(p, t),
                "guards": _guards(t),
                "tf32": _tf32(t),
            }
            row = {}
            for col, src in COLUMNS:
                kind, _, key = src.partition(":")
                row[col] = derived[col] if not key else {"p": p, "m": m, "t": t}[kind].get(key)
            tokens = p.get("model.batch_tokens")  # a translation batch is sized in tokens, not sentences
            if tokens and tokens != "0":
                row["batch"] = f"{tokens} tokens"
            loss = m.get("loss_last")
            row["diverged"] = loss is not None and not math.isfinite(loss)
            if row["diverged"]:
                row["status"] = "FINISHED, diverged"
            row["_prng"] = row["prng"] if row["prng"] not in ("-", "–") else None  # unknown: pairs with any
            row["_start"] = run.info.start_time
            row["_sweep"] = t.get(PARENT_TAG)
            row["_dali"] = _dali_settings(p)
            row["_versions"] = {k: v for k, v in t.items() if k.startswith(("version.", "gpu."))}
            row["_serve"] = _serving(p, m, t) if p.get("mode") == "serve" else None
            out.append(row)
    return out


def bare_from(name: str, path: Path) -> list[dict]:
    """The BARE lines of a yardstick's output: yardsticks/bare_loop.py (ResNet-50 and friends, `samples_per_s`
    in img/s) or bare_{ssd300,transformer,ncf}.py (`model`, `mode`, `throughput`, `unit`), read
    into one shape."""
    out = []
    for line in path.read_text().splitlines():
        if line.startswith("BARE "):
            b = json.loads(line.removeprefix("BARE "))
            b["run"] = name  # bare loops before --optimizer existed used torch's default (foreach)
            b.setdefault("framework", "torch")  # yardsticks/bare_tf_*.py say "tf", bare_jax_*.py "jax"
            if b["framework"] == "tf":  # its compiler is XLA, or none (graph mode)
                b["compile"], b["compile_mode"] = bool(b.get("xla")), "xla"
            elif b["framework"] == "jax":  # jax.jit, or op by op (--no-jit)
                b["compile"], b["compile_mode"] = bool(b.get("jit", True)), "jit"
            if b.get("loop") == "device":  # bare_{tf,jax}_transformer.py --loop device
                b["compile_mode"] += ONE_CALL
            b.setdefault("optimizer", "foreach")
            b.setdefault("compile_mode", "default")
            b.setdefault("model", "resnet50")
            b.setdefault("mode", "train")
            b.setdefault("unit", "img/s")
            b.setdefault("throughput", b.get("samples_per_s"))
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


MODEL_NAMES = {"resnet50": "ResNet-50", "ssd300": "SSD300", "transformer": "Transformer", "ncf": "NCF"}
FRAMEWORK_NAMES = {"torch": "PyTorch", "tf": "TensorFlow", "mxnet": "MXNet", "jax": "JAX"}


def _optimizer_label(optimizer: str) -> str:
    """'fused' -> 'SGD fused', 'adam/fused' -> 'Adam fused'; a kind alone (TensorFlow's 'sgd') -> 'SGD'."""
    if optimizer in ("sgd", "adam"):
        return {"sgd": "SGD", "adam": "Adam"}[optimizer]
    kind, _, impl = optimizer.rpartition("/")
    return f"{kind.capitalize() if kind else 'SGD'} {impl}"


def _bare_matches(r: dict, b: dict) -> bool:
    """Does harness row r run the yardstick line b's configuration (framework, model, mode, precision, compiler,
    the optimizer kernel in training, the batch where the yardstick names one: in samples, or in tokens)?
    A Transformer line timed with `--mask auto` (no attention mask on unpadded batches: another kernel
    than the harness's, kept to measure that difference) is no yardstick for it, nor is a JAX training line
    whose PRNG (its dropout masks' generator) differs from the one the harness job recorded."""
    if b.get("mask") == "auto" or b["framework"] != r["framework"]:
        return False
    if r.get("_prng") and b.get("prng") and b["prng"] != r["_prng"]:
        return False
    same_compile = r["compile"] == (b["compile_mode"] if b["compile"] else "-")
    same_opt = b["mode"] != "train" or r["optimizer"].rpartition("/")[2] == b["optimizer"]
    if "batch_tokens" in b:
        same_batch = str(r["batch"]) == f"{b['batch_tokens']} tokens"
    else:
        same_batch = "batch" not in b or str(r["batch"]) == str(b["batch"])
    return same_compile and same_opt and same_batch


@dataclass
class Pair:
    """A sound harness job and the yardstick lines of its configuration in the same run."""

    row: dict
    refs: list[float]
    unit: str

    @property
    def pct(self) -> list[float]:
        return [100 * self.row["throughput"] / x for x in self.refs]

    @property
    def cell(self) -> tuple[str, str, str, str, str, str, str]:
        r = self.row
        return (
            FRAMEWORK_NAMES.get(r["framework"], r["framework"]),
            MODEL_NAMES.get(r["model"], r["model"]),
            r["mode"],
            r["precision"].upper(),
            r["compile"],
            r["prng"],
            str(r["batch"]),
        )


def parity_pairs(rows: list[dict], bare: list[dict]) -> list[Pair]:
    """Every sound synthetic harness job that a yardstick line of the same run measured too."""
    pairs = []
    for r in rows:
        if r["status"] != "FINISHED" or r["data"] != "synthetic":
            continue
        refs = [
            b
            for b in bare
            if (b["model"], b["mode"], b["precision"]) == (r["model"], r["mode"], r["precision"])
            and b["run"] == r["run"]
        ]
        refs = [b for b in refs if _bare_matches(r, b) and b["throughput"] and b.get("loss_finite", True)]
        if refs:
            pairs.append(Pair(r, [b["throughput"] for b in refs], refs[0]["unit"]))
    return pairs


def harness_vs_bare(pairs: list[Pair]) -> list[str]:
    """One line per sound harness job that a yardstick line of the same run measured too."""
    lines = []
    for p in pairs:
        r = p.row
        fw = FRAMEWORK_NAMES.get(r["framework"], r["framework"])
        what = f"{fw} {MODEL_NAMES.get(r['model'], r['model'])} {r['precision'].upper()} {r['mode']}"
        what += f", {_optimizer_label(r['optimizer'])}" if r["mode"] == "train" else ""
        compiler, one_call = r["compile"].removesuffix(ONE_CALL), r["compile"].endswith(ONE_CALL)
        if compiler == "xla":
            what += ", XLA"
        elif compiler == "jit":
            what += ", jax.jit"
        elif compiler != "-":
            what += f", torch.compile {r['compile']}"
        elif r["framework"] == "tf":
            what += ", graph (no XLA)"
        what += ", every position in one call" if one_call else ""
        what += f", PRNG {r['_prng']}" if r["_prng"] else ""
        lines.append(f"- [{r['run']}] harness vs hand-written loop, {what}: {r['throughput']:,.0f} vs {_span(p.refs)} "
                     f"{p.unit} = {_span(p.pct, '.1f')}%{_of_median(p)} (goal ≥ 99%).")  # fmt: skip
    return lines


def _of_median(p: Pair) -> str:
    """With three or more yardstick runs of a cell (a host-bound one, timed alternately with its harness),
    the ratio to their median as well: the range alone is as wide as the yardstick's run-to-run spread."""
    if len(p.refs) < 3:
        return ""
    mid = statistics.median(p.refs)
    return f", {100 * p.row['throughput'] / mid:.1f}% of their median {mid:,.0f}"


def parity_table(pairs: list[Pair], runs: list[str]) -> list[str]:
    """Harness / yardstick by cell (framework, model, mode, precision, compiler, batch), one column per run that
    paired any: where each cell stands across runs at a glance (the ratio lines give the figures). Where a JAX
    training job recorded its dropout generator, a prng column keeps the two generators' cells apart."""
    cols = [n for n in runs if any(p.row["run"] == n for p in pairs)]
    if not cols:
        return []
    with_prng = any(p.row["_prng"] for p in pairs)
    table: dict[tuple, dict[str, list[float]]] = {}
    for p in pairs:
        cell = p.cell if with_prng else p.cell[:5] + p.cell[6:]
        table.setdefault(cell, {}).setdefault(p.row["run"], []).extend(p.pct)
    prng = ["prng"] if with_prng else []
    head = ["framework", "model", "mode", "precision", "compile", *prng, "batch", *cols]
    md = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for cell in sorted(table):
        ratios = [f"{_span(table[cell][c], '.1f')}%" if c in table[cell] else "" for c in cols]
        md.append("| " + " | ".join([*cell, *ratios]) + " |")
    return ["## Harness vs yardstick by cell", "", *md, ""]


REAL_DATA = {"resnet50": "imagenet", "ssd300": "coco2017"}  # the DALI-fed data set of each image model


def dali_vs_synthetic(rows: list[dict]) -> list[str]:
    """Each DALI-fed job against the synthetic job of its framework, model, mode, precision, optimizer and
    compiler (the same sweep's first)."""
    lines = []
    for model, data in REAL_DATA.items():
        for d in sound(rows, model=model, data=data):
            match = dict(
                framework=d["framework"],
                model=model,
                mode=d["mode"],
                precision=d["precision"],
                optimizer=d["optimizer"],
                compile=d["compile"],
            )
            synthetic = sound(rows, **match, data="synthetic")
            synthetic.sort(key=lambda s: s["_sweep"] != d["_sweep"])  # the same sweep's first, if it ran one
            for s in synthetic[:1]:
                pct = 100 * d["throughput"] / s["throughput"]
                goal = (
                    "; goal ≥ 97%"
                    if (model, d["mode"], d["precision"]) == ("resnet50", "train", "amp")
                    else ""
                )
                opt = f", {_optimizer_label(d['optimizer'])}" if d["optimizer"] != "-" else ""
                opt += f", {d['compile']}" if d["compile"] != "-" else ""
                fw = f"{FRAMEWORK_NAMES[d['framework']]} " if d["framework"] != "torch" else ""
                lines.append(f"- [{d['run']}] DALI-fed ({d['_dali']}) vs synthetic, {fw}{MODEL_NAMES[model]} {d['precision']} "
                             f"{d['mode']}{opt}: {d['throughput']:,.0f} vs {s['throughput']:,.0f} img/s = {pct:.1f}% (data_wait "
                             f"{100 * d['data_wait']:.1f}%, GPU util {d['gpu_util']:.0f}% vs {s['gpu_util']:.0f}%{goal}).")  # fmt: skip
    return lines


RESNET50_GOAL = 7500  # img/s, ResNet-50 training on one H200 (7,000 before the fused optimizer)
GOAL_MIN_BATCH = 256  # the goal was set for batches this large; smaller ones pay per-step launch costs


GOAL_GPU = "H200"  # the card the goal was set on: another card's figure is shown without it


def _goal(batch: object, gpu: str | None) -> str:
    """The goal that applies to this job: none on another card (a run's `version.gpu` tag names it)."""
    if gpu and GOAL_GPU not in gpu:
        return f"the goal of {RESNET50_GOAL:,} is for an {GOAL_GPU}"
    try:
        large = int(str(batch).split()[0]) >= GOAL_MIN_BATCH
    except ValueError:
        large = False
    return (
        f"goal ≥ {RESNET50_GOAL:,}"
        if large
        else f"the goal of {RESNET50_GOAL:,} is for batch ≥ {GOAL_MIN_BATCH}"
    )


def compiled(rows: list[dict]) -> list[str]:
    lines = []
    for c in sound(rows, framework="torch", model="resnet50", mode="train", data="synthetic"):
        if c["compile"] == "-" or c["precision"] not in ("amp", "bf16"):
            continue
        lines.append(f"- [{c['run']}] torch.compile ({c['compile']}), ResNet-50 {c['precision'].upper()} train, SGD {c['optimizer']}, "
                     f"batch {c['batch']}: {c['throughput']:,.0f} img/s ({_goal(c['batch'], c['_versions'].get('version.gpu'))}); compilation is in warmup_s = {c['warmup_s']:.0f} s.")  # fmt: skip
    return lines


def ratio_lines(rows: list[dict], pairs: list[Pair], runs: list[str]) -> list[str]:
    out = []
    for name in runs:
        mine = [r for r in rows if r["run"] == name]
        out += (
            harness_vs_bare([p for p in pairs if p.row["run"] == name])
            + dali_vs_synthetic(mine)
            + compiled(mine)
        )
    return out


def git_commit() -> str:
    """HEAD of this checkout, with '+dirty' when the tree has changes; 'unknown' outside git."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=5
        ).stdout.strip()

    try:
        head, dirty = git("rev-parse", "HEAD"), git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return (head + ("+dirty" if dirty else "")) if head else "unknown"


@dataclass
class Source:
    """One --source: a name, its MLflow database and optionally a yardstick output file."""

    name: str
    db: Path
    bare: Path | None = None


def digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()[:16]


def versions_line(rows: list[dict]) -> str:
    """The versions the jobs recorded, the GPU's once and the libraries framework by framework: on one
    machine TensorFlow's CUDA 12 libraries and PyTorch's CUDA 13 are both "version.cuda", and a page that
    merged them would name one of the two for every job. A key with several values lists them all."""
    shared: dict[str, set[str]] = {}
    per: dict[str, dict[str, set[str]]] = {}
    for r in rows:
        for key, value in r["_versions"].items():
            where = (
                shared
                if key.startswith("gpu.") or key == "version.gpu"
                else per.setdefault(r["framework"] or "-", {})
            )
            where.setdefault(key, set()).add(str(value))

    def joined(d: dict[str, set[str]]) -> str:
        return ", ".join(f"{k} {' / '.join(sorted(v))}" for k, v in sorted(d.items()))

    parts = ([joined(shared)] if shared else []) + [f"{fw}: {joined(d)}" for fw, d in sorted(per.items())]
    return "Versions: " + "; ".join(parts)


def write_page(
    sources: list[Source], out: Path, title: str, notes: Path | None, command: str
) -> tuple[Path, Path, int]:
    """Write OUT.md and OUT.csv; return their paths and the number of jobs."""
    rows, bare = [], []
    for s in sources:
        rows += rows_from(s.name, s.db)
        bare += bare_from(s.name, s.bare) if s.bare else []
    order = [s.name for s in sources]
    rows.sort(key=lambda r: (r["model"], r["mode"], r["data"], r["framework"] or "", r["compile"], r["precision"], order.index(r["run"]), r["_start"]))  # fmt: skip
    out.parent.mkdir(parents=True, exist_ok=True)
    names = [n for n, _ in COLUMNS]
    csv_path, md_path = out.with_suffix(".csv"), out.with_suffix(".md")
    with open(csv_path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=names, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    pairs = parity_pairs(rows, bare)  # once: the ratio lines and the by-cell table both read them
    md = [f"# {title}", "", f"Generated by `python yardsticks/page.py` from the MLflow databases of the runs (provenance at the end); CSV: [{csv_path.name}]({csv_path.name}).",
          "", versions_line(rows), "", "## Ratios", "",
          "Each ratio compares jobs of one run (one device command or one machine's consecutive commands) and one optimizer.",
          "", *ratio_lines(rows, pairs, order), "", *parity_table(pairs, order), *serving_table(rows), "## All jobs", "",
          "| " + " | ".join(names) + " |", "|" + "---|" * len(names)]  # fmt: skip
    for r in rows:
        cells = [fmt(r[n], DECIMALS.get(n, ",.1f" if n in ONE_DECIMAL else ",.0f")) for n in names]
        md.append("| " + " | ".join(cells) + " |")
    if notes:
        md += ["", notes.read_text().rstrip()]
    md += ["", "## Provenance", "", f"- Command: `{command}`", f"- Generator: dlbench git {git_commit()}"]
    for s in sources:
        jobs = sum(1 for r in rows if r["run"] == s.name)
        extra = f", bare loop {s.bare.name} sha256 {digest(s.bare)}" if s.bare else ""
        md.append(f"- Source {s.name}: {s.db.name} sha256 {digest(s.db)} ({jobs} jobs){extra}")
    md_path.write_text("\n".join(md) + "\n")
    return md_path, csv_path, len(rows)


def main(argv: list[str] | None = None) -> int:
    """The command line: parse the sources, refuse a missing file with one line (exit 2), write the page."""
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(prog="python yardsticks/page.py", description="a GPU results page (md + csv)")
    p.add_argument("--source", nargs="+", action="append", required=True, metavar="NAME DB [BARE]")
    p.add_argument("--out", type=Path, required=True, help="path without suffix: writes OUT.md and OUT.csv")
    p.add_argument("--title", default="dlbench on one GPU")
    p.add_argument("--notes", type=Path, help="Markdown appended after the tables")
    a = p.parse_args(argv)
    sources = []
    for spec in a.source:
        if len(spec) not in (2, 3):
            print(f"page: --source {' '.join(spec)}: give NAME DB [BARE_JSONL]", file=sys.stderr)
            return 2
        missing = [path for path in spec[1:] if not Path(path).is_file()]
        if missing:
            print(f"page: {missing[0]} does not exist", file=sys.stderr)
            return 2
        sources.append(Source(spec[0], Path(spec[1]), Path(spec[2]) if len(spec) == 3 else None))
    command = shlex.join(["python", "yardsticks/page.py", *argv])
    md, csv_path, jobs = write_page(sources, a.out, a.title, a.notes, command)
    print(f"page: {jobs} jobs -> {md}, {csv_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
