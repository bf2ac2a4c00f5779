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
interrupted.

The per-file memory bound is kept by the same polls: every :data:`MEMORY_POLLS` of them
the process's resident size is read (``/proc/self/statm``; where there is none, no
memory bound), and past :func:`file_megabytes` (``GRADGATE_FILE_MEMORY``, megabytes;
``0`` turns it off) :class:`FileOverMemory` is raised: the file is not analysed, a
notice says so, and what the analysis held is let go before the next. It bounds the
process while the file is analysed, the run's modules included, as the operating
system would see it. ``docs/limits.md`` documents the bounds.
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


#: megabytes of resident memory a process may reach while it analyses one file (the
#: worst probe of issue 29, a 4 MB line fixed, takes about 2.5 GB)
DEFAULT_MEGABYTES = 4096
#: polls between two readings of the resident size
MEMORY_POLLS = 256


class FileTimeout(BaseException):
    """One file's work ran past the per-file time bound (a BaseException: no handler of
    the engine's own errors may take it for one)."""


class FileOverMemory(BaseException):
    """One file's work took the process past the per-file memory bound."""


def _bound_from_environment(name: str, default: float) -> float:
    """A bound set by the environment variable ``name`` (a number; 0: none), else
    ``default`` (also where the value is no number)."""
    value = os.environ.get(name)
    if value is None:
        return default
    try:
        return max(0.0, float(value))
    except ValueError:
        return default


def file_megabytes() -> float:
    """The per-file memory bound in megabytes (``GRADGATE_FILE_MEMORY``; 0: none)."""
    return _bound_from_environment("GRADGATE_FILE_MEMORY", DEFAULT_MEGABYTES)


def resident_bytes() -> int | None:
    """The process's resident size now, or None where it cannot be read."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return None


_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def file_seconds() -> float:
    """The per-file bound in seconds (``GRADGATE_FILE_TIMEOUT``; 0: none)."""
    return _bound_from_environment("GRADGATE_FILE_TIMEOUT", DEFAULT_SECONDS)


class _Bound(threading.local):
    #: when this thread's bound passes (``time.monotonic()``); inf: no polled bound
    expiry = float("inf")
    #: the resident bytes past which this thread's file is stopped; inf: none
    memory = float("inf")
    #: polls since the resident size was last read
    polls = 0


_BOUND = _Bound()


def poll() -> None:
    """Raise :class:`FileTimeout` if this thread's polled bound has passed, and
    :class:`FileOverMemory` if the process is past the memory bound (read every
    :data:`MEMORY_POLLS` polls)."""
    if time.monotonic() > _BOUND.expiry:
        _BOUND.expiry = float("inf")  # raised once: the handler's own work is not cut short
        raise FileTimeout()
    if _BOUND.memory != float("inf"):
        _BOUND.polls += 1
        if _BOUND.polls >= MEMORY_POLLS:
            _BOUND.polls = 0
            resident = resident_bytes()
            if resident is not None and resident > _BOUND.memory:
                _BOUND.memory = float("inf")
                raise FileOverMemory()


@contextlib.contextmanager
def memory_bound(megabytes: float) -> Iterator[None]:
    """Raise :class:`FileOverMemory` in the block where a poll finds the process's
    resident size past ``megabytes`` (0: no bound)."""
    outer = _BOUND.memory
    if megabytes > 0:
        _BOUND.memory = min(outer, megabytes * 1024 * 1024)
        _BOUND.polls = MEMORY_POLLS - 1  # the first poll reads it
    try:
        yield
    finally:
        _BOUND.memory = outer


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
