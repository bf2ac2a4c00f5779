"""The three ways gradgate is used, end to end with the real tools: a pre-commit hook
(the real `pre-commit`), and a codemod over a TransformerEngine fork (`git apply`)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, run_cli

GIT_ENV = {
    "GIT_AUTHOR_NAME": "gradgate-test", "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "gradgate-test", "GIT_COMMITTER_EMAIL": "t@example.invalid",
}


def git(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, check=True,
                          env={**os.environ, **GIT_ENV})


def _head_of_this_repository() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                              check=True, text=True).stdout.strip()
    except (subprocess.CalledProcessError, FileNotFoundError):
        pytest.skip("the gradgate checkout is not a git repository with a commit")


@pytest.fixture(scope="module")
def pre_commit_home(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("pre-commit-home")


def _pre_commit(*args: str, cwd: Path, home: Path) -> subprocess.CompletedProcess:
    if shutil.which("pre-commit") is None and subprocess.run(
        [sys.executable, "-m", "pre_commit", "--version"], capture_output=True
    ).returncode != 0:
        pytest.fail("pre-commit is not installed: install gradgate with the [test] extra")
    return subprocess.run([sys.executable, "-m", "pre_commit", *args], cwd=cwd,
                          capture_output=True, env={**os.environ, **GIT_ENV, "PRE_COMMIT_HOME": str(home)})


@pytest.mark.parametrize("hook", ["gradgate", "gradgate-fix"])
def test_pre_commit_hooks(tmp_path, hook, pre_commit_home):
    rev = _head_of_this_repository()
    repo = tmp_path / "user-repo"
    repo.mkdir()
    git("init", "-q", cwd=repo)
    buggy = "def f(ub_overlap_ag, is_grad_enabled, x):\n    return ub_overlap_ag and x\n\n" \
            "def g(ub_overlap_rs, is_grad_enabled):\n    ub_overlap_rs = ub_overlap_rs and is_grad_enabled\n" \
            "    return ub_overlap_rs\n"
    (repo / "model.py").write_text(buggy)
    (repo / ".pre-commit-config.yaml").write_text(
        f"repos:\n  - repo: {ROOT}\n    rev: {rev}\n    hooks:\n      - id: {hook}\n"
    )
    git("add", ".", cwd=repo)
    first = _pre_commit("run", "--all-files", cwd=repo, home=pre_commit_home)
    output = first.stdout.decode() + first.stderr.decode()
    assert first.returncode == 1, output
    if hook == "gradgate":
        assert "model.py:5:39: GG001" in output
        assert (repo / "model.py").read_text() == buggy
        return
    # the fix hook rewrote the file (pre-commit fails a run that modifies files) ...
    assert "files were modified by this hook" in output
    assert (repo / "model.py").read_text() == buggy.replace(" and is_grad_enabled\n", "\n")
    git("add", ".", cwd=repo)
    # ... and the rerun passes
    second = _pre_commit("run", "--all-files", cwd=repo, home=pre_commit_home)
    assert second.returncode == 0, second.stdout.decode() + second.stderr.decode()


def test_codemod_patch_applies_to_a_te_fork(te_copy):
    fork = te_copy
    git("init", "-q", cwd=fork)
    git("add", "transformer_engine", cwd=fork)
    git("commit", "-q", "-m", "TransformerEngine 2.20.2", cwd=fork)
    direct = fork.parent / "direct"  # an untouched twin, fixed in place below
    shutil.copytree(fork, direct, ignore=shutil.ignore_patterns(".git"))
    result = run_cli("fix", "--diff", "transformer_engine", cwd=fork)
    assert result.returncode == 1  # changes pending
    patch = fork.parent / "fix.patch"
    patch.write_bytes(result.stdout)
    assert "Would fix 3 findings in 2 files; 0 left." in result.stderr.decode()
    git("apply", "--check", str(patch), cwd=fork)
    git("apply", str(patch), cwd=fork)
    changed = git("diff", "--stat", cwd=fork).stdout.decode()
    assert "layernorm_linear.py | 2 +-" in changed and "layernorm_mlp.py    | 4 ++--" in changed
    assert run_cli("check", "transformer_engine", cwd=fork).returncode == 0
    # gradgate fix in place gives the same files as the applied patch
    assert run_cli("fix", "transformer_engine", cwd=direct).returncode == 0
    for name in ("layernorm_linear.py", "layernorm_mlp.py"):
        sub = Path("transformer_engine/pytorch/module") / name
        assert (direct / sub).read_bytes() == (fork / sub).read_bytes()
