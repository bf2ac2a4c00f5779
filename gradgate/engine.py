"""The lint engine: source bytes in, result objects out. It never prints.

:func:`lint_source` analyses one file's bytes (and, asked to, fixes them);
:func:`lint_file` reads a file first; :func:`lint_paths` discovers files and lints them
all. Every failure that belongs to one file (unreadable, undecodable, unparsable) is
captured in that file's :class:`FileResult` and never stops the others.

Fixing applies the rules' LibCST node replacements in one pass, re-parses the result,
and repeats until no fixable finding is left (a chain with two grad-mode operands needs
two passes); the fixed bytes are returned, never written here: see :mod:`gradgate.source`.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from .config import Config
from .discovery import discover
from .source import SourceError, decode_check, read_source

#: Upper bound on fix passes; each pass removes at least one finding.
MAX_FIX_PASSES = 16

_SUPPRESSION = re.compile(r"#\s*gradgate:\s*ignore(?:\[(?P<codes>[A-Za-z0-9_,\s]*)\])?")


@dataclass(frozen=True)
class Finding:
    path: str
    rule: str
    message: str
    line: int
    column: int  # 1-based
    end_line: int
    end_column: int  # 1-based, exclusive
    fixable: bool
    source_line: str = ""

    def sort_key(self) -> tuple[str, int, int, str]:
        return (self.path, self.line, self.column, self.rule)


@dataclass(frozen=True)
class FileResult:
    path: str
    findings: tuple[Finding, ...] = ()
    error: str | None = None
    #: the bytes that were analysed (None when the file could not be read)
    source: bytes | None = None
    #: the fixed bytes, when fixing was asked for and something changed
    fixed: bytes | None = None
    #: findings removed by the fix
    fixed_findings: tuple[Finding, ...] = ()
    #: whether the file was skipped by the pre-filter (no grad-mode source in its bytes)
    prefiltered: bool = False

    @property
    def changed(self) -> bool:
        return self.fixed is not None and self.fixed != self.source


@dataclass(frozen=True)
class RunResult:
    files: tuple[FileResult, ...] = field(default_factory=tuple)

    @property
    def findings(self) -> list[Finding]:
        return sorted((f for r in self.files for f in r.findings), key=Finding.sort_key)

    @property
    def errors(self) -> list[FileResult]:
        return [r for r in self.files if r.error is not None]


class LintError(Exception):
    """A file's bytes could not be parsed or fixed; ``str()`` is the one-line reason."""


def _selected_rules(config: Config):
    from .rule import all_rules

    rules = [
        r for r in all_rules()
        if (config.select is None or any(r.CODE.startswith(s) for s in config.select))
        and not any(r.CODE.startswith(i) for i in config.ignore)
    ]
    return rules


def _suppressed(codes_on_line: str, rule: str) -> bool:
    for match in _SUPPRESSION.finditer(codes_on_line):
        codes = match.group("codes")
        if codes is None or rule in {c.strip() for c in codes.split(",")}:
            return True
    return False


def _parse(data: bytes):
    import libcst as cst

    try:
        return cst.parse_module(data)
    except cst.ParserSyntaxError as exc:
        raise LintError(f"syntax error at {exc.raw_line}:{exc.raw_column + 1}: {exc.message}") from None
    except RecursionError:
        raise LintError("too deeply nested to parse") from None


def _analyse(path: str, data: bytes, config: Config, rules):
    """Parse and run ``rules``; returns (module, [(Report, CodeRange)])."""
    import libcst as cst
    from libcst.metadata import MetadataWrapper, PositionProvider

    from .gradmode import GradModeAnalysis
    from .rule import RuleContext

    module = _parse(data)
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    providers = {PositionProvider, *GradModeAnalysis.METADATA}
    for rule in rules:
        providers.update(rule.METADATA_DEPENDENCIES)
    try:
        metadata = wrapper.resolve_many(providers)
        context = RuleContext(
            path=path,
            module=module,
            config=config,
            metadata=metadata,
            grad=GradModeAnalysis(module, metadata, config),
        )
        wrapper.visit_batched([rule(context) for rule in rules])
    except RecursionError:
        raise LintError("too deeply nested to analyse") from None
    positions = metadata[PositionProvider]
    return module, [(report, positions[report.node]) for report in context.reports], positions, cst


