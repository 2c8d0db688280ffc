"""Worker -> orchestrator events: one JSON object per line on a pipe (never stdout, which is the log).

Every event has `event` (one of the names below) and `t` (wall-clock seconds, time.time(), so the
orchestrator can align events with telemetry samples taken in another process).
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

HELLO = "hello"  # worker process is up: pid
BUILT = "built"  # import_s, build_s, params, device, unit (throughput unit), batch_size, versions
WARMUP_STEP = "warmup_step"  # step, of
WARMUP_DONE = "warmup_done"  # warmup_s, steps
# samples: the units (built.unit) the window's steps consumed; throughput = samples / seconds
WINDOW = "window"  # index, steps, samples, seconds, throughput, loss, data_wait_s, t_start
DONE = "done"  # precision (report), run (run facts), framework_mem_bytes, gflops (forward, per sample)
ERROR = "error"  # kind (oom|config|crash), message


class EventWriter:
    """Writes events to an inherited pipe file descriptor, unbuffered, one line per event."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def emit(self, event: str, **data: Any) -> None:
        line = json.dumps({"event": event, "t": time.time(), **data}, default=str) + "\n"
        os.write(self._fd, line.encode())


class EventReader:
    """Splits bytes from the pipe into events; tolerates partial lines between reads."""

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, chunk: bytes) -> list[dict[str, Any]]:
        self._buffer += chunk
        *lines, self._buffer = self._buffer.split(b"\n")
        return [json.loads(line) for line in lines if line.strip()]
