"""Host readings through psutil: system CPU utilization and the worker process tree's memory.

Finding the worker's children means scanning every process in /proc (about 3 ms here), so the tree
is listed again only every `REFRESH_EVERY` readings; in between, only the known processes' memory is
read. On a CPU-only run every millisecond the sampler spends is taken from the measured job.
"""

from __future__ import annotations

import contextlib

import psutil

REFRESH_EVERY = 20  # readings between two scans for new child processes (2 s at 10 Hz)


class HostReader:
    def __init__(self) -> None:
        self._proc: psutil.Process | None = None
        self._tree: list[psutil.Process] = []
        self._reads = 0
        psutil.cpu_percent(interval=None)  # prime: the first call has nothing to compare with

    def attach(self, pid: int) -> None:
        try:
            self._proc = psutil.Process(pid)
        except psutil.Error:
            self._proc = None
        self._tree, self._reads = [], 0

    def read(self) -> dict[str, float]:
        out = {"host/cpu_util": psutil.cpu_percent(interval=None)}
        rss = self._tree_rss()
        if rss:  # 0 = no worker yet, or it has exited: no reading rather than a false zero
            out["host/rss_mib"] = rss / 2**20
        return out

    def _tree_rss(self) -> int:
        if self._proc is None:
            return 0
        if self._reads % REFRESH_EVERY == 0:
            try:
                self._tree = [self._proc, *self._proc.children(recursive=True)]
            except psutil.Error:
                self._tree = []
        self._reads += 1
        total = 0
        for p in self._tree:
            with contextlib.suppress(psutil.Error):  # exited since the last scan
                total += p.memory_info().rss
        return total
