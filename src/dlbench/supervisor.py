"""Start, watch and stop one worker process.

The worker runs in its own process group (so a kill reaches everything it started) with the job's
interpreter; its stdout/stderr go to worker.log and its events come over a dedicated pipe.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from dlbench import signals
from dlbench.core.names import SRC_DIR
from dlbench.errors import ConfigError
from dlbench.events import EventReader


class WorkerTimeout(RuntimeError):
    pass


class Worker:
    def __init__(
        self, python: str, job_path: Path, log_path: Path, env: dict[str, str] | None = None
    ) -> None:
        self.python = python
        self.extra_env = env or {}  # e.g. the framework's thread settings, read before its pools start
        self.job_path = job_path
        self.log_path = log_path
        self.proc: subprocess.Popen | None = None
        self._read_fd: int | None = None

    def start(self) -> int:
        read_fd, write_fd = os.pipe()
        env = dict(os.environ)
        # The worker may run under another interpreter that has no dlbench installed.
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SRC_DIR), env.get("PYTHONPATH")) if p)
        env["PYTHONUNBUFFERED"] = "1"
        env.update(self.extra_env)
        cmd = [self.python, "-m", "dlbench.worker", "--job", str(self.job_path), "--events-fd", str(write_fd)]
        try:
            with open(self.log_path, "ab") as log:
                self.proc = subprocess.Popen(
                    cmd,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    pass_fds=(write_fd,),
                    start_new_session=True,
                    env=env,
                )
        except (FileNotFoundError, PermissionError) as exc:
            os.close(read_fd)
            raise ConfigError(f"framework.python={self.python}: cannot run it ({exc.strerror})") from None
        finally:
            os.close(write_fd)
        self._read_fd = read_fd
        return self.proc.pid

    def events(
        self, deadline: float, on_quiet: Callable[[float], None] | None = None
    ) -> Iterator[dict[str, Any]]:
        """Yield events until the worker closes the pipe or exits; WorkerTimeout past `deadline`
        (a time.monotonic() value). A signal wakes the wait (signals' self-pipe) and is raised here, a
        safe point, as signals.Interrupted. While the worker says nothing, `on_quiet` gets the seconds
        since it last did (about twice a second), so a long silent step can be reported as one."""
        assert self.proc is not None and self._read_fd is not None
        reader = EventReader()
        wake = signals.wake_fd()
        watched = [self._read_fd] + ([wake] if wake is not None else [])
        heard = time.monotonic()
        while True:
            signals.check()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise WorkerTimeout
            ready, _, _ = select.select(watched, [], [], min(remaining, 0.5))
            if self._read_fd in ready:
                chunk = os.read(self._read_fd, 1 << 16)
                if not chunk:
                    return
                heard = time.monotonic()
                yield from reader.feed(chunk)
            elif self.proc.poll() is not None:
                return  # exited; a grandchild may still hold the pipe open
            elif on_quiet is not None:
                on_quiet(time.monotonic() - heard)

    def wait(self, timeout: float = 30.0) -> int:
        assert self.proc is not None
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return self.proc.wait()

    def kill(self, grace_s: float = 3.0) -> None:
        """SIGTERM the worker's process group, then SIGKILL what is left after `grace_s`."""
        if self.proc is None:
            return
        pgid = self.proc.pid  # start_new_session: the worker leads its own group
        for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(pgid, sig)
            except ProcessLookupError:
                break
            try:
                self.proc.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                continue
            if not _group_alive(pgid):
                break
        self.close()

    def close(self) -> None:
        if self._read_fd is not None:
            os.close(self._read_fd)
            self._read_fd = None


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
