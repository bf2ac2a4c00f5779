"""``gradgate server`` driven by a real LSP client (pytest-lsp) on TransformerEngine
2.20.2's ``layernorm_mlp.py``: open, change, diagnostics, code action, apply-edit, hover,
close."""

from __future__ import annotations

import os
import sys

import pytest

pytest.importorskip("pygls")
pytest_lsp = pytest.importorskip("pytest_lsp")

from conftest import ROOT  # noqa: E402
from lsprotocol import types  # noqa: E402
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities  # noqa: E402

MLP = "transformer_engine/pytorch/module/layernorm_mlp.py"
SERVER_ENV = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}


@pytest_lsp.fixture(
    config=ClientServerConfig(server_command=[sys.executable, "-m", "gradgate", "server"], server_env=SERVER_ENV)
)
async def client(lsp_client: LanguageClient):
    edits: list[types.ApplyWorkspaceEditParams] = []

    @lsp_client.feature(types.WORKSPACE_APPLY_EDIT)
    def apply_edit(params: types.ApplyWorkspaceEditParams) -> types.ApplyWorkspaceEditResult:
        edits.append(params)
        return types.ApplyWorkspaceEditResult(applied=True)

    lsp_client.applied_edits = edits  # type: ignore[attr-defined]
    await lsp_client.initialize_session(
        types.InitializeParams(
            capabilities=client_capabilities("visual-studio-code"),
            initialization_options={"debounce": 20},
        )
    )
    yield
    await lsp_client.shutdown_session()


def _apply(text: str, edits: list[types.TextEdit]) -> str:
    """Apply LSP text edits (UTF-16 columns; TE's sources are ASCII where they apply)."""
    lines = text.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))

    def offset(p: types.Position) -> int:
        return offsets[p.line] + p.character if p.line < len(lines) else len(text)

    for edit in sorted(edits, key=lambda e: offset(e.range.start), reverse=True):
        text = text[: offset(edit.range.start)] + edit.new_text + text[offset(edit.range.end) :]
    return text


async def _diagnostics(client: LanguageClient, uri: str) -> list[tuple[int, int, str]]:
    await client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    return [(d.range.start.line + 1, d.range.start.character + 1, d.code) for d in client.diagnostics[uri]]


def _change(client: LanguageClient, uri: str, version: int, text: str) -> None:
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
        )
    )


@pytest.mark.asyncio
async def test_open_change_code_action_apply_edit_close_on_te(client: LanguageClient, te_copy):
    path = te_copy / MLP
    uri = path.as_uri()
    text = path.read_text(encoding="utf-8")
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)
        )
    )
    assert await _diagnostics(client, uri) == [(388, 43, "GG001"), (389, 43, "GG001")]
    first = client.diagnostics[uri][0]
    assert first.source == "gradgate" and "`ub_overlap_ag`" in first.message

    # an incremental change (a line inserted at the top) moves both findings down
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
            content_changes=[
                types.TextDocumentContentChangePartial(
                    range=types.Range(start=types.Position(0, 0), end=types.Position(0, 0)), text="# edited\n"
                )
            ],
        )
    )
    text = "# edited\n" + text
    assert await _diagnostics(client, uri) == [(389, 43, "GG001"), (390, 43, "GG001")]

    # hover over the finding: the rule's documentation
    hover = await client.text_document_hover_async(
        types.HoverParams(text_document=types.TextDocumentIdentifier(uri), position=types.Position(388, 45))
    )
    assert hover is not None and "## What it does" in hover.contents.value and "GG001" in hover.contents.value

    # the quick fix of the first finding, applied by the client
    first = client.diagnostics[uri][0]
    actions = await client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri),
            range=first.range,
            context=types.CodeActionContext(diagnostics=[first]),
        )
    )
    titles = [a.title for a in actions]
    assert titles == [
        "Fix GG001: remove the grad-mode operand",
        "Suppress GG001 on this line",
        "Fix all gradgate findings (safe fixes)",
    ]
    quick = actions[0]
    assert quick.kind == types.CodeActionKind.QuickFix and quick.is_preferred
    (change,) = quick.edit.document_changes  # versioned: a client drops it once the text moved on
    assert (change.text_document.uri, change.text_document.version) == (uri, 2)
    fixed_once = _apply(text, change.edits)
    assert fixed_once.splitlines()[388] == text.splitlines()[388].replace(" and is_grad_enabled", "")
    _change(client, uri, 3, fixed_once)
    assert await _diagnostics(client, uri) == [(390, 43, "GG001")]

    # the command sends the remaining fix with workspace/applyEdit; the client applies it
    assert (
        await client.workspace_execute_command_async(
            types.ExecuteCommandParams(command="gradgate.applyFixes", arguments=[uri])
        )
        is True
    )
    (sent,) = client.applied_edits
    fixed = _apply(fixed_once, sent.edit.changes[uri])
    _change(client, uri, 4, fixed)
    assert await _diagnostics(client, uri) == []
    # the buffer now holds exactly what `gradgate fix` writes (the header line aside)
    from gradgate.config import Config
    from gradgate.engine import lint_source

    expected = lint_source(str(path), path.read_bytes(), Config(), fix=True).fixed
    assert fixed == "# edited\n" + expected.decode()

    client.text_document_did_close(types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri)))
    await client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    assert list(client.diagnostics[uri]) == []


@pytest.mark.asyncio
async def test_per_document_config_and_suppression(client: LanguageClient, tmp_path):
    buggy = "def f(ub_overlap_ag, is_grad_enabled, x):\n    ub_overlap_ag = ub_overlap_ag and is_grad_enabled and x\n"
    (tmp_path / "strict").mkdir()
    (tmp_path / "lax").mkdir()
    (tmp_path / "lax" / "gradgate.toml").write_text('ignore = ["gg001"]\n')
    for folder, expected in (("strict", [(2, 39, "GG001")]), ("lax", [])):
        uri = (tmp_path / folder / "m.py").as_uri()
        client.text_document_did_open(
            types.DidOpenTextDocumentParams(
                text_document=types.TextDocumentItem(uri=uri, language_id="python", version=1, text=buggy)
            )
        )
        assert await _diagnostics(client, uri) == expected, folder
    uri = (tmp_path / "strict" / "m.py").as_uri()
    _change(client, uri, 2, buggy.replace(" and x\n", " and x  # noqa: GG001\n"))
    assert await _diagnostics(client, uri) == []
