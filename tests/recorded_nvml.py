"""The one stand-in this project allows: an NVML reader that replays recorded readings (there is no GPU on
development or CI machines). It implements NvmlReader's interface (read, info, processes, close), so the
code under test cannot tell it from the real reader."""

from __future__ import annotations


class RecordedNvml:
    """Replays `rows` (one dict per read(), the last repeated) and `procs` (one pid -> MiB dict per
    processes() call, the last repeated)."""

    def __init__(self, rows: list[dict[str, float]], procs: list[dict[int, float]] | None = None) -> None:
        self.rows = rows
        self.procs = procs or [{}]
        self.reads = 0
        self.listings = 0
        self.closed = False

    def read(self) -> dict[str, float]:
        row = self.rows[min(self.reads, len(self.rows) - 1)]
        self.reads += 1
        return dict(row)

    def info(self) -> dict[str, str]:
        return {"driver": "recorded", "gpu0_name": "NVIDIA H200 (recorded)", "gpu0_mem_total_mib": "143771"}

    def processes(self) -> dict[int, float]:
        procs = self.procs[min(self.listings, len(self.procs) - 1)]
        self.listings += 1
        return dict(procs)

    def close(self) -> None:
        self.closed = True
