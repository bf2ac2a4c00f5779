"""Every way of silencing a rule holds for every way of fixing (issue 28.1): ``select``,
``ignore``, ``per-file-ignores``, ``# noqa``, ``# gradgate: ignore-file``, a baseline and
``exclude``, each against ``gradgate fix``, ``gradgate fix --diff``, the LibCST codemod
(``python -m libcst.tool codemod``), and the language server's "Fix all" code action and
``gradgate.applyFixes`` command, one test per pair, with the real tools. ``nothing`` is the
control: the same tree with no silencing, which every path does fix."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, run_cli

MODULE = b"""import torch


def forward(x, ub_overlap_ag):
    ub_overlap_ag = ub_overlap_ag and torch.is_grad_enabled()%s
    return run(x, ub_overlap_ag=ub_overlap_ag)
"""
FIXED = b"""import torch


def forward(x, ub_overlap_ag):
    return run(x, ub_overlap_ag=ub_overlap_ag)
"""
ENV = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
ENV.pop("NO_COLOR", None)


def _tree(tmp_path: Path, silencer: str) -> dict:
    """``pkg/mod.py`` with one fixable GG001 finding, silenced by ``silencer``; what each
    fix path is given besides the file (the baseline's option)."""
    table = {
        "select": 'select = ["GG002"]',
        "ignore": 'ignore = ["GG001"]',
        "per-file-ignores": 'per-file-ignores = { "pkg/*" = ["GG001"] }',
        "exclude": 'exclude = ["pkg/*"]',
    }.get(silencer, "")
    (tmp_path / "pyproject.toml").write_text(f"[project]\nname = 't'\n\n[tool.gradgate]\n{table}\n")
    (tmp_path / "pkg").mkdir()
    comment = {"noqa": b"  # noqa: GG001"}.get(silencer, b"")
    data = MODULE % comment
    if silencer == "ignore-file":
        data = b"# gradgate: ignore-file\n" + data
    (tmp_path / "pkg" / "mod.py").write_bytes(data)
    options: dict = {"cli": [], "codemod": [], "lsp": {}}
    if silencer == "baseline":
        wrote = run_cli("check", "--write-baseline", "base.json", "pkg", cwd=tmp_path)
        assert wrote.returncode == 0, wrote.stderr
        assert b"Wrote 1 finding" in wrote.stderr
        options = {
            "cli": ["--baseline", "base.json"],
            "codemod": ["--baseline", "base.json"],
            "lsp": {"baseline": "base.json"},
        }
    return {"data": data, **options}


def _fix(tmp_path: Path, tree: dict) -> tuple[bytes, bytes]:
    done = run_cli("fix", *tree["cli"], "pkg/mod.py", cwd=tmp_path)
    return (tmp_path / "pkg" / "mod.py").read_bytes(), done


def _codemod(tmp_path: Path, tree: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "libcst.tool",
            "codemod",
            "-x",
            "gradgate.codemod.fix.FixGradModeGates",
            "--no-format",
            *tree["codemod"],
            "pkg/mod.py",
        ],
        cwd=tmp_path,
        capture_output=True,
        env=ENV,
    )


async def _lsp(tmp_path: Path, tree: dict, command: bool) -> tuple[list, list, object]:
    """The fix-all code actions offered for ``pkg/mod.py`` (or, with ``command``, the
    ``gradgate.applyFixes`` answer) and the ``workspace/applyEdit`` requests received."""
    from lsprotocol import types
    from pygls.lsp.client import LanguageClient

    client = LanguageClient("silencing", "1")
    applied: list = []
    published = asyncio.Event()

    @client.feature(types.WORKSPACE_APPLY_EDIT)
    def apply_edit(params: types.ApplyWorkspaceEditParams) -> types.ApplyWorkspaceEditResult:
        applied.append(params)
        return types.ApplyWorkspaceEditResult(applied=True)

    @client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def diagnostics(params: types.PublishDiagnosticsParams) -> None:
        published.set()

    await client.start_io(sys.executable, "-m", "gradgate", "server", cwd=str(tmp_path), env=ENV)
    try:
        await client.initialize_async(
            types.InitializeParams(
                capabilities=types.ClientCapabilities(workspace=types.WorkspaceClientCapabilities(apply_edit=True)),
                root_uri=tmp_path.as_uri(),
                initialization_options=tree["lsp"],
            )
        )
        client.initialized(types.InitializedParams())
        path = tmp_path / "pkg" / "mod.py"
        uri = path.as_uri()
        client.text_document_did_open(
            types.DidOpenTextDocumentParams(
                types.TextDocumentItem(uri=uri, language_id="python", version=1, text=path.read_text())
            )
        )
        await asyncio.wait_for(published.wait(), 60)
        if command:
            answer = await client.workspace_execute_command_async(
                types.ExecuteCommandParams(command="gradgate.applyFixes", arguments=[uri])
            )
            actions: list = []
        else:
            answer = None
            found = await client.text_document_code_action_async(
                types.CodeActionParams(
                    text_document=types.TextDocumentIdentifier(uri=uri),
                    range=types.Range(start=types.Position(0, 0), end=types.Position(6, 0)),
                    context=types.CodeActionContext(diagnostics=[], only=["source.fixAll.gradgate"]),
                )
            )
            actions = [a for a in found or [] if a.kind == "source.fixAll.gradgate"]
        await client.shutdown_async(None)
        client.exit(None)
    finally:
        await client.stop()
    return actions, applied, answer


