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
    "GIT_AUTHOR_NAME": "gradgate-test",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "gradgate-test",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
}


def git(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, check=True, env={**os.environ, **GIT_ENV})


def _head_of_this_repository() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, check=True, text=True
        ).stdout.strip()
    except (subprocess.CalledProcessError, FileNotFoundError):
        pytest.skip("the gradgate checkout is not a git repository with a commit")


@pytest.fixture(scope="session")
def pre_commit_home(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("pre-commit-home")


def _pre_commit(*args: str, cwd: Path, home: Path) -> subprocess.CompletedProcess:
    if (
        shutil.which("pre-commit") is None
        and subprocess.run([sys.executable, "-m", "pre_commit", "--version"], capture_output=True).returncode != 0
    ):
        pytest.fail("pre-commit is not installed: install gradgate with the [test] extra")
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", *args],
        cwd=cwd,
        capture_output=True,
        # not this checkout on PYTHONPATH: the hook runs the gradgate pre-commit installed
        env={**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, **GIT_ENV, "PRE_COMMIT_HOME": str(home)},
    )


@pytest.mark.slow
@pytest.mark.network  # pre-commit pip-installs the hook's repository and its dependencies
@pytest.mark.parametrize("hook", ["gradgate", "gradgate-fix"])
def test_pre_commit_hooks(tmp_path, hook, pre_commit_home):
    rev = _head_of_this_repository()
    repo = tmp_path / "user-repo"
    repo.mkdir()
    git("init", "-q", cwd=repo)
    buggy = (
        "def f(ub_overlap_ag, is_grad_enabled, x):\n    return ub_overlap_ag and x\n\n"
        "def g(ub_overlap_rs, is_grad_enabled):\n    ub_overlap_rs = ub_overlap_rs and is_grad_enabled\n"
        "    return ub_overlap_rs\n"
    )
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
    # `ub_overlap_rs = ub_overlap_rs` would be left: the statement goes
    assert (repo / "model.py").read_text() == buggy.replace(
        "    ub_overlap_rs = ub_overlap_rs and is_grad_enabled\n", ""
    )
    git("add", ".", cwd=repo)
    # ... and the rerun passes
    second = _pre_commit("run", "--all-files", cwd=repo, home=pre_commit_home)
    assert second.returncode == 0, second.stdout.decode() + second.stderr.decode()


def _local_hook(hook_id: str) -> str:
    """The hook ``hook_id`` of this repository's .pre-commit-hooks.yaml as a ``repo: local``
    hook running this checkout (``language: system``; no install, no network)."""
    import json

    import yaml

    (hook,) = [h for h in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text()) if h["id"] == hook_id]
    entry = hook["entry"].replace("gradgate", f"{sys.executable} -m gradgate", 1)
    local = {**hook, "entry": entry, "language": "system"}
    return "repos:\n  - repo: local\n    hooks:\n      - " + json.dumps(local) + "\n"


