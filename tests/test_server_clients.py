"""The language server with real clients' behaviour (issue 28.4): a syntax error's
diagnostic at its place with a code; no ``workspace/applyEdit`` to a client that did not
declare it; diagnostics within 60 ms of a change with the default settings. (Fix all as
minimal edits: tests/test_silencing.py's control cases.)"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import time

import pytest

pytest.importorskip("pygls")

from conftest import ROOT
from lsprotocol import types
from pygls.lsp.client import LanguageClient

ENV = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
FLAGGED = """import torch


def forward(x, ub_overlap_ag):
    ub_overlap_ag = ub_overlap_ag and torch.is_grad_enabled()
    return run(x, ub_overlap_ag=ub_overlap_ag)
"""


class Session:
    """A pygls client on ``gradgate server``: what it published and was sent."""

    def __init__(self) -> None:
        self.client = LanguageClient("gradgate-tests", "1")
        self.published: dict[int | None, tuple[float, list[types.Diagnostic]]] = {}
        self.arrived = asyncio.Event()
        self.applied: list = []
        self.messages: list[str] = []

        @self.client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        def published(params: types.PublishDiagnosticsParams) -> None:
            self.published[params.version] = (time.perf_counter(), params.diagnostics)
            self.arrived.set()

        @self.client.feature(types.WORKSPACE_APPLY_EDIT)
        def apply_edit(params: types.ApplyWorkspaceEditParams) -> types.ApplyWorkspaceEditResult:
            self.applied.append(params)
            return types.ApplyWorkspaceEditResult(applied=True)

        @self.client.feature(types.WINDOW_SHOW_MESSAGE)
        def message(params: types.ShowMessageParams) -> None:
            self.messages.append(params.message)

    async def start(self, tmp_path, capabilities: types.ClientCapabilities, options: dict | None = None) -> None:
        await self.client.start_io(sys.executable, "-m", "gradgate", "server", cwd=str(tmp_path), env=ENV)
        await self.client.initialize_async(
            types.InitializeParams(
                capabilities=capabilities, root_uri=tmp_path.as_uri(), initialization_options=options
            )
        )
        self.client.initialized(types.InitializedParams())

    async def open(self, uri: str, text: str) -> list[types.Diagnostic]:
        self.arrived.clear()
        self.client.text_document_did_open(
            types.DidOpenTextDocumentParams(types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text))
        )
        await asyncio.wait_for(self.arrived.wait(), 60)
        return self.published[1][1]

    async def stop(self) -> None:
        await self.client.shutdown_async(None)
        self.client.exit(None)
        await self.client.stop()


def test_syntax_error_diagnostic_at_its_place_with_a_code(tmp_path):
    async def scenario():
        session = Session()
        await session.start(tmp_path, types.ClientCapabilities())
        try:
            uri = (tmp_path / "broken.py").as_uri()
            return await session.open(uri, "x = 1\ndef f(:\n    pass\n")
        finally:
            await session.stop()

    (diagnostic,) = asyncio.run(scenario())
    assert diagnostic.code == "invalid-syntax"
    assert (diagnostic.range.start.line, diagnostic.range.start.character) == (1, 6)
    assert (diagnostic.range.end.line, diagnostic.range.end.character) == (1, 7)
    assert diagnostic.message == "gradgate could not check this file: syntax error at 2:7: invalid syntax"
    assert diagnostic.severity == types.DiagnosticSeverity.Error


@pytest.mark.parametrize("declared", [False, True])
def test_apply_fixes_sends_apply_edit_only_to_clients_that_declared_it(tmp_path, declared):
    capabilities = types.ClientCapabilities(
        workspace=types.WorkspaceClientCapabilities(apply_edit=True) if declared else None
    )

    async def scenario():
        session = Session()
        await session.start(tmp_path, capabilities)
        try:
            uri = (tmp_path / "mod.py").as_uri()
            await session.open(uri, FLAGGED)
            answer = await session.client.workspace_execute_command_async(
                types.ExecuteCommandParams(command="gradgate.applyFixes", arguments=[uri])
            )
            await asyncio.sleep(0.1)  # a message the server sent arrives
            return answer, session
        finally:
            await session.stop()

    answer, session = asyncio.run(scenario())
    if declared:
        assert answer is True
        (request,) = session.applied
        edits = next(iter(request.edit.changes.values()))
        assert [(e.range.start.line, e.range.end.line, e.new_text) for e in edits] == [(4, 5, "")]
        assert session.messages == []
    else:
        assert (answer, session.applied) == (False, [])
        assert session.messages == [
            "gradgate: this editor cannot apply edits the server sends (workspace.applyEdit); "
            "use the code action 'Fix all gradgate findings'"
        ]


def test_default_settings_publish_within_60_ms_of_a_change(tmp_path):
    """No debounce by default: the median time from a ``didChange`` to its diagnostics on
    a small module is under 60 ms (it was 150 ms of pause plus the check)."""
    text = FLAGGED * 1 + "".join(f"\n\ndef helper_{i}(x):\n    return x + {i}\n" for i in range(40))

    async def scenario():
        session = Session()
        await session.start(tmp_path, types.ClientCapabilities())
        try:
            uri = (tmp_path / "mod.py").as_uri()
            await session.open(uri, text)
            latencies = []
            for version in range(2, 14):
                session.arrived.clear()
                sent = time.perf_counter()
                session.client.text_document_did_change(
                    types.DidChangeTextDocumentParams(
                        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
                        content_changes=[types.TextDocumentContentChangeWholeDocument(text=f"# {version}\n" + text)],
                    )
                )
                while version not in session.published:
                    await asyncio.wait_for(session.arrived.wait(), 60)
                    session.arrived.clear()
                arrived, diagnostics = session.published[version]
                assert [d.range.start.line for d in diagnostics] == [5]
                latencies.append(arrived - sent)
            return latencies
        finally:
            await session.stop()

    latencies = asyncio.run(scenario())
    assert statistics.median(latencies) < 0.060, latencies
