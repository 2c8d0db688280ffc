"""Host readings through psutil: system CPU utilization and the worker process tree's memory."""

from __future__ import annotations

import contextlib

import psutil


class HostReader:
    def __init__(self) -> None:
        self._proc: psutil.Process | None = None
        psutil.cpu_percent(interval=None)  # prime: the first call has nothing to compare with

    def attach(self, pid: int) -> None:
        try:
            self._proc = psutil.Process(pid)
        except psutil.Error:
            self._proc = None

    def read(self) -> dict[str, float]:
        out = {"host/cpu_util": psutil.cpu_percent(interval=None)}
        rss = _tree_rss(self._proc) if self._proc is not None else 0
        if rss:  # 0 = no worker yet, or it has exited: no reading rather than a false zero
            out["host/rss_mib"] = rss / 2**20
        return out


def _tree_rss(proc: psutil.Process) -> int:
    total = 0
    try:
        if not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE:
            return 0
        procs = [proc, *proc.children(recursive=True)]
    except psutil.Error:
        return 0
    for p in procs:
        with contextlib.suppress(psutil.Error):
            total += p.memory_info().rss
    return total
