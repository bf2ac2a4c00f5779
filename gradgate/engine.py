"""The lint engine: source bytes in, result objects out. It never prints.

Per file, cheapest first:

1. **bytes pre-filter**: a file holding none of the grad-mode source tokens the
   configuration knows (:meth:`Config.prefilter_tokens`) cannot hold a finding;
2. **stdlib ast**: :class:`~gradgate.semantic.ModuleModel` finds the statements that
   read the grad mode; each rule's ``candidate`` test keeps those it could report on;
3. **LibCST**, on *snippets* only: the lines of each candidate statement are parsed as a
   module of their own (behind an ``if 1:`` header when indented) and the rules visit it
   with positions mapped back to the file. When a snippet does not parse on its own the
   whole file is parsed instead, so nothing is ever missed.

Fixing applies the rules' node replacements to each snippet in one pass, splices the
regenerated snippet lines back over the original ones (every other byte is untouched),
re-parses the whole result with CPython and LibCST, and repeats until no fixable finding
is left. The fixed bytes are returned, never written here: see :mod:`gradgate.source`.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from .config import Config
from .discovery import discover
from .results import Applicability, Edit, FileResult, Finding, RunResult
from .semantic import ModuleModel
from .source import SourceError, decode_check, read_source
from .suppression import suppressed, suppression_comments

#: Upper bound on fix passes; each pass removes at least one finding.
MAX_FIX_PASSES = 16

_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


class LintError(Exception):
    """A file's text could not be parsed or fixed; ``str()`` is the one-line reason."""


class _FixInvalid(LintError):
    """A fix computed on a snippet does not fit the file (e.g. it emptied a block):
    the file is then analysed and fixed as a whole module instead."""


def selected_rules(config: Config) -> list:
    from .rule import all_rules

    return [r for r in all_rules() if config.selects(r.CODE, r.DEFAULT_ENABLED)]


def split_lines(text: str) -> list[str]:
    """Lines with their own endings, split where CPython's tokenizer splits them."""
    return _LINE.findall(text)


# -- snippets ----------------------------------------------------------------------
@dataclass
class Snippet:
    """File lines ``first``..``last`` (1-based, inclusive), parsed as a module.

    ``header`` lines precede them in the parsed text (an ``if 1:`` that makes an
    indented statement parse); the whole file is the snippet ``1..len(lines)``.
    """

    first: int
    last: int
    header: str
    module: object  # libcst.Module
    #: a ``pass`` after the lines, so that removing every statement of an indented
    #: snippet leaves its ``if 1:`` block valid; it is cut off again when splicing
    sentinel: str = ""
    #: LibCST regenerates the parsed text exactly; fixes are applied only then
    lossless: bool = True
    #: LibCST positions of the module's nodes, set when the rules visit it
    positions: object = None

    @property
    def line_offset(self) -> int:
        return self.first - 1 - self.header.count("\n")

    def body_of(self, module) -> str:
        code = module.code
        if not (code.startswith(self.header) and code.endswith(self.sentinel)):
            raise _FixInvalid("a fix changed the snippet frame")
        return code[len(self.header):len(code) - len(self.sentinel)]


def _parse_cst(text: str):
    import libcst as cst

    try:
        return cst.parse_module(text)
    except cst.ParserSyntaxError as exc:
        raise LintError(
            f"syntax error at {exc.raw_line}:{exc.raw_column + 1}: {exc.message}"
        ) from None
    except cst.CSTValidationError as exc:
        # valid Python LibCST refuses to build, e.g. `(a if b else c)and d` (CPython needs
        # no space after the parenthesis; LibCST's BooleanOperation validation wants one)
        raise LintError(f"LibCST cannot parse this file: {exc}") from None
    except RecursionError:
        raise LintError("too deeply nested to parse") from None


def _ranges(statements: Sequence[ast.stmt]) -> list[tuple[int, int]]:
    ranges: list[tuple[int, int]] = []
    for statement in sorted(statements, key=lambda s: s.lineno):
        first, last = statement.lineno, statement.end_lineno or statement.lineno
        if ranges and first <= ranges[-1][1]:
            ranges[-1] = (ranges[-1][0], max(last, ranges[-1][1]))
        else:
            ranges.append((first, last))
    return ranges


