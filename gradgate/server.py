"""``gradgate server``: a language server over stdio (pygls; the ``lsp`` extra).

- **Diagnostics** as the user types: each change of a document is checked after a short
  pause (``debounce``, 0 ms by default: at once, one check of a document at a time, the
  changes that come meanwhile checked together after it;
  ``initializationOptions: {"debounce": MS}``) from the
  in-memory text, with the settings of the file the document stands for (nearest
  ``gradgate.toml`` / ``pyproject.toml``, its ``exclude`` and ``per-file-ignores``);
  results are kept by content, so undoing an edit costs nothing. A result that arrives
  after a newer edit is dropped.
- **Code actions**: one quick fix per finding with a fix (safe ones preferred, unsafe
  ones titled "(unsafe)"; its text edit, which needs LibCST, is computed when code
  actions are asked for, never on the diagnostics' path), a "suppress on this line"
  action, and "Fix all gradgate findings" (``source.fixAll.gradgate``, safe fixes only,
  as one text edit per changed run of lines; the ``gradgate.applyFixes`` command sends
  the same edit with ``workspace/applyEdit``, to clients that declared it).
- **Baseline**: ``initializationOptions: {"baseline": FILE}`` (relative to the
  workspace's root) hides the findings a ``gradgate check --write-baseline`` recorded,
  and no fix touches them.
- **Hover** over a finding: the rule's documentation.

Positions are converted between gradgate's 1-based character columns and the client's
encoding (UTF-16 by default) by pygls' position codec.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol
from pygls.uris import to_fs_path
from pygls.workspace import TextDocument

from . import __version__
from .config import ConfigError
from .digest import digest
from .model.splice import Reparser
from .results import Applicability, FileResult, Finding

log = logging.getLogger("gradgate.server")

SOURCE = "gradgate"
FIX_ALL_KIND = "source.fixAll.gradgate"
APPLY_FIXES_COMMAND = "gradgate.applyFixes"
#: how many results are kept by content
CACHE_SIZE = 64


class _Answered:
    """A request already answered with an error: pygls' dispatch skips it (not JSON-RPC 2.0)."""

    jsonrpc = ""


class _Protocol(LanguageServerProtocol):
    """pygls' protocol, answering a request whose params do not fit its method with a
    JSON-RPC error (pygls only logged it, and the client waited for an answer)."""

    def structure_message(self, data: dict[str, Any]) -> Any:
        try:
            return super().structure_message(data)
        except JsonRpcException as exc:
            if not ("id" in data and "method" in data):
                raise
            self._send_response(data["id"], error=exc.to_response_error())
            return _Answered()


