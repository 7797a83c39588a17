"""SIGHUP, SIGINT and SIGTERM during a sweep: tear the server down, then stop, resumable.

A signal raises :class:`tuner.errors.Interrupted` in the main thread, except inside
:meth:`SignalGuard.held` (a teardown in progress), where it is remembered and raised when the
block ends, so a teardown is never cut short. SIGHUP (terminal closed, SSH lost) is handled
like SIGTERM unless the runner inherited it as ignored (``nohup``): then it stays ignored.

A signal that arrives while Python runs a finalizer (a weakref callback, a ``__del__``: SQLAlchemy's
``_collection_gced`` during a garbage collection) raises there, and Python drops an exception
raised in a finalizer (it reports it to ``sys.unraisablehook`` and goes on): the runner would
never stop. The guard's hook sees such an Interrupted and delivers the signal again a moment
later, from outside the finalizer.

Code that catches every Exception would swallow it too. nccl-tune's own broad handlers let it
pass (:func:`tuner.errors.tolerated`, held by a test); for a library's, the guard remembers each
signal it raised, and :meth:`SignalGuard.check`, called at every phase of a launch and before the
next one, raises it again: an Interrupted that reached its handler has already left those places.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType, TracebackType
from typing import Any

from tuner.errors import Interrupted

__all__ = ["HANDLED", "SignalGuard"]

HANDLED = (signal.SIGHUP, signal.SIGINT, signal.SIGTERM)
#: Seconds after a dropped Interrupted before its signal is delivered again.
REDELIVER_S = 0.1


class SignalGuard:
    """Context manager installing the sweep's handlers and restoring the old ones on exit."""

    def __init__(self) -> None:
        self._old: dict[int, Any] = {}
        self._holding = 0
        self._pending = 0
        self._raised = 0  # the last signal raised as Interrupted while the guard is entered
        self._old_hook: Any = None

    def __enter__(self) -> SignalGuard:
        self._raised = 0
        for sig in HANDLED:
            current = signal.getsignal(sig)
            if sig == signal.SIGHUP and current == signal.SIG_IGN:
                continue  # started under nohup: the user asked to survive a hang-up
            self._old[sig] = current
            signal.signal(sig, self._on_signal)
        self._old_hook, sys.unraisablehook = sys.unraisablehook, self._unraisable
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        for sig, handler in self._old.items():
            signal.signal(sig, handler)
        self._old.clear()
        if self._old_hook is not None:
            sys.unraisablehook, self._old_hook = self._old_hook, None

    def _unraisable(self, info: Any) -> None:
        """``sys.unraisablehook``: an Interrupted that a finalizer dropped is delivered again."""
        if isinstance(info.exc_value, Interrupted) and self._old:
            timer = threading.Timer(REDELIVER_S, os.kill, (os.getpid(), info.exc_value.signum))
            timer.daemon = True
            timer.start()
            return
        (self._old_hook or sys.__unraisablehook__)(info)

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        if self._holding:
            self._pending = self._pending or signum
            return
        self._raised = signum
        raise Interrupted(signum)

    def check(self) -> None:
        """Raise Interrupted again for a signal already raised while the guard is entered: it was
        swallowed on its way (a handler catching every Exception), since the places that call this
        (a launch's phases, the next launch) are never on an Interrupted's way out."""
        if self._raised and self._old and not self._holding:
            raise Interrupted(self._raised)

    def teardown_window(self) -> TeardownWindow:
        """Hold signals from the exit of one context manager to the exit of another:
        ``with window.closing(), server, window.opening():`` holds them while ``server``'s
        ``__exit__`` (its teardown) runs."""
        return TeardownWindow(self)

    @contextmanager
    def held(self) -> Iterator[None]:
        """Hold signals while the block runs (a teardown); one that arrived is raised after it."""
        self._holding += 1
        try:
            yield
        finally:
            self._release()

    def _release(self) -> None:
        self._holding -= 1
        if not self._holding and self._pending:
            signum, self._pending = self._pending, 0
            self._raised = signum
            raise Interrupted(signum)


class TeardownWindow:
    """See :meth:`SignalGuard.teardown_window`."""

    def __init__(self, guard: SignalGuard) -> None:
        self._guard = guard
        self._open = False

    @contextmanager
    def opening(self) -> Iterator[None]:
        """Entered last, exits first: starts holding signals."""
        try:
            yield
        finally:
            self._open = True
            self._guard._holding += 1

    @contextmanager
    def closing(self) -> Iterator[None]:
        """Entered first, exits last: stops holding; a signal that arrived is raised now."""
        try:
            yield
        finally:
            if self._open:
                self._open = False
                self._guard._release()  # the signal wins over what the block raised