def _findings(path, data, config, rules):
    module, reports, positions, cst = _analyse(path, data, config, rules)
    lines = module.code.splitlines()
    out: list[tuple[Finding, object]] = []
    for report, where in reports:
        line_text = lines[where.start.line - 1] if where.start.line <= len(lines) else ""
        statement_text = lines[report.statement_line - 1] if report.statement_line <= len(lines) else ""
        if _suppressed(line_text, report.code) or _suppressed(statement_text, report.code):
            continue
        finding = Finding(
            path=path,
            rule=report.code,
            message=report.message,
            line=where.start.line,
            column=where.start.column + 1,
            end_line=where.end.line,
            end_column=where.end.column + 1,
            fixable=report.replacement is not None,
            source_line=line_text,
        )
        out.append((finding, report.replacement))
    out.sort(key=lambda pair: pair[0].sort_key())
    return module, out, positions, cst


def _apply(module, replacements, positions, cst):
    """Apply the replacements whose ranges do not overlap an earlier one, in one pass."""
    chosen: dict[object, object] = {}
    spans: list[tuple[tuple[int, int], tuple[int, int]]] = []
    for replacement in replacements:
        if replacement.original in chosen:
            continue
        where = positions[replacement.original]
        start, end = (where.start.line, where.start.column), (where.end.line, where.end.column)
        if any(not (end <= s or start >= e) for s, e in spans):
            continue  # overlaps: the next pass sees it again
        spans.append((start, end))
        chosen[replacement.original] = replacement.new

    class Swap(cst.CSTTransformer):
        def on_leave(self, original_node, updated_node):
            return chosen.get(original_node, updated_node)

    return module.visit(Swap()).bytes


def _check_fixed(data: bytes) -> None:
    """A fix is kept only if both LibCST and CPython parse its result."""
    _parse(data)
    try:
        ast.parse(data)
    except SyntaxError as exc:
        raise LintError(f"fix produced invalid code ({exc.msg}); file left unchanged") from None


def lint_source(path: str, data: bytes, config: Config, fix: bool = False) -> FileResult:
    """Lint (and optionally fix) ``data``, the bytes of the file ``path``."""
    try:
        decode_check(data)
    except SourceError as exc:
        return FileResult(path, error=str(exc), source=data)
    if not any(token in data for token in config.prefilter_tokens()):
        return FileResult(path, source=data, prefiltered=True)
    rules = _selected_rules(config)
    try:
        module, found, positions, cst = _findings(path, data, config, rules)
        if not fix:
            return FileResult(path, tuple(f for f, _ in found), source=data)
        first = [f for f, _ in found]
        current = data
        for _ in range(MAX_FIX_PASSES):
            replacements = [r for _, r in found if r is not None]
            if not replacements:
                break
            candidate = _apply(module, replacements, positions, cst)
            _check_fixed(candidate)
            current = candidate
            module, found, positions, cst = _findings(path, current, config, rules)
    except LintError as exc:
        return FileResult(path, error=str(exc), source=data)
    remaining = tuple(f for f, _ in found)
    remaining_keys = {(f.rule, f.source_line.strip(), f.message) for f in remaining}
    fixed = tuple(f for f in first if (f.rule, f.source_line.strip(), f.message) not in remaining_keys)
    return FileResult(
        path,
        remaining,
        source=data,
        fixed=current if current != data else None,
        fixed_findings=fixed if current != data else (),
    )


def lint_file(path: str, config: Config, fix: bool = False) -> FileResult:
    try:
        source = read_source(path)
    except SourceError as exc:
        return FileResult(path, error=str(exc))
    return lint_source(path, source.data, config, fix=fix)


def iter_lint(paths: Sequence[str], config: Config, fix: bool = False) -> Iterator[FileResult]:
    for item in discover(paths, config.exclude):
        if item.error is not None:
            yield FileResult(item.path, error=item.error)
        else:
            yield lint_file(item.path, config, fix=fix)


def lint_paths(paths: Iterable[str], config: Config, fix: bool = False) -> RunResult:
    return RunResult(tuple(iter_lint(list(paths), config, fix=fix)))