class GradgateServer(LanguageServer):
    """The language server: documents' results, pending checks and settings."""

    def __init__(self) -> None:
        super().__init__(
            "gradgate",
            __version__,
            text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
            protocol_cls=_Protocol,
        )
        self.debounce = 0.0
        #: documents a check is running for, and those changed meanwhile (checked again after it)
        self.running: set[str] = set()
        self.again: set[str] = set()
        #: the baseline's findings (``initializationOptions.baseline``): not shown, not fixed
        self.known: Callable[[Finding], bool] | None = None
        self.results: dict[str, tuple[int | None, FileResult]] = {}
        self.pending: dict[str, asyncio.TimerHandle] = {}
        self.cache: OrderedDict[tuple, FileResult] = OrderedDict()
        self.resolver = self._new_resolver()
        #: each open document's last tree, the next check's is spliced from
        self.trees: dict[str, Reparser] = {}
        #: checks run one at a time (the interpreter's lock would run one anyway): a
        #: document's tree is then never spliced while an older check still reads it
        self.checking = threading.Lock()

    @staticmethod
    def _new_resolver():
        from .settings import Resolver

        return Resolver()

    # -- checking -------------------------------------------------------------------
    def path_of(self, document: TextDocument) -> str:
        path = document.path or to_fs_path(document.uri)
        if path:
            return path
        root = self.workspace.root_path or os.getcwd()
        return os.path.join(root, "untitled.py")

    def check(self, document: TextDocument, fix: bool = False) -> FileResult:
        """``document``'s text checked (or fixed) as its file; results cached by content.

        A check gives no finding its text edit: the diagnostics need none, and the edits
        need LibCST; :meth:`edited` adds them when code actions ask for them."""
        from .document import excluded, lint_document

        path = self.path_of(document)
        data = document.source.encode("utf-8")
        settings = self.resolver.for_path(path)
        key = (path, digest(data), settings.config.fingerprint(), fix)
        hit = self._cached(key)
        if hit is not None:
            return hit
        if excluded(path, settings):
            result = FileResult(path, source=data, stage="excluded")
        elif fix:  # the fix's passes splice the trees they make, the buffer's too
            result = lint_document(path, data, settings, fix=True, known=self.known)
        else:
            with self.checking:
                parse = self.trees.setdefault(document.uri, Reparser())
                result = lint_document(path, data, settings, parse=parse)
        if self.known is not None and result.findings:
            from .records import replace

            result = replace(result, findings=tuple(f for f in result.findings if not self.known(f)))
        self._remember(key, result)
        return result

    def _cached(self, key: tuple) -> FileResult | None:
        hit = self.cache.get(key)
        if hit is not None:
            self.cache.move_to_end(key)
        return hit

    def _remember(self, key: tuple, result: FileResult) -> None:
        self.cache[key] = result
        if len(self.cache) > CACHE_SIZE:
            self.cache.popitem(last=False)

    def edited(self, result: FileResult) -> FileResult:
        """``result`` with each fixable finding's text edit (cached by content)."""
        if result.source is None or not any(f.applicability is not None and f.edit is None for f in result.findings):
            return result
        from .document import file_config, with_edits

        config = file_config(result.path, self.resolver.for_path(result.path))
        key = (result.path, digest(result.source), config.fingerprint(), "edits")
        hit = self._cached(key)
        if hit is None:
            hit = with_edits(result, config)
            self._remember(key, hit)
        return hit

    def schedule(self, uri: str, delay: float) -> None:
        """Check ``uri`` after ``delay`` seconds, replacing a check already waiting."""
        waiting = self.pending.pop(uri, None)
        if waiting is not None:
            waiting.cancel()
        loop = asyncio.get_running_loop()
        self.pending[uri] = loop.call_later(delay, lambda: asyncio.ensure_future(self.publish(uri)))

    async def publish(self, uri: str) -> None:
        self.pending.pop(uri, None)
        if uri in self.running:  # checked once more when the running check ends
            self.again.add(uri)
            return
        try:
            document = self.workspace.get_text_document(uri)
        except KeyError:
            return
        version = document.version
        self.running.add(uri)
        try:
            result = await asyncio.get_running_loop().run_in_executor(None, self.check, document)
        except ConfigError as exc:
            self.window_show_message(types.ShowMessageParams(types.MessageType.Error, f"gradgate: {exc}"))
            result = FileResult(self.path_of(document), error=str(exc))
        except Exception as exc:  # a request handler's guard: log it, keep serving, drop stale diagnostics
            log.exception("gradgate failed on %s", uri)
            result = FileResult(self.path_of(document), error=f"internal error ({type(exc).__name__}); see the log")
        finally:
            self.running.discard(uri)
            if uri in self.again:
                self.again.discard(uri)
                self.schedule(uri, 0)
        if uri not in self.workspace.text_documents or self.workspace.get_text_document(uri).version != version:
            return  # edited (or closed) meanwhile: a newer check is due
        self.results[uri] = (version, result)
        self.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=uri, version=version, diagnostics=diagnostics(document, result))
        )

    def clear(self, uri: str) -> None:
        waiting = self.pending.pop(uri, None)
        if waiting is not None:
            waiting.cancel()
        self.results.pop(uri, None)
        self.trees.pop(uri, None)
        self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))

    def findings(self, uri: str, edits: bool = False) -> Sequence[Finding]:
        """The findings last published for ``uri``; with ``edits``, each fixable one
        carries its text edit (computed now, once per content)."""
        entry = self.results.get(uri)
        if entry is None:
            return ()
        if edits:
            version, result = entry
            entry = (version, self.edited(result))
            self.results[uri] = entry
        return entry[1].findings


