"""Worker -> orchestrator events: one JSON object per line on a pipe (never stdout, which is the log).

Every event has `event` (one of the event names in dlbench.core.names) and `t` (wall-clock seconds, time.time(), so the
orchestrator can align events with telemetry samples taken in another process).
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

# The event names live with every other shared name; re-exported here because they are the protocol's.
from dlbench.core.names import (  # noqa: F401
    BUILT,
    DONE,
    EPOCH,
    ERROR,
    HELLO,
    SERVED,
    WARMUP_DONE,
    WARMUP_STEP,
    WINDOW,
)


class EventWriter:
    """Writes events to an inherited pipe file descriptor, unbuffered, one line per event."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def emit(self, event: str, **data: Any) -> None:
        line = json.dumps({"event": event, "t": time.time(), **data}, default=str) + "\n"
        os.write(self._fd, line.encode())


class NullWriter:
    """The events of a rank other than 0 of a job on several devices: only rank 0 talks to the parent."""

    def emit(self, event: str, **data: Any) -> None:
        pass


class EventReader:
    """Splits bytes from the pipe into events; tolerates partial lines between reads."""

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, chunk: bytes) -> list[dict[str, Any]]:
        self._buffer += chunk
        *lines, self._buffer = self._buffer.split(b"\n")
        return [json.loads(line) for line in lines if line.strip()]
