"""A file named on the command line (as pre-commit names the changed files) sees the
functions that return grad mode in the modules it imports, in the run or not; the cache
reads it again when one of those modules changes."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest
from conftest import ROOT, invoke

import gradgate.cache as cache_module

FIXTURE = ROOT / "tests" / "fixtures" / "xmod" / "pos_returns_grad_mode"
FINDING = (
    "ovl/layer.py:26:46: GG001 forward communication flag `overlap_comm` is gated on grad mode (`grad_on()`): "
    "under torch.no_grad() the requested path is silently dropped"
)
NOT_GRAD = '"""Small runtime-state helpers."""\n\nimport torch\n\n\ndef grad_on():\n    return True\n'


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    shutil.copytree(FIXTURE, tmp_path / "tree")
    return tmp_path / "tree"


def _lines(result) -> list[str]:
    return result.stdout.splitlines()


def test_a_file_checked_alone_sees_a_grad_returning_function_of_a_module_outside_the_run(tree):
    alone = invoke(["check", "--no-cache", "ovl/layer.py"], cwd=tree)
    assert (alone.exit_code, _lines(alone)[0]) == (1, FINDING)
    together = invoke(["check", "--no-cache", "ovl/layer.py", "ovl/state.py"], cwd=tree)
    folder = invoke(["check", "--no-cache", "ovl"], cwd=tree)
    assert alone.stdout == together.stdout == folder.stdout


def test_the_cached_result_of_a_file_checked_alone_follows_the_module_it_imports(tree, tmp_path, monkeypatch):
    monkeypatch.setattr(cache_module, "RACY_NS", 0)  # trust a status at once
    cache = str(tmp_path / "cache")
    state = tree / "ovl" / "state.py"
    real = state.read_text()

    def check() -> list[str]:
        return _lines(invoke(["check", "--cache-dir", cache, "-q", "ovl/layer.py"], cwd=tree))

    def write(text: str) -> None:
        state.write_text(text)
        later = time.time() + 5
        os.utime(state, (later, later))  # another status, whatever the clock's resolution

    write(NOT_GRAD)
    assert check() == [] and check() == []  # cold, then warm: decided with state.py as it is
    write(real)
    assert check() == [FINDING] and check() == [FINDING]
    write(NOT_GRAD)
    assert check() == []


def test_a_file_whose_whole_package_is_in_the_run_is_not_parsed_for_its_imports(tree, monkeypatch):
    """``pre-commit run --all-files`` names every file: none is parsed for its imports."""
    import gradgate.runner as runner

    asked: list[str] = []
    real = runner._imported_outside

    def recording(path, *rest):
        asked.append(os.path.basename(path))
        return real(path, *rest)

    monkeypatch.setattr(runner, "_imported_outside", recording)
    every = invoke(["check", "--no-cache", "-q", "ovl/__init__.py", "ovl/layer.py", "ovl/state.py"], cwd=tree)
    assert (every.exit_code, _lines(every), asked) == (1, [FINDING], [])
    alone = invoke(["check", "--no-cache", "-q", "ovl/layer.py"], cwd=tree)
    assert (alone.exit_code, _lines(alone), asked) == (1, [FINDING], ["layer.py"])


def test_a_named_file_that_ignores_itself_is_ignored_by_the_outside_pass_too(tree):
    layer = tree / "ovl" / "layer.py"
    layer.write_text("# gradgate: ignore-file\n" + layer.read_text())
    alone = invoke(["check", "--no-cache", "ovl/layer.py"], cwd=tree)
    folder = invoke(["check", "--no-cache", "ovl"], cwd=tree)
    assert (alone.exit_code, _lines(alone)) == (folder.exit_code, _lines(folder)) == (0, ["All checks passed."])