def _frame(lines: list[str], first: int, last: int, top_level: bool = False):
    """Lines ``first..last`` framed to parse alone: ``(header, body, sentinel)``.

    Every frame ends in a ``pass`` sentinel line: it keeps an indented block valid when
    a fix removes its last statement, and keeps LibCST from dropping the final line
    ending of a file whose lines end in a lone CR.
    """
    body = "".join(lines[first - 1:last])
    if not body.endswith(("\n", "\r")):
        body += "\n"  # last line of a file without a final newline
    indent = "" if top_level else body[: len(body) - len(body.lstrip(" \t"))]
    return ("if 1:\n" if indent else ""), body, f"{indent}pass\n"


def _parse_frame(lines: list[str], first: int, last: int, top_level: bool = False) -> Snippet | None:
    """The snippet of lines ``first..last``, or None if they do not parse alone or
    LibCST would not regenerate them byte for byte."""
    import libcst as cst

    header, body, sentinel = _frame(lines, first, last, top_level)
    try:
        module = cst.parse_module(header + body + sentinel)
        if module.code != header + body + sentinel:
            return None
    except (cst.ParserSyntaxError, cst.CSTValidationError, RecursionError):
        return None
    return Snippet(first, last, header, module, sentinel)


def _snippets(lines: list[str], statements: Sequence[ast.stmt], whole: bool,
              parent: Mapping[ast.stmt, ast.stmt] | None = None) -> list[Snippet]:
    """Parse the candidate statements' lines (or the whole file) with LibCST.

    A statement that does not parse alone (an ``elif``, or one that shares its line
    with ``else:``) is widened to the statement whose block holds it (``parent``), until
    it parses; at the top level it sends the whole file to LibCST. The whole file is
    framed like a snippet, less its trailing blank lines, which LibCST does not always
    reproduce; if it still cannot be reproduced byte for byte it is analysed, but its
    findings are not fixed.
    """
    if not whole:
        parsed: dict[tuple[int, int], Snippet] = {}
        pending = list(statements)
        while True:
            failed = None
            for first, last in _ranges(pending):
                if (first, last) not in parsed:
                    snippet = _parse_frame(lines, first, last)
                    if snippet is None:
                        failed = (first, last)
                        break
                    parsed[first, last] = snippet
            if failed is None:
                return [parsed[r] for r in _ranges(pending)]
            inside = [s for s in pending if failed[0] <= s.lineno <= failed[1]]
            if not parent or not all(s in parent for s in inside):
                return _snippets(lines, statements, whole=True)
            pending = [parent[s] if s in inside else s for s in pending]
    last = len(lines)
    while last and not lines[last - 1].strip():
        last -= 1
    if last == 0:
        return []
    snippet = _parse_frame(lines, 1, last, top_level=True)
    if snippet is not None:
        return [snippet]
    module = _parse_cst("".join(lines))  # raises the syntax error, if that is the cause
    return [Snippet(1, len(lines), "", module, "", lossless=False)]


# -- analysis ----------------------------------------------------------------------
@dataclass
class _Found:
    finding: Finding
    replacement: object  # gradgate.rule.Replacement | None
    snippet: Snippet


