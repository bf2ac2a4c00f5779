"""The docs' promises, checked against what exists (issue 28.3, 28.5): every ``rev:`` and
``@ref`` they pin is an annotated tag of this repository whose tree has what the docs
use; the pre-commit hook runs from that tag with the real ``pre-commit``; every
documented ``gradgate`` command line parses; every file CONTRIBUTING and the docs cite
exists; ruff with ``RUF100`` keeps ``# noqa: E501, GG001`` with ``lint.external = ["GG"]``
(and deletes its ``GG001`` without); the Neovim 0.7 snippet attaches a client."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from conftest import ROOT, run_cli

DOCS = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
#: what a doc pins: a pre-commit `rev:` or a pip `git+...@ref`
PINS = re.compile(r"rev:\s*(\S+)|git\+https://github\.com/gradgate/gradgate@([\w.\-]+)")
ADDRESS = "https://github.com/gradgate/gradgate"


def _git(*args: str, cwd: Path = ROOT) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout


def _pins() -> dict[str, list[str]]:
    """The refs pinned to gradgate's repository, each with the docs that pin it."""
    found: dict[str, list[str]] = {}
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for block in re.findall(r"repo: " + re.escape(ADDRESS) + r"\n\s+rev: (\S+)", text):
            found.setdefault(block, []).append(doc.name)
        for match in PINS.finditer(text):
            if match.group(2):
                found.setdefault(match.group(2), []).append(doc.name)
    return found


def _require_tags() -> None:
    """Skip where the clone holds no tags at all (one fetched without them): a pin to a
    tag cannot be checked there. A clone with tags but not the pinned one fails."""
    if not _git("tag", "--list").strip():
        pytest.skip("this clone has no tags (fetched without them): the pinned tag cannot be checked")


def test_the_docs_pin_one_tag():
    pins = _pins()
    assert set(pins) == {"v0.2.0rc1"}, pins
    assert sorted(set(pins["v0.2.0rc1"])) == ["ci.md", "editors.md", "pre-commit.md"]


@pytest.mark.parametrize("ref", sorted(_pins()))
def test_each_pinned_ref_is_an_annotated_tag_with_what_the_docs_use(ref):
    _require_tags()
    assert _git("cat-file", "-t", f"refs/tags/{ref}").strip() == "tag", f"{ref} is not an annotated tag here"
    hooks = _git("show", f"{ref}:.pre-commit-hooks.yaml")
    assert "- id: gradgate\n" in hooks and "- id: gradgate-fix\n" in hooks
    project = tomllib.loads(_git("show", f"{ref}:pyproject.toml"))["project"]
    assert "lsp" in project["optional-dependencies"]
    assert project["urls"]["Repository"] == ADDRESS
    cli = _git("show", f"{ref}:gradgate/cli.py")
    assert '"server": (_server_parser, server)' in cli and '"gitlab"' in cli
    version = re.search(r'__version__ = "([^"]+)"', _git("show", f"{ref}:gradgate/__init__.py"))
    assert version is not None and f"v{version.group(1)}" == ref