# -- conversions ------------------------------------------------------------------------
def _position(document: TextDocument, line: int, column: int, lines: Sequence[str] | None = None) -> types.Position:
    """gradgate's 1-based line and character column as an LSP position (``lines``:
    ``document.lines``, which pygls splits anew on every access)."""
    return document.position_codec.position_to_client_units(
        document.lines if lines is None else lines,
        types.Position(line=max(0, line - 1), character=max(0, column - 1)),
    )


def _range(
    document: TextDocument,
    line: int,
    column: int,
    end_line: int,
    end_column: int,
    lines: Sequence[str] | None = None,
) -> types.Range:
    if lines is None:
        lines = document.lines
    return types.Range(
        start=_position(document, line, column, lines), end=_position(document, end_line, end_column, lines)
    )


def finding_range(document: TextDocument, finding: Finding, lines: Sequence[str] | None = None) -> types.Range:
    return _range(document, finding.line, finding.column, finding.end_line, finding.end_column, lines)


def _docs_url(code: str) -> str:
    return f"https://github.com/gradgate/gradgate/blob/main/docs/rules/{code}.md"


#: where the engine's reason for a file it could not parse puts the error
_SYNTAX_ERROR = re.compile(r"^syntax error at (\d+):(\d+)")


def _error_diagnostic(document: TextDocument, error: str) -> types.Diagnostic:
    """A file that could not be checked: a syntax error at its place (code
    ``invalid-syntax``, as ruff's), any other reason at the top (``not-checked``)."""
    at = _SYNTAX_ERROR.match(error)
    if at is None:
        where = types.Range(start=types.Position(0, 0), end=types.Position(0, 0))
        code = "not-checked"
    else:
        lines = document.lines
        line = min(int(at.group(1)), max(len(lines), 1))
        text = lines[line - 1].rstrip("\r\n") if line <= len(lines) else ""
        column = min(max(int(at.group(2)), 1), len(text) + 1)
        end = min(column + 1, len(text) + 1)
        where = _range(document, line, column, line, end, lines)
        code = "invalid-syntax"
    return types.Diagnostic(
        range=where,
        message=f"gradgate could not check this file: {error}",
        severity=types.DiagnosticSeverity.Error,
        code=code,
        source=SOURCE,
    )


def diagnostics(document: TextDocument, result: FileResult) -> list[types.Diagnostic]:
    if result.error is not None:
        return [_error_diagnostic(document, result.error)]
    out: list[types.Diagnostic] = [
        types.Diagnostic(
            range=types.Range(start=types.Position(max(0, n.line - 1), 0), end=types.Position(max(0, n.line - 1), 0)),
            message=f"gradgate gave up here: {n.message}",
            severity=types.DiagnosticSeverity.Information,
            source=SOURCE,
        )
        for n in result.notices
    ]
    if not result.findings:
        return out
    lines = document.lines
    here = os.path.abspath(result.path)
    for finding in result.findings:
        related = [
            types.DiagnosticRelatedInformation(
                location=types.Location(
                    uri=document.uri, range=_range(document, s.line, s.column, s.line, s.column, lines)
                ),
                message=s.message,
            )
            for s in finding.flow
            if os.path.abspath(s.path) == here
        ]
        out.append(
            types.Diagnostic(
                range=finding_range(document, finding, lines),
                message=finding.message,
                severity=types.DiagnosticSeverity.Warning,
                code=finding.rule,
                code_description=types.CodeDescription(href=_docs_url(finding.rule)),
                source=SOURCE,
                related_information=related or None,
                data={"applicability": None if finding.applicability is None else finding.applicability.value},
            )
        )
    return out


def _overlaps(a: types.Range, b: types.Range) -> bool:
    def key(p: types.Position) -> tuple[int, int]:
        return (p.line, p.character)

    return not (key(a.end) < key(b.start) or key(b.end) < key(a.start))


def minimal_edits(document: TextDocument, new: str) -> list[types.TextEdit]:
    """The text edits that turn ``document`` into ``new``: one per run of changed lines
    (an editor then keeps its cursor, marks and folds everywhere else)."""
    import difflib

    old_lines = document.lines
    new_lines = new.splitlines(keepends=True)

    def start_of(line: int) -> types.Position:
        if line < len(old_lines):
            return types.Position(line=line, character=0)
        if old_lines and not old_lines[-1].endswith(("\n", "\r")):  # past the last line, which has no end
            last = old_lines[-1]
            return _position(document, len(old_lines), len(last) + 1, old_lines)
        return types.Position(line=len(old_lines), character=0)

    edits = []
    matcher = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag != "equal":
            edits.append(
                types.TextEdit(
                    range=types.Range(start=start_of(i1), end=start_of(i2)), new_text="".join(new_lines[j1:j2])
                )
            )
    return edits