SILENCERS = ["nothing", "select", "ignore", "per-file-ignores", "noqa", "ignore-file", "baseline", "exclude"]


@pytest.mark.parametrize("silencer", SILENCERS)
def test_fix(tmp_path, silencer):
    tree = _tree(tmp_path, silencer)
    after, done = _fix(tmp_path, tree)
    if silencer == "nothing":
        assert after == FIXED
        assert done.returncode == 0
        assert done.stderr.decode().endswith("Fixed 1 finding in 1 file; 0 left.\n")
        return
    assert after == tree["data"]
    assert done.returncode == 0, done.stderr
    assert done.stdout == b""
    assert done.stderr.decode().endswith("Fixed 0 findings in 0 files; 0 left.\n")


@pytest.mark.parametrize("silencer", SILENCERS)
def test_fix_diff(tmp_path, silencer):
    tree = _tree(tmp_path, silencer)
    done = run_cli("fix", "--diff", *tree["cli"], "pkg/mod.py", cwd=tmp_path)
    assert (tmp_path / "pkg" / "mod.py").read_bytes() == tree["data"]
    if silencer == "nothing":
        assert done.returncode == 1
        assert b"-    ub_overlap_ag = ub_overlap_ag and torch.is_grad_enabled()\n" in done.stdout
        return
    assert (done.returncode, done.stdout) == (0, b""), done.stderr
    assert done.stderr.decode().endswith("Would fix 0 findings in 0 files; 0 left.\n")


@pytest.mark.parametrize("silencer", SILENCERS)
def test_codemod(tmp_path, silencer):
    pytest.importorskip("libcst.tool")
    tree = _tree(tmp_path, silencer)
    done = _codemod(tmp_path, tree)
    assert done.returncode == 0, done.stderr
    after = (tmp_path / "pkg" / "mod.py").read_bytes()
    if silencer == "nothing":
        assert after == FIXED
        assert b" - Skipped 0 files.\n" in done.stderr
        return
    assert after == tree["data"]
    assert b" - Skipped 1 files.\n" in done.stderr, done.stderr


@pytest.mark.parametrize("silencer", SILENCERS)
def test_lsp_fix_all(tmp_path, silencer):
    pytest.importorskip("pygls")
    tree = _tree(tmp_path, silencer)
    actions, applied, _ = asyncio.run(_lsp(tmp_path, tree, command=False))
    assert applied == []
    if silencer == "nothing":
        (action,) = actions
        ((_uri, edits),) = action.edit.changes.items()
        assert [(e.range.start.line, e.range.end.line, e.new_text) for e in edits] == [(4, 5, "")]
        return
    assert actions == []


@pytest.mark.parametrize("silencer", SILENCERS)
def test_lsp_apply_fixes(tmp_path, silencer):
    pytest.importorskip("pygls")
    tree = _tree(tmp_path, silencer)
    _, applied, answer = asyncio.run(_lsp(tmp_path, tree, command=True))
    if silencer == "nothing":
        assert answer is True
        (request,) = applied
        ((_uri, edits),) = request.edit.changes.items()
        assert [(e.range.start.line, e.range.end.line, e.new_text) for e in edits] == [(4, 5, "")]
        return
    assert (answer, applied) == (False, [])
