"""gradgate.forked: a run's jobs done by this process and children forked from it."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from gradgate import forked
from gradgate.forked import ChildFailed, ForkedShares, can_fork

pytestmark = pytest.mark.skipif(not can_fork(), reason="forks only on Linux, from a process of one thread")


def _square_and_pid(n: int) -> tuple[int, int]:
    return n * n, os.getpid()


def test_results_come_in_job_order_whoever_did_each_job():
    jobs = list(range(7))
    results = list(ForkedShares(_square_and_pid, jobs, [range(0, 2), range(2, 3), range(3, 7)]).results())
    assert [value for value, _ in results] == [n * n for n in jobs]
    # which process did which job is a race (the children may take all before this one
    # starts on its own); the processes are this one and the two children
    assert len({pid for _, pid in results}) <= 3


def _slow_on_the_first(n: int) -> tuple[int, int]:
    if n == 0:
        time.sleep(1.0)
    return n, os.getpid()


def test_a_process_whose_share_is_done_takes_the_last_jobs_of_the_share_with_most_left():
    """This process's share holds a slow job and three quick ones; the child's share is
    one quick job: while job 0 is done (by this process, or by the child where it took
    them all first), the child, its share done, takes this share's last jobs."""
    results = list(ForkedShares(_slow_on_the_first, list(range(5)), [range(0, 4), range(4, 5)]).results())
    assert [n for n, _ in results] == [0, 1, 2, 3, 4]
    pids = [pid for _, pid in results]
    child = pids[4]
    assert child != os.getpid() and pids[1:4] == [child, child, child]


def _fails_on_three(n: int) -> int:
    if n == 3:
        raise ValueError("three is not allowed")
    return n


def test_an_exception_in_a_child_is_raised_here():
    with pytest.raises(ValueError, match="three is not allowed"):
        list(ForkedShares(_fails_on_three, [1, 2, 3], [range(0, 2), range(2, 3)]).results())


class _Unpicklable(Exception):
    def __reduce__(self):
        raise TypeError("not picklable")


def _raises_unpicklable_in_a_child(n: int) -> int:
    if os.getpid() != PARENT_PID:
        raise _Unpicklable("odd")
    time.sleep(0.5)  # the child claims its job meanwhile
    return n


PARENT_PID = os.getpid()


def test_an_exception_that_does_not_pickle_comes_as_its_traceback():
    with pytest.raises(ChildFailed, match=r"(?s)a worker process failed:.*_Unpicklable: odd"):
        list(ForkedShares(_raises_unpicklable_in_a_child, [0, 1], [range(0, 1), range(1, 2)]).results())


def _killed_in_a_child(n: int) -> int:
    if os.getpid() != PARENT_PID:
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(0.5)
    return n


def test_a_child_killed_before_it_answers_is_a_failure_that_says_so():
    with pytest.raises(ChildFailed, match=r"ended without its results \(signal 9\)"):
        list(ForkedShares(_killed_in_a_child, [0, 1], [range(0, 1), range(1, 2)]).results())


def _sleeps(n: int) -> int:
    time.sleep(60)
    return n


def test_close_ends_the_children_still_working():
    shares = ForkedShares(_sleeps, [0, 1, 2], [range(0, 1), range(1, 2), range(2, 3)])
    pids = [pid for pid, _ in shares._children]
    assert len(pids) == 2
    started = time.monotonic()
    shares.shutdown(cancel_futures=True)
    assert time.monotonic() - started < 10
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)  # ended and reaped


def test_a_process_with_a_second_thread_does_not_fork(monkeypatch):
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        assert not can_fork()
    finally:
        stop.set()
        thread.join()
    monkeypatch.setattr(forked.sys, "platform", "darwin")
    assert not can_fork()


class _DiesHoldingTheLock(ForkedShares):
    """A child that is killed while it holds the lock (as SIGKILL or the OOM killer may)."""

    def _claim(self, own: int) -> int | None:
        if os.getpid() != PARENT_PID:
            import fcntl

            fcntl.lockf(self._lock, fcntl.LOCK_EX)
            os.kill(os.getpid(), signal.SIGKILL)
        return super()._claim(own)


def test_a_child_killed_while_it_holds_the_lock_does_not_hang_this_process():
    def hung(signum, frame):
        raise TimeoutError("this process waited for a lock a dead child held")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(20)
    try:
        with pytest.raises(ChildFailed, match=r"signal 9"):
            list(_DiesHoldingTheLock(_killed_in_a_child, [0, 1], [range(0, 1), range(1, 2)]).results())
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def test_the_results_are_given_once():
    shares = ForkedShares(_square_and_pid, [1, 2], [range(0, 1), range(1, 2)])
    assert [value for value, _ in shares.results()] == [1, 4]
    with pytest.raises(RuntimeError, match="taken already"):
        next(shares.results())


def test_an_interrupted_run_ends_its_children_and_lets_go_of_what_they_shared():
    shares = ForkedShares(_sleeps, [0, 1, 2], [range(0, 1), range(1, 2), range(2, 3)])
    pids = [pid for pid, _ in shares._children]

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 0.5)
    try:
        with pytest.raises(KeyboardInterrupt):
            list(shares.results())  # this process's own job sleeps: interrupted in it
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert shares._children == [] and shares._map.closed
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_where_no_memory_file_can_be_made_the_lock_is_a_removed_temporary_file(monkeypatch, tmp_path):
    import tempfile

    made: list[str] = []

    def refused(name: str, flags: int = 0) -> int:
        made.append(name)
        raise OSError(38, "Function not implemented")

    monkeypatch.setattr(forked.os, "memfd_create", refused, raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    results = list(ForkedShares(_square_and_pid, [1, 2, 3], [range(0, 1), range(1, 3)]).results())
    assert [value for value, _ in results] == [1, 4, 9]
    assert made == ["gradgate-shares"]
    assert list(tmp_path.iterdir()) == []  # unlinked as soon as it was opened


def test_the_lock_file_is_closed_with_the_shares():
    shares = ForkedShares(_square_and_pid, [1, 2], [range(0, 1), range(1, 2)])
    descriptor = shares._lock
    assert [value for value, _ in shares.results()] == [1, 4]
    with pytest.raises(OSError):
        os.fstat(descriptor)
