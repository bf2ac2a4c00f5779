"""The per-file time bound: a file's analysis (and fix) that runs past it is stopped.

:func:`deadline` arms a real-time timer (``SIGALRM``) around one file's work in the
process's main thread (the CLI's process and its forked workers); when it fires,
:class:`FileTimeout` is raised in that work, and the file is reported as not analysed
(a notice), the run going on with the next. The bound is :data:`DEFAULT_SECONDS`, or
``GRADGATE_FILE_TIMEOUT`` (seconds; ``0`` turns it off). Where no timer can be armed
(another thread, a platform without ``setitimer``) the work runs unbounded in time; its
size is bounded all the same (``engine.MAX_FILE_BYTES``, the BDD's node limit, the
LibCST guard). ``docs/limits.md`` documents the bounds.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
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


def _main_thread() -> bool:
    threading = sys.modules.get("threading")
    return threading is None or threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Raise :class:`FileTimeout` in the block once it has run ``seconds``."""
    if seconds <= 0 or not hasattr(signal, "setitimer") or not _main_thread():
        yield
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
