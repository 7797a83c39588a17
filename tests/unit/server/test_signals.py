"""The sweep's signal guard: a signal raises Interrupted in the main thread, even when it arrives
while Python runs a finalizer, which drops what it raises."""

from __future__ import annotations

import gc
import os
import signal
import time
import weakref

import pytest

from tuner.errors import Interrupted
from tuner.server import SignalGuard


class _Owner:
    pass


def test_a_signal_dropped_inside_a_finalizer_is_delivered_again():
    """A weakref callback (as SQLAlchemy's _collection_gced) runs when the signal arrives: the
    Interrupted raised there is dropped by Python, then delivered again outside it."""
    def finalizer(_ref: object) -> None:
        os.kill(os.getpid(), signal.SIGTERM)  # the handler runs at the next bytecode: in here
        for _ in range(1000):  # bytecode for the handler to run on, inside the finalizer
            pass

    with SignalGuard(), pytest.raises(Interrupted) as caught:
        owner = _Owner()
        ref = weakref.ref(owner, finalizer)
        del owner
        gc.collect()
        assert ref() is None
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            time.sleep(0.01)
    assert caught.value.signum == signal.SIGTERM


def test_a_signal_in_plain_code_raises_at_once_and_the_hook_is_restored():
    import sys
    before = sys.unraisablehook
    with SignalGuard(), pytest.raises(Interrupted):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)
    assert sys.unraisablehook is before


def test_a_signal_inside_a_tolerated_block_still_raises():
    """``tolerated()`` ignores what a caller can live with, never a signal (CI: SIGTERM during the
    runner's phase write to the study was swallowed and the night ran on)."""
    from tuner.errors import tolerated

    with SignalGuard(), pytest.raises(Interrupted) as caught:
        with tolerated():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
        pytest.fail("tolerated() swallowed the signal")
    assert caught.value.signum == signal.SIGTERM
    with tolerated():
        raise OSError("a missed write")  # what it is for: gone


def test_a_signal_a_library_swallowed_is_raised_again_at_the_next_check():
    """A library's ``except Exception: pass`` around the line the signal hit: check() raises it."""
    with SignalGuard() as guard, pytest.raises(Interrupted) as caught:
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
        except Exception:  # a library's broad handler
            pass
        guard.check()
    assert caught.value.signum == signal.SIGTERM
    guard.check()  # the guard left: nothing to raise


def test_check_raises_nothing_without_a_signal_or_while_a_teardown_holds():
    with SignalGuard() as guard:
        guard.check()
        with pytest.raises(Interrupted), guard.held():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.2)
            guard.check()  # held: the teardown is not cut short
        guard._raised = 0  # handled (the Interrupted above reached its handler)
        guard.check()


def test_a_signal_during_the_phase_write_stops_the_night():
    """The exact CI case: the signal lands while on_phase writes the phase to the study."""
    from tuner.sweep.progress import Progress

    def store(_state: dict) -> None:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)

    progress = Progress(total=1, quiet=True)
    on_phase = progress.phases(1, "baseline", store, {})
    with SignalGuard(), pytest.raises(Interrupted):
        on_phase("loading", "")
