"""Worker processes that do not outlive the run that started them.

:func:`die_with_parent` is a pool initializer: on Linux the kernel sends the worker
SIGKILL when its parent dies (``prctl(PR_SET_PDEATHSIG)``); elsewhere, and as a check of a
parent that died before the call, a daemon thread polls the parent's pid and ends the
worker when it is gone. A parent killed by SIGTERM or SIGKILL, which runs no clean-up,
leaves no worker behind.
"""

from __future__ import annotations

import os
import signal
import sys
import time

PR_SET_PDEATHSIG = 1
#: seconds between two looks at the parent, where the kernel cannot be asked
POLL_S = 0.5


def _kernel_kills_orphans() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        # the process's own symbols hold libc's: `ctypes.util.find_library("c")` ran
        # `ldconfig -p` in a subprocess, in every worker, before it could start
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        try:
            import ctypes.util

            prctl = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True).prctl
        except (OSError, AttributeError):
            return False
    return prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0


def _watch(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(POLL_S)
    os._exit(1)


def die_with_parent(parent: int) -> None:
    """Make this process end when the process ``parent`` does."""
    if not _kernel_kills_orphans():
        import threading

        threading.Thread(target=_watch, args=(parent,), daemon=True, name="gradgate-parent-watch").start()
    if os.getppid() != parent:  # the parent died before the kernel was asked
        os._exit(1)
