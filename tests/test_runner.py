"""The runner's speed paths change nothing but speed: worker processes, the cache and
the pre-filters give the same results, in the same order, as the plain engine."""

from __future__ import annotations

import os
from collections import Counter

import pytest
from conftest import run_cli

from gradgate.config import Config
from gradgate.discovery import discover
from gradgate.engine import lint_file
from gradgate.runner import RunOptions, run


def _key(results):
    return [(r.path, r.error, [(f.rule, f.line, f.column, f.message, f.fixable) for f in r.findings]) for r in results]


@pytest.mark.slow
def test_workers_cache_and_plain_engine_agree_on_te(te_sources, tmp_path, monkeypatch):
    monkeypatch.chdir(te_sources)
    config = Config()
    plain = [lint_file(d.path, config) for d in discover(["transformer_engine"])]
    one = list(run(["transformer_engine"], config, RunOptions(jobs=1)))
    two = list(run(["transformer_engine"], config, RunOptions(jobs=2)))
    cache = str(tmp_path / "cache")
    cold = list(run(["transformer_engine"], config, RunOptions(jobs=2, cache_dir=cache)))
    warm = list(run(["transformer_engine"], config, RunOptions(jobs=2, cache_dir=cache)))
    assert _key(plain) == _key(one) == _key(two) == _key(cold) == _key(warm)
    assert [r.path for r in two] == [d.path for d in discover(["transformer_engine"])]  # discovery order
    # the bytes pre-filter leaves 18 of TE's 222 files; on a warm run nothing is parsed
    assert Counter(r.stage for r in cold)["prefilter"] == 204
    assert Counter(r.stage for r in warm) == Counter({"prefilter": 204, "cache": 18})


def test_cli_outputs_are_identical_with_one_or_two_workers(te_sources, tmp_path):
    one = run_cli("check", "--format", "json", "--no-cache", "-j", "1", "transformer_engine", cwd=te_sources)
    two = run_cli("check", "--format", "json", "--no-cache", "-j", "2", "transformer_engine", cwd=te_sources)
    assert one.returncode == two.returncode == 1
    assert one.stdout == two.stdout


def test_a_run_leaves_no_cyclic_garbage_and_restores_the_collector(te_sources, monkeypatch):
    """An interpretation makes no reference cycle: what a run made is freed by reference
    counting when the run ends, not kept (with every module the project parsed) until a
    collector pass; the run turns the collector off and back on."""
    import gc

    monkeypatch.chdir(te_sources)
    assert gc.isenabled()
    list(run(["transformer_engine/pytorch/module/base.py"], Config(), RunOptions(jobs=1)))
    assert gc.isenabled()
    gc.collect()
    gc.disable()  # no pass of the collector may hide a cycle the run made
    try:
        results = list(run(["transformer_engine/pytorch/module"], Config(), RunOptions(jobs=1)))
        assert not gc.isenabled()
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        ours = Counter(type(o).__qualname__ for o in gc.garbage if type(o).__module__.startswith("gradgate"))
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert sum(len(r.findings) for r in results) == 3
    assert ours == Counter()


def test_the_fast_exit_keeps_exit_codes_and_output(tmp_path):
    """The CLI ends with ``os._exit`` once its output is flushed: exit statuses and the
    whole output are what they were, and a reader that closed the pipe early gets no
    traceback."""
    import subprocess
    import sys

    (tmp_path / "m.py").write_text(
        "import torch\n\ndef forward(ub_overlap_ag):\n    ub_overlap_ag = ub_overlap_ag and torch.is_grad_enabled()\n"
        "    return ub_overlap_ag\n"
    )
    found = run_cli("check", "--no-cache", "m.py", cwd=tmp_path)
    assert found.returncode == 1
    assert found.stdout.decode().splitlines()[-1] == "Found 1 finding (1 fixable with `gradgate fix`)."
    assert run_cli("check", "--no-cache", "--select", "GG002", "m.py", cwd=tmp_path).returncode == 0
    assert run_cli("check", "--no-cache", "missing.py", cwd=tmp_path).returncode == 2
    many = "".join(
        f"def forward{i}(ub_overlap_ag):\n    ub_overlap_ag = ub_overlap_ag and torch.is_grad_enabled()\n"
        "    return ub_overlap_ag\n\n"
        for i in range(600)
    )  # 600 findings: more output than a pipe holds
    (tmp_path / "n.py").write_text("import torch\n\n" + many)
    import os

    from conftest import ROOT

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen(
        [sys.executable, "-m", "gradgate", "check", "--no-cache", "n.py"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.read(100)
    process.stdout.close()  # `gradgate check | head -c 100`
    err = process.stderr.read()
    assert process.wait() == 1
    assert b"Traceback" not in err


def test_the_prefilter_scans_for_what_every_token_holds_first():
    """A file without ``_enabled`` holds no grad-mode token: one scan decides; a token
    inside another is not scanned for; the function names of other files still count."""
    from gradgate.prefilter import may_hold_findings
    from gradgate.records import replace

    config = Config()
    assert config.prefilter_tokens() == (b"grad_enabled", b"grad_mode_enabled", b"is_inference_mode_enabled")
    assert config.prefilter_gate() == b"_enabled"
    assert may_hold_findings(b"x = torch.is_grad_enabled()", config)
    assert not may_hold_findings(b"x = torch.no_grad()", config)
    assert may_hold_findings(b"x = grad_on()", config, frozenset({b"grad_on"}))
    unused = replace(config, extend_select=("GG100",))
    assert unused.prefilter_gate() is None  # `gradgate:` shares nothing with the others
    assert may_hold_findings(b"x = 1  # gradgate: ignore[GG001]", unused)


@pytest.mark.parametrize("cwd", ["/tmp", "/tmp/", "/", "/tmp/x", "//tmp", "/tmp/./x/.."])
def test_a_shown_path_is_relpaths_below_the_working_directory_else_the_path_as_given(cwd):
    """``display_path`` works lexically (no ``relpath``): it must say what relpath says
    for a path below the working directory, and give any other path back as it came."""
    from gradgate.targets import display_path

    for path in (
        "/tmp/a.py",
        "/tmp//x/./y.py",
        "/tmp/x/../z.py",
        "/etc/passwd",
        "/tmp",
        "/tmp/",
        "/tmpx/a.py",
        "/",
        "/tmp/x/..",
        "//tmp/a.py",
        "/../tmp/a.py",
        "/..x",
        "/tmp/..cache/a.py",
    ):
        relative = os.path.relpath(path, cwd)
        assert display_path(path, cwd) == (path if relative.startswith(os.pardir) else relative)
    assert display_path("./pkg/./a.py") == "pkg/./a.py"  # a relative path: only a leading ./ goes
