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
