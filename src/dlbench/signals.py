"""SIGINT and SIGTERM, honoured the same way whatever the process inherited.

A process started as a background job (`cmd &`, some CI wrappers) inherits SIGINT *ignored*, and
Python installs no SIGTERM handler at all, so without this a sweep ignores Ctrl-C and stays RUNNING
under SLURM/systemd/`timeout`. `install()` turns the first of either signal into `Interrupted` (a
KeyboardInterrupt, so every `except KeyboardInterrupt` cleanup path runs); later ones only say that
cleanup is under way, so a second Ctrl-C cannot cut the cleanup short and leave a RUNNING run.
`held()` defers both over a few statements that must not be split (creating a run): a signal that
arrives meanwhile is raised right after. (Deferred in Python, not with a signal mask: a mask set in
the main thread does not stop the kernel delivering the signal to another thread.)
"""

from __future__ import annotations

import contextlib
import signal
import sys
from collections.abc import Iterator

SIGNALS = (signal.SIGINT, signal.SIGTERM)
_received: list[int] = []
_held: list[int] = []  # depth of nested held() blocks (one entry each)
_pending: list[int] = []  # a signal that arrived inside held()


class Interrupted(KeyboardInterrupt):
    """The run was stopped by a signal; `exit_code` is 128 + its number (130 SIGINT, 143 SIGTERM)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


def _handler(signum: int, frame: object) -> None:
    if _received:
        if len(_received) == 1:
            sys.stderr.write(
                f"dlbench: {signal.Signals(signum).name} again: still cleaning up, please wait\n"
            )
        _received.append(signum)
        return
    _received.append(signum)
    if _held:
        _pending.append(signum)
        return
    raise Interrupted(signum)


def install(extra: tuple[int, ...] = ()) -> None:
    """Handle SIGINT and SIGTERM (and `extra`, e.g. the SIGUSR2 a scheduler sends before its time limit)
    in this process, replacing whatever disposition it inherited."""
    _received.clear()
    _pending.clear()
    for sig in (*SIGNALS, *extra):
        signal.signal(sig, _handler)


def exit_code(exc: KeyboardInterrupt) -> int:
    return exc.exit_code if isinstance(exc, Interrupted) else 128 + signal.SIGINT


@contextlib.contextmanager
def held() -> Iterator[None]:
    """Defer SIGINT and SIGTERM over the body; one that arrived meanwhile is raised when it ends."""
    _held.append(1)
    try:
        yield
    finally:
        _held.pop()
    if _pending and not _held:
        raise Interrupted(_pending.pop())
