"""The report's PNG charts, drawn with matplotlib's Agg canvas (no display, no pyplot global state).

Each function writes one file and returns its path, or None when there is nothing to draw, so the
report never shows an empty chart.
"""

from __future__ import annotations

import math
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from dlbench.report.analysis import BASELINE, Analysis, Group
from dlbench.report.load import CPU_SERIES, GPU_SERIES, History

FRAMEWORK_COLORS = {"tf": "#ff7f0e", "torch": "#d62728", "mxnet": "#1f77b4", "jax": "#2ca02c"}
PRECISION_COLORS = {"fp32": "#4c72b0", "tf32": "#8172b3", "amp": "#dd8452", "bf16": "#55a868"}
OTHER_COLORS = ("#937860", "#da8bc3", "#8c8c8c", "#ccb974", "#64b5cd")
DPI = 100


def _color(table: dict[str, str], key: str, index: int) -> str:
    return table.get(key, OTHER_COLORS[index % len(OTHER_COLORS)])


def _save(fig: Figure, path: Path) -> Path:
    FigureCanvasAgg(fig)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    return path


def _base_labels(ax, bars, labels: list[str]) -> None:
    """Value labels at the foot of each bar, clear of the error bars that sit on top."""
    for bar, text in zip(bars, labels, strict=True):
        ax.annotate(
            text,
            (bar.get_x() + bar.get_width() / 2, 0),
            xytext=(0, 3),
            textcoords="offset points",
            ha="center",
            va="bottom",
            fontsize=7,
            color="white",
            fontweight="bold",
        )


def _nan0(x: float) -> float:
    return 0.0 if math.isnan(x) else max(x, 0.0)


def _grouped_bars(ax, n_cats: int, precisions: list[str], value, label: str) -> None:
    """One bar per precision in each of n_cats categories; value(k, precision) -> (y, low, high) or
    None; whiskers from low to high, each bar labelled with label.format(y)."""
    width = 0.8 / len(precisions)
    for i, precision in enumerate(precisions):
        xs, ys, lo, hi = [], [], [], []
        for k in range(n_cats):
            v = value(k, precision)
            if v is None:
                continue
            y, y_lo, y_hi = v
            xs.append(k - 0.4 + width * (i + 0.5))
            ys.append(y)
            lo.append(_nan0(y - y_lo))
            hi.append(_nan0(y_hi - y))
        bars = ax.bar(
            xs, ys, width * 0.92, yerr=[lo, hi], capsize=3, label=precision,
            color=_color(PRECISION_COLORS, precision, i),
        )  # fmt: skip
        _base_labels(ax, bars, [label.format(y) for y in ys])


def throughput_chart(group: Group, path: Path) -> Path | None:
    """Grouped bars: frameworks on x, one bar per precision, p5–p95 as (asymmetric) error bars."""
    df = group.frame()
    if df.empty:
        return None
    frameworks = list(dict.fromkeys(df["framework"]))
    precisions = list(dict.fromkeys(df["precision"]))
    fig = Figure(figsize=(max(5.0, 1.6 * len(frameworks) * max(1, len(precisions)) * 0.6 + 2), 3.8))
    ax = fig.add_subplot()

    def value(k: int, precision: str) -> tuple[float, float, float] | None:
        row = df[(df.framework == frameworks[k]) & (df.precision == precision)]
        if row.empty:
            return None
        r = row.iloc[0]
        return r.throughput, r.p05, r.p95

    _grouped_bars(ax, len(frameworks), precisions, value, "{:.3g}")
    ax.set_xticks(range(len(frameworks)), frameworks)
    ax.set_ylabel(f"{group.unit}/s (median)")
    ax.set_title(f"Throughput: {group.title} — bars median, whiskers p5–p95", fontsize=10)
    ax.legend(title="precision", fontsize=8, title_fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)
    return _save(fig, path)


def speedup_chart(analysis: Analysis, path: Path) -> Path | None:
    """Speed-up of each reduced precision over fp32, per framework and model/mode; whiskers are the
    conservative range (interval ratios), the dashed line is 'no change'."""
    cats: list[tuple[str, dict[str, tuple[float, float, float]]]] = []
    precisions: list[str] = []
    for g in analysis.groups:
        per_fw: dict[str, dict[str, tuple[float, float, float]]] = {}
        for e in g.entries:
            if e.job.precision == BASELINE or math.isnan(e.speedup):
                continue
            per_fw.setdefault(e.job.framework, {})[e.job.precision] = (e.speedup, *e.speedup_range)
            if e.job.precision not in precisions:
                precisions.append(e.job.precision)
        cats += [(f"{fw}\n{g.title}", v) for fw, v in per_fw.items()]
    if not cats:
        return None
    fig = Figure(figsize=(max(5.0, 1.1 * len(cats) * max(1, len(precisions)) + 1.5), 3.8))
    ax = fig.add_subplot()
    _grouped_bars(ax, len(cats), precisions, lambda k, precision: cats[k][1].get(precision), "{:.2f}×")
    ax.axhline(1.0, color="black", linestyle="--", linewidth=1)
    ax.set_xticks(range(len(cats)), [c for c, _ in cats], fontsize=8)
    ax.set_ylabel("× fp32 throughput")
    ax.set_title("Speed-up over fp32 (same framework, model, mode)", fontsize=10)
    ax.legend(title="precision", fontsize=8, title_fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)
    return _save(fig, path)


