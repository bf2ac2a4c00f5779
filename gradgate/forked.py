"""A run's files analysed by this process and children forked from it.

A run that analyses enough files to pay for more processes (:func:`gradgate.runner._workers`)
splits them into shares of consecutive files, one a process. Where the process can fork
safely (Linux, one thread), :class:`ForkedShares` forks one child a share after the
first and works on the first itself. Each process takes its next file from the front of
its own share or, its share done, from the end of the share with most left; a child
writes its results, pickled, to a pipe and ends. A child starts with what this process
has loaded (the engine's modules, imported before the fork, and the files' bytes): the
engine is not imported again and nothing is sent to it (:mod:`pickle`, which only the
children's results need, is imported after the fork: by a child before its work, by
this process once its own share is done, while the children may still work). A process pool
(``concurrent.futures``) sent every share to a worker, each worker imported the engine
again and the parent idled meanwhile: 30-45 ms between the end of the pre-filter and the
first file analysed on TransformerEngine.

A child dies with this process (:func:`~gradgate.workers.die_with_parent`); an exception
in a child is raised here, and no result is given.
"""

from __future__ import annotations

import fcntl
import mmap
import os
import signal
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Generic, TypeVar

from .workers import die_with_parent

Job = TypeVar("Job")
Result = TypeVar("Result")


def can_fork() -> bool:
    """Can this process fork children that run Python safely: Linux, and no thread but
    this one (a fork copies only the calling thread; a lock another held stays held)?
    A process that has not imported :mod:`threading` started none of its threads."""
    threading = sys.modules.get("threading")
    alone = threading is None or threading.active_count() == 1
    return sys.platform.startswith("linux") and hasattr(os, "fork") and alone


def _lock_file() -> int:
    """A file descriptor of an unnamed file, to hold the shares' record lock: a memory
    file where the kernel makes one, else a temporary file removed at once. (Importing
    :mod:`tempfile` cost 4.5 ms, a tenth of what a run does before its fork.)"""
    try:
        return os.memfd_create("gradgate-shares")
    except (AttributeError, OSError):  # not Linux 3.17 or later, or a sandbox refuses it
        import tempfile

        descriptor, path = tempfile.mkstemp(prefix="gradgate-shares-")
        try:
            os.unlink(path)
        except OSError:
            pass  # an empty file left in the temporary folder; the lock on it works all the same
        return descriptor


class ChildFailed(RuntimeError):
    """A child ended without its results (killed, or its exception did not pickle)."""


