"""The per-file time bound: a file's analysis (and fix) that runs past it is stopped.

:func:`deadline` arms a real-time timer (``SIGALRM``) around one file's work in the
process's main thread (the CLI's process and its forked workers); when it fires,
:class:`FileTimeout` is raised in that work, and the file is reported as not analysed
(a notice), the run going on with the next. The bound is :data:`DEFAULT_SECONDS`, or
``GRADGATE_FILE_TIMEOUT`` (seconds; ``0`` turns it off). Where no timer can be armed
(another thread, as the language server's checks run; a platform without
``setitimer``) the bound is kept by polling instead: the model calls :func:`poll` where
it starts a function or a decision and every few thousand diagram nodes, and the poll
raises :class:`FileTimeout` once the thread's bound has passed; what runs between two
polls (LibCST's parse of one file, bounded by ``engine.MAX_FILE_BYTES``) is not
interrupted. ``docs/limits.md`` documents the bounds.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterator

#: seconds one file may take (the slowest real file known takes 1.5 s; the worst
#: probe of issue 29, a 4 MB line fixed, about 20 s)
DEFAULT_SECONDS = 60.0


class FileTimeout(BaseException):
    """One file's work ran past the per-file time bound (a BaseException: no handler of
    the engine's own errors may take it for one)."""


def file_seconds() -> float:
    """The per-file bound in seconds (``GRADGATE_FILE_TIMEOUT``; 0: none)."""
    value = os.environ.get("GRADGATE_FILE_TIMEOUT")
    if value is None:
        return DEFAULT_SECONDS
    try:
        return max(0.0, float(value))
    except ValueError:
        return DEFAULT_SECONDS


class _Bound(threading.local):
    #: when this thread's bound passes (``time.monotonic()``); inf: no polled bound
    expiry = float("inf")


_BOUND = _Bound()


def poll() -> None:
    """Raise :class:`FileTimeout` if this thread's polled bound has passed."""
    if time.monotonic() > _BOUND.expiry:
        _BOUND.expiry = float("inf")  # raised once: the handler's own work is not cut short
        raise FileTimeout()


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Raise :class:`FileTimeout` in the block once it has run ``seconds``: by a timer in
    the main thread, by :func:`poll` in any other."""
    if seconds <= 0:
        yield
        return
    if not hasattr(signal, "setitimer") or not _main_thread():
        outer = _BOUND.expiry
        _BOUND.expiry = min(outer, time.monotonic() + seconds)
        try:
            yield
        finally:
            _BOUND.expiry = outer
        return

    def expired(_signum: int, _frame: object) -> None:
        raise FileTimeout()

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
