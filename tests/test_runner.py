"""The runner's speed paths change nothing but speed: worker processes, the cache and
the pre-filters give the same results, in the same order, as the plain engine."""

from __future__ import annotations

from collections import Counter

from conftest import run_cli

from gradgate.config import Config
from gradgate.discovery import discover
from gradgate.engine import lint_file
from gradgate.runner import RunOptions, run


def _key(results):
    return [(r.path, r.error, [(f.rule, f.line, f.column, f.message, f.fixable) for f in r.findings]) for r in results]


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