class _Analysis:
    """One pass over one version of a file's text."""

    def __init__(self, path: str, text: str, config: Config, rules: list, whole: bool = False):
        self.path = path
        self.lines = split_lines(text)
        try:
            tree = ast.parse(text)
        except SyntaxError as exc:
            raise LintError(f"syntax error at {exc.lineno}:{exc.offset}: {exc.msg}") from None
        except (RecursionError, MemoryError, ValueError) as exc:
            raise LintError(f"cannot parse: {type(exc).__name__}") from None
        model = ModuleModel(tree, config, None if whole else text)
        statements, parent = model.candidates(lambda s, scope: any(r.candidate(s, model, scope) for r in rules))
        self.stage = "module" if whole else ("snippets" if statements else "ast")
        self.found: list[_Found] = []
        #: lines whose suppression comment silenced a finding
        self.used_suppressions: set[int] = set()
        self.cst_lines = 0
        if statements or whole:
            for snippet in _snippets(self.lines, statements, whole, parent):
                self.cst_lines += snippet.last - snippet.first + 1
                self.found.extend(self._visit(snippet, model, config, rules))
        if config.reports_unused_suppressions and "gradgate:" in text:
            self.found.extend(self._unused_suppressions(text, rules))
        self.found.sort(key=lambda f: f.finding.sort_key())

    def _unused_suppressions(self, text: str, rules: list) -> Iterator[_Found]:
        from .config import UNUSED_SUPPRESSION_CODE
        from .registry import known_codes

        known, selected = known_codes(), {r.CODE for r in rules}
        for line, column, comment, codes in suppression_comments(text):
            if line in self.used_suppressions:
                continue
            judged = codes is None or any(c in selected or c not in known for c in codes)
            if not judged:
                continue  # it names only rules this run does not check
            unknown = [c for c in codes or () if c not in known]
            reason = f"unknown rule code{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}" if unknown \
                else "nothing is reported here"
            finding = Finding(
                path=self.path, rule=UNUSED_SUPPRESSION_CODE,
                message=f"unused suppression `{comment}`: {reason}",
                line=line, column=column, end_line=line, end_column=column + len(comment),
                source_line=self.lines[line - 1].rstrip("\r\n"),
            )
            yield _Found(finding, None, None)  # type: ignore[arg-type]

    def _visit(self, snippet: Snippet, model: ModuleModel, config: Config, rules: list):
        from libcst.metadata import MetadataWrapper, PositionProvider

        from .rule import RuleContext, dispatch

        wrapper = MetadataWrapper(snippet.module, unsafe_skip_copy=True)
        providers = {PositionProvider}
        for rule in rules:
            providers.update(rule.METADATA_DEPENDENCIES)
        try:
            metadata = wrapper.resolve_many(providers)
            snippet.positions = metadata[PositionProvider]
            context = RuleContext(
                path=self.path,
                module=snippet.module,
                config=config,
                metadata=metadata,
                model=model,
                line_offset=snippet.line_offset,
            )
            dispatch([rule(context) for rule in rules], snippet.module)
        except RecursionError:
            raise LintError("too deeply nested to analyse") from None
        for report in context.reports:
            where = context.position(report.node)
            line = where.start.line + snippet.line_offset
            text = self.lines[line - 1].rstrip("\r\n") if line <= len(self.lines) else ""
            statement = self.lines[report.statement_line - 1] if report.statement_line <= len(self.lines) else ""
            if suppressed(text, report.code):
                self.used_suppressions.add(line)
                continue
            if suppressed(statement, report.code):
                self.used_suppressions.add(report.statement_line)
                continue
            finding = Finding(
                path=self.path,
                rule=report.code,
                message=report.message,
                line=line,
                column=where.start.column + 1,
                end_line=where.end.line + snippet.line_offset,
                end_column=where.end.column + 1,
                applicability=Applicability.SAFE if report.replacement is not None and snippet.lossless else None,
                source_line=text,
                edit=self._edit(context, snippet, report.replacement) if snippet.lossless else None,
            )
            yield _Found(finding, report.replacement if snippet.lossless else None, snippet)

    @staticmethod
    def _edit(context, snippet: Snippet, replacement) -> Edit | None:
        import libcst as cst

        if replacement is None or not isinstance(replacement.new, cst.CSTNode):
            return None
        where = context.position(replacement.original)
        return Edit(
            line=where.start.line + snippet.line_offset,
            column=where.start.column + 1,
            end_line=where.end.line + snippet.line_offset,
            end_column=where.end.column + 1,
            content=snippet.module.code_for_node(replacement.new),
        )

    def fixed_text(self) -> tuple[str, list[Finding]] | None:
        """Apply, per snippet, the replacements that do not overlap an earlier one."""
        import libcst as cst

        by_snippet: dict[int, list[_Found]] = {}
        for found in self.found:
            if found.replacement is not None:
                by_snippet.setdefault(id(found.snippet), []).append(found)
        if not by_snippet:
            return None
        lines = list(self.lines)
        applied: list[Finding] = []
        groups = sorted(by_snippet.values(), key=lambda g: -g[0].snippet.first)
        for group in groups:  # bottom-up, so earlier line numbers stay valid
            snippet = group[0].snippet
            positions = snippet.positions  # resolved when the rules visited it
            chosen: dict[object, object] = {}
            spans: list[tuple[tuple[int, int], tuple[int, int]]] = []
            for found in group:
                original = found.replacement.original
                if original in chosen:
                    continue  # another removal in the same node: the next pass sees it
                where = positions[original]
                start = (where.start.line, where.start.column)
                end = (where.end.line, where.end.column)
                if any(not (end <= s or start >= e) for s, e in spans):
                    continue  # overlaps an applied one: the next pass sees it again
                spans.append((start, end))
                chosen[original] = found.replacement.new
                applied.append(found.finding)

            class Swap(cst.CSTTransformer):
                def on_leave(self, original_node, updated_node):
                    return chosen.get(original_node, updated_node)

            new_body = snippet.body_of(snippet.module.visit(Swap()))
            original_body = "".join(lines[snippet.first - 1:snippet.last])
            if new_body and not original_body.endswith(("\n", "\r")) and new_body.endswith("\n"):
                new_body = new_body[:-1]  # we added that newline in _snippets
            lines[snippet.first - 1:snippet.last] = [new_body]
        return "".join(lines), applied