@pytest.mark.network
@pytest.mark.slow
def test_pre_commit_hook_from_the_pinned_tag(tmp_path):
    """The docs' .pre-commit-config.yaml, with this repository for its address, on a tree
    with a finding and a nested project whose pyproject.toml ignores it."""
    _require_tags()
    (ref,) = _pins()
    repo = tmp_path / "repo"
    (repo / "nested").mkdir(parents=True)
    buggy = b"import torch\n\n\ndef f(ub_overlap_ag):\n    ub_overlap_ag = ub_overlap_ag and torch.is_grad_enabled()\n    return ub_overlap_ag\n"
    (repo / "mod.py").write_bytes(buggy)
    (repo / "nested" / "mod.py").write_bytes(buggy)
    (repo / "nested" / "pyproject.toml").write_text('[tool.gradgate]\nignore = ["GG001"]\n')
    config = (ROOT / "docs" / "pre-commit.md").read_text().split("```yaml\n", 1)[1].split("```", 1)[0]
    assert f"rev: {ref}" in config
    (repo / ".pre-commit-config.yaml").write_text(config.replace(ADDRESS, str(ROOT)))
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home")}
    env.pop("PYTHONPATH", None)
    for args in (["init", "-q"], ["add", "."]):
        subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)
    done = subprocess.run(
        [sys.executable, "-m", "pre_commit", "run", "--all-files"], cwd=repo, capture_output=True, text=True, env=env
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "mod.py:5:39: GG001 forward communication flag `ub_overlap_ag`" in done.stdout
    assert "nested/mod.py" not in done.stdout


def _code_lines(doc: Path) -> list[str]:
    """The lines of a Markdown file's fenced code blocks."""
    lines, inside = [], False
    for line in doc.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("```"):
            inside = not inside
        elif inside:
            lines.append(line)
    return lines


def _command_lines() -> list[tuple[str, str]]:
    """Every ``gradgate check|fix`` command line in the docs' code blocks (each command
    of a ``&&`` chain; a pipe's or redirection's first part)."""
    found = []
    for doc in DOCS:
        for line in _code_lines(doc):
            for part in line.split("&&"):
                part = part.split(" #", 1)[0].strip().removeprefix("$ ").removeprefix("- run: ").removeprefix("- ")
                if re.match(r"(\S*/)?gradgate (check|fix) ", part) and "PATHS" not in part:  # not usage
                    found.append((doc.name, part.split("|")[0].split(">")[0].strip().strip('"')))
    return found


def test_documented_command_lines_parse():
    """Each documented command's options exist (paths aside): parsed by gradgate's own
    parser, so a renamed or removed option fails here."""
    import shlex

    from gradgate.cli import COMMANDS, UsageError, _parse

    lines = _command_lines()
    assert len(lines) >= 10, lines
    for doc, line in lines:
        words = shlex.split(line)
        words = words[words.index(next(w for w in words if w.endswith("gradgate"))) + 1 :]
        make_parser, _ = COMMANDS[words[0]]
        try:
            _parse(make_parser(), words[1:])
        except UsageError as exc:
            pytest.fail(f"{doc}: `{line}` does not parse: {exc}")


def test_the_sample_command_runs_as_documented():
    done = run_cli("check", "--show-source", "--no-cache", "examples/", cwd=ROOT)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    shown = readme.split("$ gradgate check --show-source examples/\n", 1)[1].split("\n\n$ ", 1)[0]
    assert done.returncode == 1
    assert done.stdout.decode() == shown + "\n"


def test_cited_files_exist():
    """A file of this repository CONTRIBUTING or the docs cite (a path in backticks,
    ``tests/test_docs.py``; any ``NAME.md``, ``DESIGN.md``) exists. (Names without a
    folder are the user's files, ``init.lua``, or a library's, ``layernorm_mlp.py``.)"""
    missing = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        paths = set(re.findall(r"`([\w.-]+(?:/[\w.-]+)+\.(?:md|py|lua|toml|yaml|json|csv))`", text))
        pages = set(re.findall(r"(?<![\w/.-])([A-Z][\w-]*\.md)\b", text))
        for cited in sorted(paths | pages):
            if "NNN" in cited or cited.startswith(("transformer_engine/", "deepspeed/", "megatron/", "ovl/")):
                continue  # a placeholder, a library's file or an example's
            if not (ROOT / cited).exists() and not (doc.parent / cited).exists():
                missing.append(f"{doc.name}: {cited}")
    assert missing == []


def _ruff() -> str:
    found = shutil.which("ruff", path=os.path.dirname(sys.executable)) or shutil.which("ruff")
    if found is None:
        pytest.skip("ruff (the dev extra) is not installed")
    return found


@pytest.mark.parametrize("external", [False, True])
def test_ruff_keeps_gradgate_codes_with_lint_external(tmp_path, external):
    """The docs' ``lint.external = ["GG"]``: ``ruff check --fix`` with RUF100, where the
    comment's ``E501`` silences nothing, deletes ``# noqa: E501, GG001`` whole; with
    ``external`` it keeps ``# noqa: GG001``."""
    (tmp_path / "mod.py").write_text("x = 1  # noqa: E501, GG001\n")
    table = '[tool.ruff.lint]\nselect = ["RUF100"]\n' + ('external = ["GG"]\n' if external else "")
    (tmp_path / "pyproject.toml").write_text(table)
    subprocess.run([_ruff(), "check", "--fix", "--no-cache", "mod.py"], cwd=tmp_path, capture_output=True)
    after = (tmp_path / "mod.py").read_text()
    assert after == ("x = 1  # noqa: GG001\n" if external else "x = 1\n")
    docs = (ROOT / "docs" / "pre-commit.md").read_text()
    assert '[tool.ruff.lint]\nexternal = ["GG"]\n' in docs


@pytest.mark.skipif(shutil.which("nvim") is None, reason="nvim (Debian: neovim) is not installed")
def test_neovim_07_snippet_attaches_and_shows_diagnostics(tmp_path):
    """docs/editors.md's Neovim 0.7 snippet as written (the server command made this
    checkout's), in the nvim on this machine: a Python buffer gets the finding."""
    text = (ROOT / "docs" / "editors.md").read_text()
    snippet = text.split("Neovim 0.7 (", 1)[1].split("```lua\n", 1)[1].split("```", 1)[0]
    server = f'"{sys.executable}", "-m", "gradgate", "server"'
    snippet = snippet.replace('vim.fn.expand("~/.venvs/gradgate/bin/gradgate"), "server"', server)
    assert server in snippet
    out = tmp_path / "out.json"
    wait = f"""
vim.cmd("edit mod.py")
vim.wait(60000, function() return #vim.diagnostic.get(0) > 0 end, 20)
local found = {{}}
for _, d in ipairs(vim.diagnostic.get(0)) do table.insert(found, {{ d.lnum + 1, d.col + 1, d.code or d.user_data and d.user_data.lsp and d.user_data.lsp.code }}) end
local handle = io.open("{out}", "w"); handle:write(vim.fn.json_encode(found)); handle:close()
vim.cmd("qa!")
"""
    (tmp_path / "init.lua").write_text(snippet + wait)
    (tmp_path / "mod.py").write_bytes(
        b"import torch\n\n\ndef f(ub_overlap_ag):\n    ub_overlap_ag = ub_overlap_ag and torch.is_grad_enabled()\n    return ub_overlap_ag\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    subprocess.run(
        ["nvim", "--headless", "-u", "NONE", "-i", "NONE", "-c", "filetype on", "-c", "luafile init.lua"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        timeout=120,
    )
    found = json.loads(out.read_text())
    assert [f[:2] for f in found] == [[5, 39]]
