"""Every line this process prints or logs passes through `secrets.mask`.

Libraries print credentials they were handed: MLflow writes "View run ... at: http://user:password@host/..."
straight to stdout, urllib3 logs the URL (with its query token) of each retried request, and a log file
handler (Hydra's run.log) writes what any logger says. `mask_output()` masks at the two places they all
pass: each log record's message when it is made (so every handler, console or file, gets it masked) and
every write to sys.stdout and sys.stderr (direct prints, warnings, progress bars).

The same two streams outlive a reader that goes away: `run.py -m ... | head` closes the pipe while the sweep
goes on, and every later line would raise BrokenPipeError (a logging traceback per line). The stream then
points its file descriptor at /dev/null and the sweep finishes and records as it would have, silently.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any, TextIO

from dlbench.core.secrets import mask


class MaskedStream:
    """A text stream whose writes are masked; everything else is the wrapped stream's."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            self._stream.write(mask(text))
        except BrokenPipeError:
            self._to_devnull()
        return len(text)  # what the caller handed over, as a stream reports it

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._to_devnull()

    def _to_devnull(self) -> None:
        """Its reader is gone: from now on its descriptor writes to /dev/null (what was buffered with it)."""
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, self._stream.fileno())
        finally:
            os.close(devnull)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _masking_factory(make: Any) -> Any:
    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = make(*args, **kwargs)
        try:
            message = record.getMessage()
        except Exception:  # a bad format string: logging reports it later, as it would have
            return record
        masked = mask(message)
        if masked != message:
            record.msg, record.args = masked, None
        return record

    factory.masks = True
    return factory


def mask_output() -> None:
    """Mask every log record and every write to sys.stdout/sys.stderr of this process from now on (once)."""
    if not getattr(logging.getLogRecordFactory(), "masks", False):
        logging.setLogRecordFactory(_masking_factory(logging.getLogRecordFactory()))
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, MaskedStream):
            setattr(sys, name, MaskedStream(stream))
