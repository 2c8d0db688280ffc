"""SIGINT and SIGTERM, never lost, whatever the process inherited.

A process started as a background job (`cmd &`, some CI wrappers) inherits SIGINT *ignored*, and
Python installs no SIGTERM handler at all, so without `install()` a sweep ignores Ctrl-C and stays
RUNNING under SLURM/systemd/`timeout`.

The handler only *records* the request and wakes the main loop (a byte on a self-pipe that the worker
loop selects on); it never raises. A handler that raises does so in whatever code runs at that moment:
in a weakref callback or a `__del__` Python prints "Exception ignored" and carries on, the signal is
gone, and the sweep runs to its end. Instead the main loop calls `check()` at safe points (between
jobs, before and after a run is made, every turn of the worker's event loop, before the report), which
raises `Interrupted` (a KeyboardInterrupt, so every `except KeyboardInterrupt` cleanup path runs) for as
long as the request stands: a request is never consumed, so one swallowed somewhere is raised again at
the next safe point.

When the main thread is stuck in a library for `GRACE_S` after the signal (a tracking server that
accepts and never answers, submitit waiting for a job), a one-shot alarm raises `Interrupted` there,
unless it is inside `held()` (run creation and closing: a RUNNING run nobody closes must not be
left); should that raise be swallowed, the standing request still stops the run at the next `check()`.
Later signals only say that cleanup is under way, so a second Ctrl-C cannot cut the cleanup short.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator

SIGNALS = (signal.SIGINT, signal.SIGTERM)
GRACE_S = 5.0  # how long the main loop may take to reach a safe point before the alarm raises
_received: list[int] = []  # every signal since install(); the first one is the standing request
_held: list[int] = []  # depth of nested held() blocks (one entry each)
_raised: list[int] = []  # Interrupted was raised (by check() or the alarm): no alarm is armed again
_wake: list[int] = []  # the self-pipe: [read end, write end]


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
    """Record, wake, arm the alarm; never raise (see the module's docstring)."""
    _received.append(signum)
    if len(_received) == 2:  # os.write: print() here could re-enter a stream the main thread is writing
        os.write(
            2, f"dlbench: {signal.Signals(signum).name} again: still cleaning up, please wait\n".encode()
        )
    if _wake:
        with contextlib.suppress(OSError):
            os.write(_wake[1], b"\0")
    if len(_received) == 1:
        signal.setitimer(signal.ITIMER_REAL, GRACE_S)


def _alarm(signum: int, frame: object) -> None:
    """GRACE_S after the request and no safe point reached: raise in whatever runs, once."""
    if _received and not _raised and not _held:
        _raised.append(1)
        raise Interrupted(_received[0])


def install(extra: tuple[int, ...] = ()) -> None:
    """Handle SIGINT and SIGTERM (and `extra`, e.g. the SIGUSR2 a scheduler sends before its time limit)
    in this process, replacing whatever disposition it inherited. Main thread only."""
    _received.clear()
    _raised.clear()
    for fd in _wake:
        os.close(fd)
    _wake[:] = os.pipe()
    for fd in _wake:
        os.set_blocking(fd, False)
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, _alarm)
    for sig in (*SIGNALS, *extra):
        signal.signal(sig, _handler)


def requested() -> int | None:
    """The signal that asked this process to stop, if one did."""
    return _received[0] if _received else None


def check() -> None:
    """A safe point: raise Interrupted if a signal asked to stop (every time, until the process ends)."""
    if _received:
        signal.setitimer(signal.ITIMER_REAL, 0)
        _raised.append(1)
        raise Interrupted(_received[0])


def wake_fd() -> int | None:
    """The self-pipe's read end: readable once a signal arrived, for a loop that waits in select()."""
    return _wake[0] if _wake else None


def exit_code(exc: KeyboardInterrupt) -> int:
    return exc.exit_code if isinstance(exc, Interrupted) else 128 + signal.SIGINT


@contextlib.contextmanager
def held() -> Iterator[None]:
    """No alarm raises inside the body (a run being made or closed); a standing request is left to the
    next check(), and the alarm re-armed so a main thread stuck after the body is still stopped."""
    _held.append(1)
    try:
        yield
    finally:
        _held.pop()
        if _received and not _raised and not _held:
            signal.setitimer(signal.ITIMER_REAL, GRACE_S)