def test_pre_commit_run_honours_exclude_and_nested_pyproject(tmp_path, pre_commit_home):
    """pre-commit names every file on the command line: `exclude` still applies to them
    (force-exclude), and each file gets the nearest pyproject.toml's settings."""
    repo = tmp_path / "user-repo"
    (repo / "vendored").mkdir(parents=True)
    (repo / "sub").mkdir()
    git("init", "-q", cwd=repo)
    buggy = (
        "def f(ub_overlap_rs, is_grad_enabled):\n    ub_overlap_rs = ub_overlap_rs and is_grad_enabled\n"
        "    return ub_overlap_rs\n"
    )
    for name in ("model.py", "vendored/lib.py", "sub/real.py", "sub/generated_x.py", "sub/legacy.py"):
        (repo / name).write_text(buggy)
    (repo / "pyproject.toml").write_text('[tool.gradgate]\nexclude = ["vendored"]\n')
    # the nested file replaces the top one for sub/: its own exclude, relative to sub/
    (repo / "sub" / "pyproject.toml").write_text(
        '[tool.gradgate]\nexclude = ["generated_*.py"]\nper-file-ignores = { "legacy.py" = ["gg001"] }\n'
    )
    (repo / ".pre-commit-config.yaml").write_text(_local_hook("gradgate"))
    git("add", ".", cwd=repo)
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    result = subprocess.run(
        [sys.executable, "-m", "pre_commit", "run", "--all-files"],
        cwd=repo,
        capture_output=True,
        text=True,
        env={**env, **GIT_ENV, "PRE_COMMIT_HOME": str(pre_commit_home)},
    )
    assert result.returncode == 1, result.stdout + result.stderr
    reported = sorted(line.split(": GG001")[0] for line in result.stdout.splitlines() if ": GG001 " in line)
    assert reported == ["model.py:2:39", "sub/real.py:2:39"]
    # the same files named by hand with --no-force-exclude: excluded ones come back
    named = run_cli("check", "--no-force-exclude", "vendored/lib.py", "sub/generated_x.py", cwd=repo)
    assert named.returncode == 1
    assert sorted(line.split(": GG001")[0] for line in named.stdout.decode().splitlines() if ": GG001 " in line) == [
        "sub/generated_x.py:2:39",
        "vendored/lib.py:2:39",
    ]


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
    assert "layernorm_linear.py | 2 +-" in changed and "layernorm_mlp.py    | 3 +--" in changed
    assert run_cli("check", "transformer_engine", cwd=fork).returncode == 0
    # gradgate fix in place gives the same files as the applied patch
    assert run_cli("fix", "transformer_engine", cwd=direct).returncode == 0
    for name in ("layernorm_linear.py", "layernorm_mlp.py"):
        sub = Path("transformer_engine/pytorch/module") / name
        assert (direct / sub).read_bytes() == (fork / sub).read_bytes()


MODULES = "transformer_engine/pytorch/module"


def test_libcst_codemod_gives_the_same_bytes_as_gradgate_fix(te_sources, tmp_path):
    """`python -m libcst.tool codemod` with gradgate's command, in LibCST's own framework
    (listed by `libcst.tool list`), on a copy of TE 2.20.2: the bytes `gradgate fix` writes.

    Both run on TE's `pytorch/module/` (12 files, both fix sites): libcst.tool parses every
    file it is given with LibCST first, ~30 s for TE's 222 files on two cores; the whole
    tree gives the same result (checked by hand: 2 files transformed, no byte differs)."""
    by_codemod, by_fix = tmp_path / "codemod", tmp_path / "fix"
    for target in (by_codemod, by_fix):
        shutil.copytree(te_sources / "transformer_engine", target / "transformer_engine")
    (by_codemod / ".libcst.codemod.yaml").write_text("modules: ['gradgate.codemod']\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}

    def libcst_tool(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "libcst.tool", *args], cwd=by_codemod, env=env, capture_output=True, text=True
        )

    listed = libcst_tool("list")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines() == [
        "fix.FixGradModeGates - Remove grad-mode operands from forward-path predicates "
        "(gradgate's safe fixes; --unsafe-fixes for the unsafe ones too)."
    ]
    ran = libcst_tool("codemod", "--no-format", "fix.FixGradModeGates", MODULES)
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert " - Transformed 2 files successfully." in ran.stderr
    assert " - Failed to codemod 0 files." in ran.stderr
    assert run_cli("fix", "--no-cache", MODULES, cwd=by_fix).returncode == 0
    files = sorted(p.relative_to(by_fix) for p in by_fix.rglob("*.py"))
    assert len(files) == 222
    changed = [f for f in files if (by_fix / f).read_bytes() != (te_sources / f).read_bytes()]
    assert [f.name for f in changed] == ["layernorm_linear.py", "layernorm_mlp.py"]
    assert [f for f in files if (by_codemod / f).read_bytes() != (by_fix / f).read_bytes()] == []
