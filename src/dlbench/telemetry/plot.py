"""telemetry.png: utilization, memory and power over the job, with the warm-up shaded."""

from __future__ import annotations

from pathlib import Path

PANELS = (
    ("utilization (%)", ("gpu0/util", "gpu0/mem_util", "host/cpu_util")),
    ("memory (MiB)", ("gpu0/mem_used_mib", "host/rss_mib")),
    ("power (W)", ("gpu0/power_w",)),
)


def plot_telemetry(
    samples: list[dict[str, float]], path: Path, t0: float, warmups: list[tuple[float, float]], title: str
) -> bool:
    """Write the chart; False when there is nothing to draw."""
    if not samples:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [(ylabel, [s for s in series if any(s in row for row in samples)]) for ylabel, series in PANELS]
    panels = [p for p in panels if p[1]]
    fig, axes = plt.subplots(len(panels), 1, figsize=(9, 2.4 * len(panels)), sharex=True, squeeze=False)
    for ax, (ylabel, names) in zip(axes[:, 0], panels, strict=True):
        for name in names:
            xs = [row["t"] - t0 for row in samples if name in row]
            ys = [row[name] for row in samples if name in row]
            ax.plot(xs, ys, label=name, linewidth=1)
        for i, (start, end) in enumerate(warmups):
            ax.axvspan(start - t0, end - t0, color="orange", alpha=0.15, label="warm-up" if i == 0 else None)
        ax.set_ylabel(ylabel)
        ax.legend(loc="upper right", fontsize=7)
        ax.grid(alpha=0.3)
    axes[-1, 0].set_xlabel("seconds since job start")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True