def _validate(text: str, before: str) -> None:
    """A fix is kept only if both CPython and LibCST parse its result.

    LibCST's tokenizer rejects a few files CPython accepts (a backslash-CRLF as the last
    line). When LibCST could not parse ``before``, the text the fix started from, either,
    the failure is not the fix's doing (it only touched statements LibCST parsed alone)
    and CPython's parse is the check.
    """
    try:
        ast.parse(text)
    except SyntaxError as exc:
        raise _FixInvalid(f"a fix produced invalid code ({exc.msg}); file left unchanged") from None
    try:
        _parse_cst(text)
    except LintError as exc:
        try:
            _parse_cst(before)
        except LintError:
            return
        raise _FixInvalid(str(exc)) from None


def may_hold_findings(data: bytes, config: Config) -> bool:
    """The bytes pre-filter: a file with none of these tokens reads no grad mode."""
    return any(token in data for token in config.prefilter_tokens())


def lint_source(
    path: str, data: bytes, config: Config, fix: bool = False, prefilter: bool = True,
    unsafe_fixes: bool = False,
) -> FileResult:
    """Lint (and optionally fix) ``data``, the bytes of the file ``path``.

    ``prefilter=False`` skips the bytes and ast pre-filters and runs the rules on the
    whole file: slower, and by construction the same findings (the tests check it).
    """
    try:
        encoding = decode_check(data)
    except SourceError as exc:
        return FileResult(path, error=str(exc), source=data)
    if prefilter and not may_hold_findings(data, config):
        return FileResult(path, source=data, stage="prefilter")
    rules = selected_rules(config)
    text = data.decode(encoding)
    try:
        try:
            analysis, current, fixed_findings, cst_lines = _lint_text(
                path, text, config, rules, fix, whole=not prefilter
            )
        except _FixInvalid:
            if not prefilter:
                raise
            # a snippet-level fix did not fit the file: redo it on the whole module
            analysis, current, fixed_findings, cst_lines = _lint_text(path, text, config, rules, fix, whole=True)
    except LintError as exc:
        return FileResult(path, error=str(exc), source=data)
    remaining = tuple(f.finding for f in analysis.found)
    if current == text:
        return FileResult(path, remaining, source=data, stage=analysis.stage, cst_lines=cst_lines)
    return FileResult(
        path,
        remaining,
        source=data,
        fixed=current.encode(encoding),
        fixed_findings=tuple(fixed_findings),
        stage=analysis.stage,
        cst_lines=cst_lines,
    )


def _lint_text(path: str, text: str, config: Config, rules: list, fix: bool, whole: bool):
    analysis = _Analysis(path, text, config, rules, whole=whole)
    cst_lines = analysis.cst_lines
    fixed_findings: list[Finding] = []
    current = text
    if fix:
        for _ in range(MAX_FIX_PASSES):
            outcome = analysis.fixed_text()
            if outcome is None:
                break
            candidate, applied = outcome
            _validate(candidate, current)
            current = candidate
            fixed_findings.extend(applied)
            analysis = _Analysis(path, current, config, rules, whole=whole)
    return analysis, current, fixed_findings, cst_lines


def lint_file(path: str, config: Config, fix: bool = False, prefilter: bool = True) -> FileResult:
    try:
        source = read_source(path)
    except SourceError as exc:
        return FileResult(path, error=str(exc))
    return lint_source(path, source.data, config, fix=fix, prefilter=prefilter)


def iter_lint(
    paths: Sequence[str], config: Config, fix: bool = False, prefilter: bool = True
) -> Iterator[FileResult]:
    for item in discover(paths, config.exclude):
        if item.error is not None:
            yield FileResult(item.path, error=item.error)
        else:
            yield lint_file(item.path, config, fix=fix, prefilter=prefilter)


def lint_paths(
    paths: Iterable[str], config: Config, fix: bool = False, prefilter: bool = True
) -> RunResult:
    return RunResult(tuple(iter_lint(list(paths), config, fix=fix, prefilter=prefilter)))