class ForkedShares(Generic[Job, Result]):
    """``work`` applied to every job, by this process and one forked child a share after
    the first; :meth:`results` gives the results in job order.

    Each process starts on its own share (a run of consecutive jobs, as
    :func:`gradgate.runner._shares` cuts them by expected cost) and takes its next job
    from the front of it; one whose share is done takes the last job of the share with
    most left. The expected costs are a guess (TransformerEngine's two shares took 0.32 s
    and 0.42-0.45 s): the processes end together, within one job, and each still works
    on runs of consecutive files, mostly its own package's."""

    def __init__(self, work: Callable[[Job], Result], jobs: Sequence[Job], shares: Sequence[range]) -> None:
        self._work = work
        self._jobs = jobs
        self._shares = len(shares)
        # each share's next and stop, shared with the children (an anonymous map is
        # shared across a fork), changed only under the lock: a POSIX record lock on
        # an unnamed file, which the kernel lets go of when its holder dies
        self._map = mmap.mmap(-1, 16 * max(1, len(shares)))
        self._bounds = memoryview(self._map).cast("q")
        for k, share in enumerate(shares):
            self._bounds[2 * k], self._bounds[2 * k + 1] = share.start, share.stop
        self._lock = _lock_file()  # held until close()
        self._spent = False
        #: each child's pid and the read end of its pipe
        self._children: list[tuple[int, int]] = []
        parent = os.getpid()
        try:
            for k in range(1, len(shares)):
                self._children.append(self._fork(k, parent))
        except BaseException:
            self.close()
            raise

    def _claim(self, own: int) -> int | None:
        """The index of the next job for the process of share ``own``, or None: no job left."""
        bounds = self._bounds
        fcntl.lockf(self._lock, fcntl.LOCK_EX)
        try:
            at, stop = bounds[2 * own], bounds[2 * own + 1]
            if at < stop:
                bounds[2 * own] = at + 1
                return at
            left = [bounds[2 * k + 1] - bounds[2 * k] for k in range(self._shares)]
            most = max(range(self._shares), key=left.__getitem__, default=None)
            if most is None or left[most] <= 0:
                return None
            bounds[2 * most + 1] -= 1
            return bounds[2 * most + 1]
        finally:
            fcntl.lockf(self._lock, fcntl.LOCK_UN)

    def _drain(self, own: int) -> list[tuple[int, Result]]:
        done = []
        while (index := self._claim(own)) is not None:
            done.append((index, self._work(self._jobs[index])))
        return done

    def _fork(self, own: int, parent: int) -> tuple[int, int]:
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: never returns
            os.close(read_end)
            self._child(own, write_end, parent)
        os.close(write_end)
        return pid, read_end

    def _child(self, own: int, write_end: int, parent: int) -> None:
        status = 1
        try:
            signal.signal(signal.SIGINT, signal.SIG_DFL)  # Ctrl-C ends it; the parent reports
            die_with_parent(parent)
            try:
                import pickle  # after the fork (the module's docstring says why)

                payload = pickle.dumps((True, self._drain(own)), pickle.HIGHEST_PROTOCOL)
            except Exception as exc:  # noqa: BLE001  # whatever it is, the parent raises it
                payload = _pickled_failure(exc)
            with os.fdopen(write_end, "wb") as out:
                out.write(payload)
            status = 0
        finally:
            os._exit(status)  # no clean-up of the parent's state: its buffers, its atexit

    def results(self) -> Iterator[Result]:
        """The results, in job order (once: the children are gone after it)."""
        if self._spent:
            raise RuntimeError("the results of these shares were taken already")
        self._spent = True
        try:
            found: dict[int, Result] = dict(self._drain(0))
            import pickle  # noqa: F401  # for _answer, while the children may still work

            while self._children:
                pid, read_end = self._children[0]
                with os.fdopen(read_end, "rb", closefd=False) as handle:
                    payload = handle.read()  # to its end: the child has written all and is ending
                self._children.pop(0)  # interrupted before this, close() ends it and its pipe
                os.close(read_end)
                _, status = os.waitpid(pid, 0)
                found.update(_answer(payload, status))
        finally:
            self.close()
        for index in range(len(self._jobs)):
            yield found.pop(index)

    def close(self) -> None:
        """End the children still working (a run cut short), and let go of what is shared."""
        try:
            while self._children:
                pid, read_end = self._children.pop()
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                os.close(read_end)
                try:
                    os.waitpid(pid, 0)
                except ChildProcessError:
                    pass
        finally:
            if not self._map.closed:
                self._bounds.release()
                self._map.close()
                os.close(self._lock)
            self._spent = True

    # the interface of concurrent.futures' executors that the runner uses
    def shutdown(self, *, cancel_futures: bool = False) -> None:
        self.close()


def _answer(payload: bytes, status: int) -> list[tuple[Any, Any]]:
    """A child's results from what it wrote, or its failure raised."""
    import pickle

    if not payload:
        raise ChildFailed(f"a worker process ended without its results ({_ended(status)})")
    try:
        ok, value = pickle.loads(payload)
    except Exception as exc:  # noqa: BLE001  # a payload cut short, an exception that does not load
        raise ChildFailed(f"a worker process's answer did not load ({_ended(status)}): {exc!r}") from None
    if not ok:
        raise value
    return value


def _pickled_failure(exc: Exception) -> bytes:
    import pickle

    try:
        return pickle.dumps((False, exc), pickle.HIGHEST_PROTOCOL)
    except Exception:  # noqa: BLE001  # an exception that does not pickle: its text
        import traceback

        text = "".join(traceback.format_exception(exc))
        return pickle.dumps((False, ChildFailed(f"a worker process failed:\n{text}")), pickle.HIGHEST_PROTOCOL)


def _ended(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"signal {os.WTERMSIG(status)}"
    return f"exit status {os.WEXITSTATUS(status)}" if os.WIFEXITED(status) else f"status {status}"
