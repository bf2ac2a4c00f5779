"""Checking one in-memory document (standard input, an editor's buffer) as the file it
stands for: that file's settings, ``exclude``, ``per-file-ignores`` and
``# gradgate: ignore-file`` apply as they would on disk."""

from __future__ import annotations

import os

from .engine import lint_source
from .results import FileResult
from .runner import _per_file_ignored
from .settings import Settings
from .suppression import file_ignored_bytes
from .targets import _excluded_below


def excluded(path: str, settings: Settings) -> bool:
    """Is the file ``path`` excluded by its settings' ``exclude`` globs?"""
    return bool(settings.config.exclude) and _excluded_below(path, settings.root, settings.config.exclude, None)


def lint_document(path: str, data: bytes, settings: Settings, fix: bool = False,
                  unsafe_fixes: bool = False, edits: bool = False) -> FileResult:
    """The result of ``data`` checked (and fixed, with ``fix``) as the file ``path``;
    with ``edits``, each fixable finding carries its text edit."""
    if file_ignored_bytes(data):
        return FileResult(path, source=data, stage="ignored")
    result = lint_source(path, data, settings.config, fix=fix, unsafe_fixes=unsafe_fixes, edits=edits)
    return _per_file_ignored(result, settings.config, settings.root or os.getcwd())
