"""gradgate.forked: shares of work done by forked children, the first in this process."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from gradgate import forked
from gradgate.forked import ChildFailed, ForkedShares, can_fork

pytestmark = pytest.mark.skipif(not can_fork(), reason="forks only on Linux, from a process of one thread")


def _squares_with_pids(share: list[int]) -> list[tuple[int, int]]:
    return [(n * n, os.getpid()) for n in share]


def test_results_come_in_share_order_from_this_process_and_one_child_a_share():
    shares = [[1, 2], [3], [4, 5, 6]]
    results = list(ForkedShares(_squares_with_pids, shares).results())
    assert [value for value, _ in results] == [1, 4, 9, 16, 25, 36]
    pids = [pid for _, pid in results]
    assert pids[0] == pids[1] == os.getpid()  # the first share: here
    assert len({pids[2], pids[3]}) == 2 and os.getpid() not in pids[2:]  # the others: a child each
    assert pids[3] == pids[4] == pids[5]


def _fails_on_three(share: list[int]) -> list[int]:
    if 3 in share:
        raise ValueError("three is not allowed")
    return share


def test_an_exception_in_a_child_is_raised_here_after_the_results_before_it():
    results = ForkedShares(_fails_on_three, [[1], [2], [3]]).results()
    assert next(results) == 1 and next(results) == 2
    with pytest.raises(ValueError, match="three is not allowed"):
        next(results)


class _Unpicklable(Exception):
    def __reduce__(self):
        raise TypeError("not picklable")


def _raises_unpicklable(share: list[int]) -> list[int]:
    if share:
        raise _Unpicklable("odd")
    return share


def test_an_exception_that_does_not_pickle_comes_as_its_traceback():
    with pytest.raises(ChildFailed, match=r"(?s)a worker process failed:.*_Unpicklable: odd"):
        list(ForkedShares(_raises_unpicklable, [[], [1]]).results())


def _kills_itself(share: list[int]) -> list[int]:
    if share:
        os.kill(os.getpid(), signal.SIGKILL)
    return share


def test_a_child_killed_before_it_answers_is_a_failure_that_says_so():
    with pytest.raises(ChildFailed, match=r"ended without its results \(signal 9\)"):
        list(ForkedShares(_kills_itself, [[], [1]]).results())


def _sleeps(share: list[int]) -> list[int]:
    time.sleep(60)
    return share


def test_close_ends_the_children_still_working():
    shares = ForkedShares(_sleeps, [[], [1], [2]])
    pids = [pid for pid, _ in shares._children]
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