def fix_all_edit(server: GradgateServer, document: TextDocument) -> types.WorkspaceEdit | None:
    """The edit that applies every safe fix of ``document`` (None: nothing to fix)."""
    result = server.check(document, fix=True)
    if not result.changed or result.fixed is None:
        return None
    return types.WorkspaceEdit(changes={document.uri: minimal_edits(document, result.fixed.decode("utf-8"))})


def code_actions(server: GradgateServer, params: types.CodeActionParams) -> list[types.CodeAction]:
    from .noqa import add_suppressions

    document = server.workspace.get_text_document(params.text_document.uri)
    only = params.context.only
    wanted_kinds = None if not only else {str(k) for k in only}

    def wanted(kind: str) -> bool:
        return wanted_kinds is None or any(kind == k or kind.startswith(k + ".") for k in wanted_kinds)

    actions: list[types.CodeAction] = []
    lines = document.lines
    # the findings of the text as it is now (the last published may be of an older
    # version), each edit carrying that version: a client refuses it once the text moved on
    current = server.check(document)
    findings = [f for f in current.findings if _overlaps(finding_range(document, f, lines), params.range)]
    if any(f.applicability is not None for f in findings) and wanted(types.CodeActionKind.QuickFix):
        # the quick fixes' edits: computed only now, never for the diagnostics
        edited = {(f.line, f.column, f.rule): f for f in server.edited(current).findings}
        findings = [edited.get((f.line, f.column, f.rule), f) for f in findings]

    def versioned(edit: types.TextEdit) -> types.WorkspaceEdit:
        identifier = types.OptionalVersionedTextDocumentIdentifier(uri=document.uri, version=document.version)
        return types.WorkspaceEdit(document_changes=[types.TextDocumentEdit(text_document=identifier, edits=[edit])])

    for finding in findings:
        diagnostic = [d for d in params.context.diagnostics if d.code == finding.rule and d.source == SOURCE]
        if (
            finding.edit is not None
            and finding.applicability in (Applicability.SAFE, Applicability.UNSAFE)
            and wanted(types.CodeActionKind.QuickFix)
        ):
            e = finding.edit
            unsafe = finding.applicability is Applicability.UNSAFE
            actions.append(
                types.CodeAction(
                    title=f"Fix {finding.rule}: {finding.fix_title or 'remove the grad-mode operand'}"
                    f"{' (unsafe)' if unsafe else ''}",
                    kind=types.CodeActionKind.QuickFix,
                    diagnostics=diagnostic or None,
                    is_preferred=not unsafe,
                    edit=versioned(
                        types.TextEdit(
                            range=_range(document, e.line, e.column, e.end_line, e.end_column, lines),
                            new_text=e.content,
                        )
                    ),
                )
            )
        if wanted(types.CodeActionKind.QuickFix):
            line = lines[finding.line - 1] if finding.line <= len(lines) else ""
            text, added = add_suppressions(line, [_on_first_line(finding)])
            if added:
                actions.append(
                    types.CodeAction(
                        title=f"Suppress {finding.rule} on this line",
                        kind=types.CodeActionKind.QuickFix,
                        diagnostics=diagnostic or None,
                        edit=versioned(
                            types.TextEdit(
                                range=types.Range(
                                    start=types.Position(finding.line - 1, 0), end=types.Position(finding.line, 0)
                                ),
                                new_text=text if text.endswith(("\n", "\r")) else text + "\n",
                            )
                        ),
                    )
                )
    if wanted(FIX_ALL_KIND) and (wanted_kinds is not None or any(f.fixable for f in current.findings)):
        edit = fix_all_edit(server, document)
        if edit is not None:
            actions.append(
                types.CodeAction(title="Fix all gradgate findings (safe fixes)", kind=FIX_ALL_KIND, edit=edit)
            )
    return actions


def _on_first_line(finding: Finding) -> Finding:
    from .records import replace

    return replace(finding, line=1, end_line=1)


