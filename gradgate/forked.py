"""Shares of a run's work done by forked children, the first by this process itself.

A run that analyses enough files to pay for more processes (:func:`gradgate.runner._workers`)
splits them into shares of consecutive files. Where the process can fork safely (Linux,
one thread), :class:`ForkedShares` forks one child per share after the first and
analyses the first share itself while they work; each child writes its share's results,
pickled, to a pipe and ends. A child starts with what this process has loaded (the
engine's modules, imported before the fork, and the files' bytes): no module is imported
twice and nothing is sent to it. A process pool (``concurrent.futures``) did the same
with every share sent to a worker, each worker importing the engine again and the parent
idle meanwhile: 30-45 ms between the end of the pre-filter and the first file analysed
on TransformerEngine.

A child dies with this process (:func:`~gradgate.workers.die_with_parent`); an exception
in a child is raised here, after the results before it.
"""

from __future__ import annotations

import os
import pickle
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Iterator, Sequence
from typing import Generic, TypeVar

from .workers import die_with_parent

Job = TypeVar("Job")
Result = TypeVar("Result")


def can_fork() -> bool:
    """Can this process fork children that run Python safely: Linux, and no thread but
    this one (a fork copies only the calling thread; a lock another held stays held)?"""
    return sys.platform.startswith("linux") and hasattr(os, "fork") and threading.active_count() == 1


class ChildFailed(RuntimeError):
    """A child ended without its results (killed, or its exception did not pickle)."""


class ForkedShares(Generic[Job, Result]):
    """``work`` applied to each share, the first share in this process and each other in
    a forked child; :meth:`results` gives the results in share order."""

    def __init__(self, work: Callable[[list[Job]], list[Result]], shares: Sequence[list[Job]]) -> None:
        self._work = work
        self._first = list(shares[0]) if shares else []
        #: each child's pid and the read end of its pipe, in share order
        self._children: list[tuple[int, int]] = []
        parent = os.getpid()
        try:
            for share in shares[1:]:
                self._children.append(self._fork(share, parent))
        except BaseException:
            self.close()
            raise

    def _fork(self, share: list[Job], parent: int) -> tuple[int, int]:
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: never returns
            os.close(read_end)
            self._child(share, write_end, parent)
        os.close(write_end)
        return pid, read_end

    def _child(self, share: list[Job], write_end: int, parent: int) -> None:
        status = 1
        try:
            signal.signal(signal.SIGINT, signal.SIG_DFL)  # Ctrl-C ends it; the parent reports
            die_with_parent(parent)
            try:
                payload = pickle.dumps((True, self._work(share)), pickle.HIGHEST_PROTOCOL)
            except Exception as exc:  # noqa: BLE001  # whatever it is, the parent raises it
                payload = _pickled_failure(exc)
            with os.fdopen(write_end, "wb") as out:
                out.write(payload)
            status = 0
        finally:
            os._exit(status)  # no clean-up of the parent's state: its buffers, its atexit

    def results(self) -> Iterator[Result]:
        yield from self._work(self._first)
        while self._children:
            pid, read_end = self._children[0]
            with os.fdopen(read_end, "rb") as handle:
                payload = handle.read()
            self._children.pop(0)
            _, status = os.waitpid(pid, 0)
            if not payload:
                raise ChildFailed(f"a worker process ended without its results ({_ended(status)})")
            ok, value = pickle.loads(payload)
            if not ok:
                raise value
            yield from value

    def close(self) -> None:
        """End the children still working (a run cut short)."""
        for pid, read_end in self._children:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.close(read_end)
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
        self._children = []

    # the interface of concurrent.futures' executors that the runner uses
    def shutdown(self, *, cancel_futures: bool = False) -> None:
        self.close()


def _pickled_failure(exc: Exception) -> bytes:
    try:
        return pickle.dumps((False, exc), pickle.HIGHEST_PROTOCOL)
    except Exception:  # noqa: BLE001  # an exception that does not pickle: its text
        text = "".join(traceback.format_exception(exc))
        return pickle.dumps((False, ChildFailed(f"a worker process failed:\n{text}")), pickle.HIGHEST_PROTOCOL)


def _ended(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"signal {os.WTERMSIG(status)}"
    return f"exit status {os.WEXITSTATUS(status)}" if os.WIFEXITED(status) else f"status {status}"
