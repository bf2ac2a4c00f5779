"""``FixGradModeGates``: ``gradgate fix`` as a LibCST codemod command.

The codemod does not decide anything itself: it hands the module's bytes to gradgate's
engine, with the settings nearest to the file (as ``gradgate fix`` would), and returns
the engine's fixed module, so both tools write the same bytes. A file with nothing to
fix, excluded by its settings or marked ``# gradgate: ignore-file`` is skipped
(``SkipFile``); one the engine cannot parse fails with the engine's reason. Its rules,
``per-file-ignores`` and ``# noqa`` hold as for ``gradgate fix``, and ``--baseline FILE``
leaves the findings a baseline records alone, as ``gradgate fix --baseline`` does.
"""

from __future__ import annotations

import argparse
import os

import libcst as cst
from libcst.codemod import CodemodContext, SkipFile, VisitorBasedCodemodCommand

from ..document import excluded, lint_document
from ..settings import Resolver

#: settings are looked up once per folder for a whole codemod run (per worker process)
_RESOLVER = Resolver()


class FixGradModeGates(VisitorBasedCodemodCommand):
    DESCRIPTION = (
        "Remove grad-mode operands from forward-path predicates (gradgate's safe fixes; "
        "--unsafe-fixes for the unsafe ones too)."
    )

    @staticmethod
    def add_args(arg_parser: argparse.ArgumentParser) -> None:
        arg_parser.add_argument(
            "--unsafe-fixes", dest="unsafe_fixes", action="store_true", help="Also apply gradgate's unsafe fixes."
        )
        arg_parser.add_argument(
            "--baseline",
            dest="baseline",
            metavar="FILE",
            help="Leave the findings this gradgate baseline records unfixed (paths relative to the working directory).",
        )

    def __init__(self, context: CodemodContext, unsafe_fixes: bool = False, baseline: str | None = None) -> None:
        super().__init__(context)
        self.unsafe_fixes = unsafe_fixes
        self.known = None
        if baseline is not None:
            from ..baseline import known_of

            self.known = known_of(baseline, os.getcwd())  # a BaselineError names the file

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        path = self.context.filename or "<stdin>.py"
        settings = _RESOLVER.for_path(path)
        if excluded(path, settings):
            raise SkipFile("excluded by gradgate's settings")
        result = lint_document(path, tree.bytes, settings, fix=True, unsafe_fixes=self.unsafe_fixes, known=self.known)
        if result.error is not None:
            raise ValueError(f"gradgate: {result.error}")
        if not result.changed or result.fixed is None:
            raise SkipFile("nothing for gradgate to fix")
        return cst.parse_module(result.fixed)
