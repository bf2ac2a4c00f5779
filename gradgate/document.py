"""Checking one in-memory document (standard input, an editor's buffer) as the file it
stands for: that file's settings, ``exclude``, ``per-file-ignores`` and
``# gradgate: ignore-file`` apply as they would on disk, and, as a file named on the
command line, it is parsed even where it holds no grad-mode token (a syntax error is
an error, never a silent pass)."""

from __future__ import annotations

import ast
from collections.abc import Callable

from .config import Config
from .engine import lint_source
from .results import FileResult, Finding
from .runner import collector_paused, within_bound
from .settings import Settings
from .source import syntax_error
from .suppression import file_ignored_bytes
from .targets import _excluded_below


def excluded(path: str, settings: Settings) -> bool:
    """Is the file ``path`` excluded by its settings' ``exclude`` globs?"""
    return bool(settings.config.exclude) and _excluded_below(path, settings.root, settings.config.exclude, None)


def lint_document(
    path: str,
    data: bytes,
    settings: Settings,
    fix: bool = False,
    unsafe_fixes: bool = False,
    edits: bool = False,
    parse: Callable[[str], ast.Module] = ast.parse,
    known: Callable[[Finding], bool] | None = None,
) -> FileResult:
    """The result of ``data`` checked (and fixed, with ``fix``) as the file ``path``;
    with ``edits``, each fixable finding carries its text edit; ``parse`` makes the
    tree of its text; ``known``: the findings a fix leaves alone (a baseline's)
    (:func:`gradgate.engine.lint_source`). The per-file time bound holds here too, in
    whatever thread (:func:`gradgate.runner.within_bound`)."""
    if file_ignored_bytes(data):
        return FileResult(path, source=data, stage="ignored")
    with collector_paused():
        result = within_bound(
            path,
            data,
            lambda: lint_source(
                path,
                data,
                file_config(path, settings),
                fix=fix,
                unsafe_fixes=unsafe_fixes,
                edits=edits,
                parse=parse,
                known=known if fix else None,
            ),
        )
    if result.stage == "prefilter":  # a document is a file named: parsed all the same
        reason = syntax_error(data)
        if reason is not None:
            return FileResult(path, error=reason, source=data)
    return result


def file_config(path: str, settings: Settings) -> Config:
    """The configuration the file ``path`` is checked and fixed with: its settings'
    with the rules its ``per-file-ignores`` name ignored."""
    return settings.config.for_file(path, settings.root)


def with_edits(result: FileResult, config: Config) -> FileResult:
    """``result`` with each fixable finding's text edit (what JSON, SARIF and editors
    show or apply), matched by place; ``config``: the file's own (:func:`file_config`).
    Unlike :func:`gradgate.engine.attach_edits` it also works on a result a baseline
    thinned out (the re-analysis then has more findings than the result)."""
    if result.error is not None or all(f.edit is not None for f in result.findings if f.applicability):
        return result  # nothing to fix, or every edit already there
    from .records import replace
    from .source import SourceError, read_source

    data = result.source
    if data is None:  # a cached result: the file was not read
        try:
            data = read_source(result.path).data
        except SourceError:
            return result
    edited = lint_source(result.path, data, config, edits=True)
    if edited.error is not None:
        return result
    by_place = {(f.line, f.column, f.rule): f.edit for f in edited.findings}
    return replace(
        result,
        findings=tuple(replace(f, edit=by_place.get((f.line, f.column, f.rule), f.edit)) for f in result.findings),
    )
