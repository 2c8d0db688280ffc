"""dlbench.signals: a signal is recorded and raised at a safe point, never from inside arbitrary code, and
never lost; a main thread stuck in a library is stopped by the alarm, except while a run is made."""

from __future__ import annotations

import os
import select
import signal
import time

import pytest

from dlbench import signals


@pytest.fixture
def installed(monkeypatch):
    monkeypatch.setattr(signals, "GRACE_S", 0.3)
    signals.install()
    yield
    signal.setitimer(signal.ITIMER_REAL, 0)
    for sig, how in ((signal.SIGINT, signal.default_int_handler), (signal.SIGTERM, signal.SIG_DFL)):
        signal.signal(sig, how)
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    signals._received.clear()  # later tests in this process run code with safe points


class SignalsInDel:
    """Sends the signal from its own __del__, where a raising handler's exception is swallowed."""

    def __del__(self) -> None:
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(1000):  # the handler runs somewhere in here
            pass


def test_a_signal_inside_del_is_not_lost_and_raised_at_every_safe_point(installed, capfd):
    obj = SignalsInDel()
    del obj
    assert signals.requested() == signal.SIGINT
    assert "Exception ignored" not in capfd.readouterr().err
    for _ in range(2):  # the request stands: a raise swallowed somewhere comes back at the next check
        with pytest.raises(signals.Interrupted) as caught:
            signals.check()
        assert caught.value.exit_code == 130


def test_the_handler_wakes_a_select_and_a_second_signal_only_says_cleanup_is_under_way(installed, capfd):
    os.kill(os.getpid(), signal.SIGTERM)
    ready, _, _ = select.select([signals.wake_fd()], [], [], 5.0)
    assert ready == [signals.wake_fd()]
    with pytest.raises(signals.Interrupted) as caught:
        signals.check()
    assert caught.value.exit_code == 143 and caught.value.name == "SIGTERM"
    os.kill(os.getpid(), signal.SIGINT)  # during cleanup: noted, not raised, and no alarm is armed again
    time.sleep(2 * signals.GRACE_S)
    assert "still cleaning up" in capfd.readouterr().err
    assert signals.requested() == signal.SIGTERM


def test_a_main_thread_stuck_in_a_library_is_stopped_by_the_alarm(installed):
    os.kill(os.getpid(), signal.SIGINT)
    t0 = time.monotonic()
    with pytest.raises(signals.Interrupted):
        time.sleep(30)  # a call that never reaches a safe point
    assert time.monotonic() - t0 < 5


def test_no_alarm_raises_inside_held_and_it_is_armed_again_after(installed):
    with signals.held():
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(3 * signals.GRACE_S)  # the alarm fires in here and does nothing
        reached = True
    assert reached
    with pytest.raises(signals.Interrupted):
        time.sleep(30)
