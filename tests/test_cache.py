"""gradgate.cache: what an entry records of the files its result rests on."""

from __future__ import annotations

import os
import time

from gradgate import cache as cache_module
from gradgate.cache import ResultCache, content_key
from gradgate.config import Config
from gradgate.results import FileResult

#: a file's status is trusted once it is this old (racy-clean rule), in nanoseconds
_LATER = 10 * 10**9


def _write(path, text: str) -> str:
    path.write_text(text)
    return os.fspath(path)


def test_the_files_results_rest_on_are_read_once_a_run_and_a_change_to_one_is_seen(tmp_path, monkeypatch):
    key = b"k" * 64
    helper = _write(tmp_path / "helper.py", "def f(): pass\n")
    users = [_write(tmp_path / f"user{k}.py", "import helper\n") for k in range(3)]
    hashed: list[bytes] = []

    def counted(data: bytes) -> str:
        hashed.append(data)
        return content_key(data)

    monkeypatch.setattr(cache_module, "content_key", counted)
    now = time.time_ns() + _LATER
    first = ResultCache(os.fspath(tmp_path / "cache"), Config(), key=key)
    for user in users:
        first.put(user, "digest", os.stat(user), now, FileResult(user, stage="ast", dependencies=(helper,)))
    first.save()
    assert hashed == [b"def f(): pass\n"]  # three results rest on helper.py: read once

    again = ResultCache(os.fspath(tmp_path / "cache"), Config(), key=key)
    assert [again.get(user, "digest", user) is not None for user in users] == [True] * 3
    _write(tmp_path / "helper.py", "def f(): return 1\n")
    changed = ResultCache(os.fspath(tmp_path / "cache"), Config(), key=key)
    assert [changed.get(user, "digest", user) for user in users] == [None] * 3