def hover(server: GradgateServer, params: types.HoverParams) -> types.Hover | None:
    from .rule import rule_by_code

    document = server.workspace.get_text_document(params.text_document.uri)
    here = types.Range(start=params.position, end=params.position)
    rules = rule_by_code()
    for finding in server.findings(document.uri):
        where = finding_range(document, finding)
        if _overlaps(where, here) and finding.rule in rules:
            rule = rules[finding.rule]
            text = f"**{rule.CODE}** `{rule.NAME}`\n\n{rule.documentation()}"
            return types.Hover(contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value=text), range=where)
    return None


# -- the server -------------------------------------------------------------------------
def make_server() -> GradgateServer:
    server = GradgateServer()

    @server.feature(types.INITIALIZE)
    def initialize(ls: GradgateServer, params: types.InitializeParams) -> None:
        options = params.initialization_options
        if isinstance(options, dict) and isinstance(options.get("debounce"), (int, float)):
            ls.debounce = max(0.0, options["debounce"] / 1000)
        if isinstance(options, dict) and isinstance(options.get("baseline"), str):
            from .baseline import BaselineError, known_of

            root = (to_fs_path(params.root_uri) if params.root_uri else None) or params.root_path or os.getcwd()
            try:
                ls.known = known_of(os.path.join(root, options["baseline"]), root)
            except BaselineError as exc:
                ls.window_show_message(types.ShowMessageParams(types.MessageType.Error, f"gradgate: {exc}"))

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    async def did_open(ls: GradgateServer, params: types.DidOpenTextDocumentParams) -> None:
        await ls.publish(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: GradgateServer, params: types.DidChangeTextDocumentParams) -> None:
        ls.schedule(params.text_document.uri, ls.debounce)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    async def did_save(ls: GradgateServer, params: types.DidSaveTextDocumentParams) -> None:
        if os.path.basename(params.text_document.uri) in ("pyproject.toml", "gradgate.toml"):
            ls.resolver = ls._new_resolver()
            ls.cache.clear()
            for uri in list(ls.results):
                ls.schedule(uri, 0)
            return
        await ls.publish(params.text_document.uri)

    @server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def watched(ls: GradgateServer, params: types.DidChangeWatchedFilesParams) -> None:
        ls.resolver = ls._new_resolver()
        ls.cache.clear()
        for uri in list(ls.results):
            ls.schedule(uri, 0)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: GradgateServer, params: types.DidCloseTextDocumentParams) -> None:
        ls.clear(params.text_document.uri)

    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix, FIX_ALL_KIND]),
    )
    def code_action(ls: GradgateServer, params: types.CodeActionParams) -> list[types.CodeAction]:
        try:
            return code_actions(ls, params)
        except Exception:  # a request handler's guard: log it, answer nothing
            log.exception("code actions failed for %s", params.text_document.uri)
            return []

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    def on_hover(ls: GradgateServer, params: types.HoverParams) -> types.Hover | None:
        return hover(ls, params)

    @server.command(APPLY_FIXES_COMMAND)
    async def apply_fixes(ls: GradgateServer, uri: str) -> bool:
        """Apply every safe fix of the document ``uri`` through ``workspace/applyEdit``
        (False, and nothing sent, to a client that did not declare it)."""
        workspace = ls.client_capabilities.workspace
        if workspace is None or not workspace.apply_edit:
            ls.window_show_message(
                types.ShowMessageParams(
                    types.MessageType.Warning,
                    "gradgate: this editor cannot apply edits the server sends (workspace.applyEdit); "
                    "use the code action 'Fix all gradgate findings'",
                )
            )
            return False
        document = ls.workspace.get_text_document(uri)
        edit = fix_all_edit(ls, document)
        if edit is None:
            return False
        response = await ls.workspace_apply_edit_async(
            types.ApplyWorkspaceEditParams(edit=edit, label="gradgate: fix all")
        )
        return bool(response.applied)

    return server


def main() -> int:
    """Serve over stdio; the exit status: 0 after ``shutdown`` and ``exit``, 1 when the
    client ended without ``shutdown`` (as the LSP specification says)."""
    server = make_server()
    server.start_io()
    return 0 if server.protocol._shutdown else 1