def utilization_chart(group: Group, histories: dict[str, History], path: Path) -> Path | None:
    """GPU utilization over time, one line per framework on one axis per precision. Runs without GPU
    samples (CPU-only) fall back to the host's CPU utilization, and the title says so."""
    drawn = [e for e in group.entries if e.job.run_id in histories]
    if not drawn:
        return None
    precisions = list(dict.fromkeys(e.job.precision for e in drawn))
    kinds = {histories[e.job.run_id].key for e in drawn}
    if kinds == {GPU_SERIES}:
        title, ylabel = f"GPU utilization over time: {group.title}", f"GPU util (%) [{GPU_SERIES}]"
    elif kinds == {CPU_SERIES}:
        title = f"CPU utilization over time (no GPU samples — fallback {CPU_SERIES}): {group.title}"
        ylabel = "host CPU util (%)"
    else:
        title = f"GPU utilization over time ({CPU_SERIES} where a run has no GPU samples): {group.title}"
        ylabel = "util (%)"
    fig = Figure(figsize=(max(6.0, 4.2 * len(precisions)), 3.6))
    axes = fig.subplots(1, len(precisions), sharey=True, squeeze=False)[0]
    for ax, precision in zip(axes, precisions, strict=True):
        for i, e in enumerate(x for x in drawn if x.job.precision == precision):
            h = histories[e.job.run_id]
            color = _color(FRAMEWORK_COLORS, e.job.framework, i)
            label = e.job.framework + (" (CPU)" if not h.is_gpu and len(kinds) > 1 else "")
            ax.plot(h.seconds, h.values, color=color, linewidth=1.1, label=label)
            timed = e.job.metric("startup_s") + e.job.metric("warmup_s")
            if not math.isnan(timed):
                ax.axvline(timed, color=color, linestyle=":", linewidth=1)
        ax.set_title(precision, fontsize=9)
        ax.set_xlabel("seconds since job start (dotted: timed windows begin)", fontsize=8)
        ax.set_ylim(0, 105)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="lower right")
    axes[0].set_ylabel(ylabel)
    fig.suptitle(title, fontsize=10)
    return _save(fig, path)


def memory_chart(group: Group, path: Path) -> Path | None:
    """Peak memory per framework x precision: GPU (NVML, whole device) and the framework allocator's
    own peak; CPU-only runs have neither, so the host RSS of the worker is drawn instead (title says)."""
    df = group.frame()
    series = [("gpu_mem_mib", "GPU memory used (NVML)"), ("framework_mem_mib", "framework allocator peak")]
    series = [(col, label) for col, label in series if df[col].notna().any()]
    title = f"Peak memory: {group.title}"
    if not series:
        df = df.assign(
            host_rss=[e.job.metric("host_rss_mib_max") for e in group.entries],
        )
        if not df["host_rss"].notna().any():
            return None
        series = [("host_rss", "host RSS of the worker")]
        title = f"Peak host memory (no GPU memory metrics): {group.title}"
    labels = [f"{r.framework}\n{r.precision}" for r in df.itertuples()]
    fig = Figure(figsize=(max(5.0, 0.9 * len(labels) + 2), 3.6))
    ax = fig.add_subplot()
    width = 0.8 / len(series)
    for i, (col, label) in enumerate(series):
        xs = [k - 0.4 + width * (i + 0.5) for k in range(len(labels))]
        ys = [0.0 if math.isnan(v) else v for v in df[col]]
        bars = ax.bar(xs, ys, width * 0.92, label=label, color=OTHER_COLORS[i])
        ax.bar_label(bars, labels=[f"{v:.0f}" if v else "–" for v in ys], fontsize=7, padding=2)
    ax.set_xticks(range(len(labels)), labels, fontsize=8)
    ax.set_ylabel("MiB (peak)")
    ax.set_title(title, fontsize=10)
    tallest = max((b.get_height() for b in ax.patches), default=0.0)
    ax.set_ylim(0, (tallest or 1.0) * 1.35)  # room for the legend above the tallest bar
    ax.legend(fontsize=8, loc="upper left", ncol=len(series))
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)
    return _save(fig, path)
