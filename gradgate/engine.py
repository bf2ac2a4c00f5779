"""The lint engine: source bytes in, result objects out. It never prints.

Per file, cheapest first:

1. **bytes pre-filter**: a file holding none of the grad-mode source tokens the
   configuration knows (:meth:`Config.prefilter_tokens`) cannot hold a finding;
2. **the model** (:mod:`gradgate.model`, stdlib ``ast`` only): grad mode followed as a
   value, every forward decision a boolean function of it; each rule names the kinds
   of decision it reports, and the model says which are gated and where grad mode
   enters them, with the proof and the plan of each fix. A check ends here: LibCST is
   not imported.
3. **LibCST**, only to make a fix: the statements a plan changes are parsed as a
   module of their own (behind an ``if 1:`` header when indented), the plan is carried
   out (:mod:`gradgate.fixes`), and the regenerated lines are spliced over the original
   ones; every other byte is untouched. The result is re-parsed (CPython for the file,
   LibCST for the changed statements) and analysed again until no fixable finding is
   left (at most :data:`MAX_FIX_PASSES` passes; a pass that does not lower the count of
   fixable findings leaves the file unchanged). The fixed bytes are returned, never
   written here: see :mod:`gradgate.source`.

A check with ``edits=True`` (:func:`attach_edits`, for editors and SARIF) also carries
out each fix in memory to give its finding a text :class:`~gradgate.results.Edit`; that
imports LibCST for files with a fixable finding.

``prefilter=False`` skips the pre-filters: every function is analysed. The findings
are the same (the test-suite checks it on every fixture and the fuzz corpus).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol, overload

from .config import Config
from .cstguard import odd_indent, refusal, text_refusal
from .model.analysis import MAX_ROUNDS, Entry, ModuleAnalysis, widen_to_pure_grad
from .model.bdd import BudgetExceeded
from .model.decisions import FLAG, kind_of
from .model.fixplan import BlockIndex, FixPlan, SourceLines, odd_layout, parent_map, plan, substitute
from .model.index import dotted
from .model.lines import split_lines
from .model.project import Project
from .model.splice import spliced_tree
from .model.values import Place
from .prefilter import may_hold_findings
from .records import record, replace
from .results import Applicability, Edit, FileResult, Finding, FlowStep, Notice
from .source import SourceError, decode_check, read_source, syntax_error_reason
from .suppression import suppressed, suppression_comments

if TYPE_CHECKING:
    import libcst as cst
    from libcst.metadata import CodeRange

    from .model.interpret import FunctionResult
    from .rule import Rule

#: what each kind of fix plan does, as a finding's ``fix_title``
FIX_TITLES = {
    "remove-operand": "remove the grad-mode operand",
    "replace-by-child": "keep the branch taken with grad mode on",
    "remove-element": "remove the grad-mode element",
    "remove-argument": "remove the grad-mode argument",
    "keep-body": "keep the body of the `if`, taken with grad mode on",
    "keep-orelse": "keep what runs with grad mode on, drop the no-grad branch",
    "remove-statement": "delete the statement (it only disables, or would read `x = x`)",
    "pass-statement": "replace the statement by `pass` (it only disables)",
    "substitute": "use the module's training mode instead (`self.training`)",
}

#: a name that says training mode; grad mode held under one stands in for it
_WORD = re.compile(r"[\w.]+")
_TRAINING_WORD = re.compile(r"^(is_)?train(ing)?(_mode)?$")
_TRAINING_HELD = re.compile(r"(held in|unpacked into) `(self\.)?(is_)?train(ing)?(_mode)?`")

#: Upper bound on fix passes; each pass removes at least one finding.
MAX_FIX_PASSES = 16
#: Files larger than this are not analysed (a notice says so): the model holds about
#: 250 bytes a source byte at worst (a fix, two passes: 500), so this bounds a file's
#: memory at about 2 GB; the BDD's node limit bounds what its conditions take
MAX_FILE_BYTES = 4_000_000


class LintError(Exception):
    """A file's text could not be parsed or fixed; ``str()`` is the one-line reason."""


class _FixInvalid(LintError):
    """A fix does not fit the file; the file is left unchanged, its findings kept."""


def selected_rules(config: Config) -> list[type[Rule]]:
    from .rule import all_rules

    return [r for r in all_rules() if config.selects(r.CODE, r.DEFAULT_ENABLED)]


def _judged_rules(rules: Sequence[type[Rule]], config: Config) -> Sequence[type[Rule]]:
    """The rules a pass works out: ``rules``; where only rules that judge no decision
    are selected (``--select GG100``), also every rule on by default that is not
    ignored, since a suppression is used only where it silences a finding (only the
    selected rules' findings are reported)."""
    if not config.reports_unused_suppressions or any(r.DECISIONS for r in rules):
        return rules
    from .rule import all_rules

    others = [
        r
        for r in all_rules()
        if r.DEFAULT_ENABLED and r not in rules and not any(r.CODE.startswith(i) for i in config.ignore)
    ]
    return [*rules, *others] if others else rules


def _parse_cst(text: str) -> cst.Module:
    import libcst as cst

    _refuse_libcst(text)
    try:
        return cst.parse_module(text)
    except cst.ParserSyntaxError as exc:
        raise LintError(f"syntax error at {exc.raw_line}:{exc.raw_column + 1}: {exc.message}") from None
    except cst.CSTValidationError as exc:
        # valid Python LibCST refuses to build, e.g. `(a if b else c)and d` (CPython needs
        # no space after the parenthesis; LibCST's BooleanOperation validation wants one)
        raise LintError(f"LibCST cannot parse this file: {exc}") from None
    except RecursionError:
        raise LintError("too deeply nested to parse") from None


def _refuse_libcst(text: str) -> None:
    """Raise :class:`_FixInvalid` for code LibCST must not parse (it would kill the
    process: :mod:`gradgate.cstguard`)."""
    reason = text_refusal(text)
    if reason is not None:
        raise _FixInvalid(f"not fixed: {reason} is past what LibCST parses safely")


class _Parents(Protocol):
    """Statement -> the statement whose block holds it (a mapping, or a lookup on demand)."""

    def __contains__(self, statement: object) -> bool: ...

    def __getitem__(self, statement: ast.stmt) -> ast.stmt: ...


# -- snippets ----------------------------------------------------------------------
@record(frozen=False)
class Snippet:
    """File lines ``first``..``last`` (1-based, inclusive), parsed as a module.

    ``header`` lines precede them in the parsed text (an ``if 1:`` that makes an
    indented statement parse); the whole file is the snippet ``1..len(lines)``.
    """

    first: int
    last: int
    header: str
    module: cst.Module
    #: a ``pass`` after the lines, so that removing every statement of an indented
    #: snippet leaves its ``if 1:`` block valid; it is cut off again when splicing
    sentinel: str = ""
    #: LibCST regenerates the parsed text exactly; fixes are applied only then
    lossless: bool = True
    #: LibCST positions of the module's nodes, set when the rules visit it
    positions: Mapping[cst.CSTNode, CodeRange] | None = None

    @property
    def line_offset(self) -> int:
        return self.first - 1 - self.header.count("\n")

    def body_of(self, module: cst.Module) -> str:
        code = module.code
        if not (code.startswith(self.header) and code.endswith(self.sentinel)):
            raise _FixInvalid("a fix changed the snippet frame")
        return code[len(self.header) : len(code) - len(self.sentinel)]


def _ranges(statements: Sequence[ast.stmt]) -> list[tuple[int, int]]:
    ranges: list[tuple[int, int]] = []
    for statement in sorted(statements, key=lambda s: s.lineno):
        first, last = statement.lineno, statement.end_lineno or statement.lineno
        if ranges and first <= ranges[-1][1]:
            ranges[-1] = (ranges[-1][0], max(last, ranges[-1][1]))
        else:
            ranges.append((first, last))
    return ranges


def _frame(lines: list[str], first: int, last: int, top_level: bool = False) -> tuple[str, str, str]:
    """Lines ``first..last`` framed to parse alone: ``(header, body, sentinel)``.

    Every frame ends in a ``pass`` sentinel line: it keeps an indented block valid when
    a fix removes its last statement, and keeps LibCST from dropping the final line
    ending of a file whose lines end in a lone CR.
    """
    body = "".join(lines[first - 1 : last])
    if not body.endswith(("\n", "\r")):
        body += "\n"  # last line of a file without a final newline
    indent = "" if top_level else body[: len(body) - len(body.lstrip(" \t"))]
    # CRLF frames end their lines in CRLF: LibCST writes new lines (a `pass`) that way
    # (LibCST does not reproduce a frame whose header ends in a lone CR: LF there)
    newline = "\r\n" if lines[first - 1].endswith("\r\n") else "\n"
    return (f"if 1:{newline}" if indent else ""), body, f"{indent}pass{newline}"


def _parse_frame(lines: list[str], first: int, last: int, top_level: bool = False) -> Snippet | None:
    """The snippet of lines ``first..last``, or None if they do not parse alone or
    LibCST would not regenerate them byte for byte."""
    import libcst as cst

    header, body, sentinel = _frame(lines, first, last, top_level)
    _refuse_libcst(header + body + sentinel)
    try:
        module = cst.parse_module(header + body + sentinel)
        if module.code != header + body + sentinel:
            return None
    except (cst.ParserSyntaxError, cst.CSTValidationError, RecursionError):
        return None
    return Snippet(first, last, header, module, sentinel)


def _snippets(
    lines: list[str], statements: Sequence[ast.stmt], whole: bool, parent: _Parents | None = None
) -> list[Snippet]:
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
@record(frozen=False)
class _Found:
    finding: Finding
    plan: FixPlan | None


class _Analysis:
    """One pass over one version of a file's text."""

    def __init__(
        self,
        path: str,
        text: str,
        config: Config,
        rules: Sequence[type[Rule]],
        whole: bool = False,
        project: Project | None = None,
        tree: ast.Module | None = None,
        parse: Callable[[str], ast.Module] = ast.parse,
        known: Callable[[Finding], bool] | None = None,
    ):
        """``tree``: the tree of ``text`` where the caller has it (a fix pass's, spliced);
        ``parse`` makes it otherwise (an editor buffer's :class:`~gradgate.model.splice.Reparser`);
        ``known``: findings it holds (a baseline's) are reported but never fixed."""
        self.path = path
        self.known = known
        self.text = text
        self.lines = split_lines(text)
        try:
            given = tree if tree is not None else project.tree_of(path, text) if project is not None else None
            self.tree = given if given is not None else parse(text)
        except SyntaxError as exc:
            raise LintError(syntax_error_reason(exc)) from None
        except (RecursionError, MemoryError, ValueError) as exc:
            raise LintError(f"cannot parse: {type(exc).__name__}") from None
        self.source = SourceLines(text, self.tree, self.lines)
        self.notices: list[Notice] = []
        relayed = len(project.gave_up) if project is not None else 0
        try:
            self.model = ModuleAnalysis(self.tree, config, None if whole else text, project, path, self.lines)
        except RecursionError:
            raise LintError("too deeply nested to analyse") from None
        self.used_suppressions: set[int] = set()
        self.found: list[_Found] = []
        #: findings a suppression comment silenced
        self.suppressed: list[Finding] = []
        self.blocks = BlockIndex(self.tree)
        judged = _judged_rules(rules, config)
        self._judge(judged)
        self._note_given_up(self.model.project.gave_up[relayed:])
        if judged is not rules:  # their findings only tell which suppressions are used
            reported = {r.CODE for r in rules}
            self.found = [f for f in self.found if f.finding.rule in reported]
            self.suppressed = [f for f in self.suppressed if f.rule in reported]
        if config.reports_unused_suppressions and "gradgate:" in text:
            self.found.extend(self._unused_suppressions(text, judged))
        # one finding a place: calls from several sites into one deciding predicate
        unique = {f.finding.sort_key(): f for f in reversed(self.found)}
        self.found = sorted(unique.values(), key=lambda f: f.finding.sort_key())

    def _judge(self, rules: Sequence[type[Rule]]) -> None:
        bdd = self.model.bdd
        by_origin: dict[tuple[str, ast.AST], list[Entry]] = {}
        rule_of: dict[str, type[Rule]] = {}
        for rule in rules:
            if not rule.DECISIONS:
                continue
            rule_of[rule.CODE] = rule
            for decision in self.model.decisions:
                if decision.kind not in rule.DECISIONS:
                    continue
                bdd.start()  # each decision's judgement has a budget of its own
                try:
                    entries = rule.entries(self.model, decision) if rule.judge(decision, bdd) else []
                except (BudgetExceeded, RecursionError):
                    line = getattr(decision.node, "lineno", 0)
                    what = f"{rule.CODE}: decision `{decision.name}` not analysed (its condition is too large)"
                    self.notices.append(Notice(self.path, line, what))
                    continue
                for entry in entries:
                    by_origin.setdefault((rule.CODE, entry.origin), []).append(entry)
        _flags_give_way(by_origin, self.path)
        # a read that gates a communication path and, through it, a kernel's argument (TE's
        # `ub=` of the GEMM, chosen by the overlap flag) is one finding: the numerics
        # kinds give way to any other kind reported at the same read
        deciding = {o for (_, o), entries in by_origin.items() if any(not _numerics(e) for e in entries)}
        for key in [k for k, entries in by_origin.items() if k[1] in deciding]:
            kept = [e for e in by_origin[key] if not _numerics(e)]
            if kept:
                by_origin[key] = kept
            else:
                del by_origin[key]
        targets = {origin: self._target(origin, entries[0]) for (_, origin), entries in by_origin.items()}
        fixed_too = frozenset(t for t, _ in targets.values())
        for (code, origin), entries in by_origin.items():
            for group in _by_deciding_place(entries, self.path):
                found = self._finding(rule_of[code], origin, group, targets[origin], fixed_too)
                if found is not None:
                    self.found.append(found)

    def _libcst_can_fix(self, statement: ast.stmt) -> bool:
        """Can LibCST parse and reproduce ``statement``? Checked on the stdlib tree, so that "fixable" is said only
        where ``fix`` succeeds."""
        starts = {s.lineno for s in ast.walk(statement) if isinstance(s, ast.stmt)}
        if odd_indent(self.lines, starts):
            return False
        return refusal(statement) is None

    def _note_given_up(self, relayed: Sequence[tuple[str, int, str]]) -> None:
        """Notices for what the model gave up on: no loss goes unsaid."""
        functions = self.model.index.functions

        def line_of(qualname: str) -> int:
            info = functions.get(qualname)
            return info.node.lineno if info is not None else 0

        for qualname in dict.fromkeys(self.model.failed):
            what = "the module's top level" if qualname == "<module>" else f"function `{qualname}`"
            self.notices.append(
                Notice(
                    self.path, line_of(qualname), f"{what} not analysed (too large a condition, or too deeply nested)"
                )
            )
        for qualname in self.model.unsettled[:1]:
            what = f"grad mode is relayed further than {MAX_ROUNDS} rounds of summaries follow (at `{qualname}`)"
            self.notices.append(Notice(self.path, line_of(qualname), what))
        for path, line, what in dict.fromkeys(relayed):
            where = "" if path == self.path else f" (in {path})"
            self.notices.append(Notice(self.path, line if path == self.path else 0, f"{what} not followed{where}"))

    def _owner(self, origin: ast.AST, entry: Entry) -> FunctionResult | None:
        """The result of the function whose read ``origin`` is (:meth:`ModuleAnalysis.owner_of`)."""
        function = None if entry.decision.function == "<module>" else entry.decision.function
        return self.model.owner_of(origin, function)

    def _target(self, origin: ast.AST, entry: Entry) -> tuple[ast.AST, int]:
        """The grad-mode expression a fix sets at ``origin``, and its grad-on value."""
        owner = self._owner(origin, entry)
        assert owner is not None  # an entry's origin is a read of the module
        _statement, sign, _trail = owner.origins[origin]
        return widen_to_pure_grad(origin, entry.statement, sign)

    def _carried(self, origin: ast.AST, entry: Entry) -> str | None:
        """The slot ``origin`` reads when another module fills it with a value grad mode
        gates (reported here, fixed there); else None."""
        owner = self._owner(origin, entry)
        return owner.carried.get(origin) if owner is not None else None

    def _training_proxy(self, origin: ast.AST, entry: Entry) -> str | None:
        """The training mode to put in place of a grad-mode read that stands in for it
        (``training = torch.is_grad_enabled()``, ``if training:``, ``training=`` handed
        a kernel): ``self.training`` in a method; None where grad mode is not held under
        a training name, or no module is at hand."""
        names = [step.message for step in entry.trail]
        held = any(_TRAINING_HELD.search(m) for m in names)
        read = origin.id if isinstance(origin, ast.Name) else origin.attr if isinstance(origin, ast.Attribute) else ""
        if not (held or _TRAINING_WORD.match(read)) or read in ("is_grad_enabled", "grad_enabled"):
            return None
        function = self.model.index.functions.get(entry.decision.function)
        if function is None or function.owner is None or function.positional[:1] != ["self"]:
            return None
        return "self.training"

    def _finding(
        self,
        rule: type[Rule],
        origin: ast.AST,
        entries: list[Entry],
        target: tuple[ast.AST, int],
        fixed_too: frozenset[ast.AST],
    ) -> _Found | None:
        statement = entries[0].statement
        held = _captured_into(statement, origin)  # `async_op = grad if async_op is None else async_op`
        # grad mode itself handed to a function that decides with it: that decision is the
        # one shown, at its predicate (not a flag the capture also names)
        first = next((e for e in entries if _passes_on(e, target[0], held)), entries[0])
        info = self.model.index.functions.get(first.decision.function)
        span = self.source.span(
            _deciding_read_of_capture(origin, held, entries, info.node if info is not None else None)
        )
        line = span[0]
        text = self.lines[line - 1].rstrip("\r\n") if line <= len(self.lines) else ""
        statement_text = self.lines[statement.lineno - 1] if statement.lineno <= len(self.lines) else ""
        silenced = next(
            (n for n, t in ((line, text), (statement.lineno, statement_text)) if suppressed(t, rule.CODE)), None
        )
        read = " ".join(self.source.text(self.source.span(origin)).split())
        message = rule.describe(first.decision, read)
        fix_plan: FixPlan | None = None
        applicability: Applicability | None = None
        proxy = self._training_proxy(origin, first)
        if proxy is not None and (rule.FIXES or kind_of(first.decision.kind).intent == "training"):
            # grad mode standing in for training mode: the fix is the module's mode, which
            # changes eval under no_grad too (unsafe)
            fix_plan = substitute(target[0], proxy, statement, self.source)
            applicability = Applicability.UNSAFE if fix_plan is not None else None
            message += " (grad mode stands in for training mode here)"
        elif (slot := self._carried(origin, first)) is not None:
            message += f" (`{slot}` is filled in another module with a value grad mode gates: fix it there)"
        elif rule.FIXES and all(e.proven for e in entries):
            decided = frozenset(e.decision.node for e in entries) | {e.decision.name for e in entries}
            fix_plan = plan(target[0], target[1], statement, self.blocks, self.source, fixed_too - {target[0]}, decided)
        if fix_plan is not None and not self._libcst_can_fix(fix_plan.statement):
            fix_plan, applicability = None, None  # reported, not offered: `fix` would refuse it
        coupled = sorted({c.lineno for e in entries for c in e.coupled})
        if fix_plan is not None and proxy is None:
            applicability = Applicability.UNSAFE if coupled else Applicability.SAFE
        if coupled:
            where = ", ".join(str(n) for n in coupled)
            message += f" (grad mode also decides how this path is prepared at line {where}: fix unsafe)"
        steps: list[FlowStep] = []
        for step in first.trail:  # one step a place: "unpacked into x" says what "held in x" would
            column = self.source.column(step.line, step.column) + 1
            if not steps or (steps[-1].line, steps[-1].column) != (step.line, column):
                steps.append(FlowStep(self.path, step.line, column, step.message))
        via = first.decision.via
        if via:  # decided in a function the call runs, maybe in another file
            steps.extend(FlowStep(p.path, p.line, p.column, p.message) for p in via)
            passed = _passes_on(first, target[0], held)
            deciding = next((p for p in via if p.decides), via[-1])
            if passed or deciding.path != self.path:
                # grad mode itself passed on, or what it decides handed to another module:
                # the callee's predicate decides, reported there
                return self._at_deciding_place(rule, message, steps, deciding)
            # grad mode combined into what is passed (`f(async_op and grad)`): decided here
            message += f" (decided in `{via[-1].path}` at line {via[-1].line}, through the call)"
        elif any((s.line, s.column) != (line, span[1] + 1) for s in steps):  # grad mode came from elsewhere
            steps.append(FlowStep(self.path, line, span[1] + 1, f"grad mode decides `{first.decision.name}` here"))
        else:
            steps = []
        flow = tuple(steps)
        finding = Finding(
            path=self.path,
            rule=rule.CODE,
            message=message,
            line=line,
            column=span[1] + 1,
            end_line=span[2],
            end_column=span[3] + 1,
            applicability=applicability,
            source_line=text,
            flow=flow,
            fix_title=FIX_TITLES.get(fix_plan.action, "") if fix_plan is not None else "",
        )
        if silenced is not None:
            self.used_suppressions.add(silenced)
            self.suppressed.append(replace(finding, applicability=None))
            return None
        if fix_plan is not None and self.known is not None and self.known(finding):
            return _Found(replace(finding, applicability=None, fix_title=""), None)  # a baseline's: left alone
        return _Found(finding, fix_plan)

    def _at_deciding_place(self, rule: type[Rule], message: str, steps: list[FlowStep], place: Place) -> _Found | None:
        """A finding whose decision a called function makes, maybe in another file:
        reported at that function's deciding predicate (where a person would change
        it), with the capture and the call as its flow; report only. A suppression
        comment on the predicate's line silences it."""
        word = _WORD.match(place.text, max(place.column - 1, 0))
        end = place.column + (len(word.group()) if word else 1)
        finding = Finding(
            path=place.path,
            rule=rule.CODE,
            message=message,
            line=place.line,
            column=place.column,
            end_line=place.line,
            end_column=end,
            source_line=place.text,
            flow=tuple(steps),
        )
        if suppressed(place.text, rule.CODE):
            if place.path == self.path:
                self.used_suppressions.add(place.line)
            self.suppressed.append(finding)
            return None
        return _Found(finding, None)

    def _unused_suppressions(self, text: str, rules: Sequence[type[Rule]]) -> list[_Found]:
        from .config import UNUSED_SUPPRESSION_CODE
        from .registry import known_codes

        known, selected = known_codes(), {r.CODE for r in rules}
        out = []
        for line, column, comment, codes in suppression_comments(text):
            if line in self.used_suppressions:
                continue
            judged = codes is None or any(c in selected or c not in known for c in codes)
            if not judged:
                continue  # it names only rules this run does not check
            unknown = [c for c in codes or () if c not in known]
            reason = (
                f"unknown rule code{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}"
                if unknown
                else "nothing is reported here"
            )
            finding = Finding(
                path=self.path,
                rule=UNUSED_SUPPRESSION_CODE,
                message=f"unused suppression `{comment}`: {reason}",
                line=line,
                column=column,
                end_line=line,
                end_column=column + len(comment),
                source_line=self.lines[line - 1].rstrip("\r\n"),
            )
            out.append(_Found(finding, None))
        return out

    # -- fixing ---------------------------------------------------------------------------
    def with_edits(self) -> None:
        """Give every finding with a fix its :class:`Edit` (for editors and SARIF)."""
        from .records import replace

        for index, found in enumerate(self.found):
            if found.plan is None:
                continue
            try:
                outcome = self._fixed([found])
            except LintError:
                continue
            if outcome is None:
                continue
            touched = outcome[3]
            # the lines one fix rewrites, compared in a window of the file around them (a
            # file of 9,000 fixes is not compared whole 9,000 times); the whole where the
            # window cannot tell
            edit = _edit_near(self.lines, *touched[0]) if len(touched) == 1 else None
            if edit is None:
                edit = _edit(self.text, "".join(outcome[0]))
            self.found[index] = _Found(replace(found.finding, edit=edit), found.plan)

    def fixable(self, unsafe_fixes: bool) -> list[_Found]:
        return [f for f in self.found if f.plan is not None and f.finding.fixable_with(unsafe_fixes)]

    def fixed_text(self, chosen: list[_Found]) -> tuple[str, list[Finding], int] | None:
        """Carry out the plans of ``chosen`` that do not overlap an earlier one; returns
        the new text, the findings fixed and the number of lines LibCST parsed."""
        outcome = self._fixed(chosen)
        return None if outcome is None else ("".join(outcome[0]), outcome[1], outcome[2])

    def _fixed(self, chosen: list[_Found]) -> tuple[list[str], list[Finding], int, list[tuple[int, int, str]]] | None:
        """:meth:`fixed_text` as the new lines (a rewritten run of lines is one item),
        with each run rewritten: its first and last line in the file, and its new text."""
        from libcst.metadata import MetadataWrapper, PositionProvider

        from .fixes import PlanError, apply_plans

        plans: list[tuple[FixPlan, Finding]] = []
        taken: list[tuple[tuple[int, int], tuple[int, int]]] = []
        for found in chosen:
            assert found.plan is not None
            node = found.plan.node
            start, end = node[:2], node[2:]
            statement_span = self.source.span(found.plan.statement)
            if any(not (end <= s or start >= e) for s, e in taken) or any(
                p.statement is not found.plan.statement and _overlaps(self.source.span(p.statement), statement_span)
                for p, _ in plans
            ):
                continue  # the next pass sees it again
            taken.append((start, end))
            plans.append((found.plan, found.finding))
        if not plans:
            return None
        lines = list(self.lines)
        cst_lines = 0
        touched: list[tuple[int, int, str]] = []
        inline = [(p, f) for p, f in plans if self._inline(p)]
        for fix_plan, _ in sorted(inline, key=lambda pair: self.source.span(pair[0].statement), reverse=True):
            touched.append(self._fix_inline(lines, fix_plan))  # right to left: the spans before stay valid
            cst_lines += 1
        pending = [p for p, _ in plans if not any(p is q for q, _ in inline)]
        parents = parent_map(self.blocks)
        statements = list(dict.fromkeys(p.statement for p in pending))
        snippets = _snippets(self.lines, statements, False, parents) if statements else []
        for snippet in sorted(snippets, key=lambda s: -s.first):  # bottom-up: line numbers stay valid
            cst_lines += snippet.last - snippet.first + 1
            mine = [p for p in pending if snippet.first <= p.statement.lineno <= snippet.last]
            if not mine:
                continue
            if not snippet.lossless:
                raise _FixInvalid("LibCST does not reproduce this file byte for byte; not fixed")
            try:
                positions = MetadataWrapper(snippet.module, unsafe_skip_copy=True).resolve(PositionProvider)
                new_module = apply_plans(snippet.module, positions, mine, snippet.line_offset)
            except PlanError as exc:
                raise _FixInvalid(f"a fix could not be applied ({exc}); file left unchanged") from None
            except RecursionError:
                raise _FixInvalid("not fixed: too deeply nested for LibCST") from None
            new_body = snippet.body_of(new_module)
            original_body = "".join(lines[snippet.first - 1 : snippet.last])
            if _comments(new_body) < _comments(original_body):
                raise _FixInvalid("a fix would drop a comment; file left unchanged")
            try:
                _parse_cst(snippet.header + new_body + snippet.sentinel)
            except LintError as exc:
                raise _FixInvalid(f"a fix produced invalid code ({exc}); file left unchanged") from None
            if new_body and not original_body.endswith(("\n", "\r")) and new_body.endswith("\n"):
                new_body = new_body[:-1]  # we added that newline in _frame
            if "\n" not in original_body and "\r" in original_body:
                new_body = new_body.replace("\n", "\r")  # lone-CR lines: LibCST's new ones too
            lines[snippet.first - 1 : snippet.last] = [new_body]
            touched.append((snippet.first, snippet.last, new_body))
        return lines, [f for _, f in plans], cst_lines, touched

    def _inline(self, fix_plan: FixPlan) -> bool:
        """Is ``fix_plan`` an edit inside a simple statement that shares its line with
        other code (``x = 1; flag = flag and grad``)? Its statement alone is then given
        to LibCST, not its lines: on a 1 MB line of ``;``-separated statements LibCST
        parsed, annotated and transformed every one of them (31 s, 1 GB)."""
        statement = fix_plan.statement
        if fix_plan.action not in _EXPRESSION_ACTIONS or isinstance(statement, _COMPOUND):
            return False
        line, column, end_line, end_column = self.source.span(statement)
        before = self.lines[line - 1][:column]
        after = self.lines[end_line - 1][end_column:]
        return bool(before.strip()) or (bool(after.strip()) and not after.lstrip().startswith("#"))

    def _fix_inline(self, lines: list[str], fix_plan: FixPlan) -> tuple[int, int, str]:
        """Carry out ``fix_plan`` on its statement's text alone (see :meth:`_inline`),
        in ``lines`` (the file's lines, changed in place); returns the lines rewritten
        (first, last) and their new text."""
        from libcst.metadata import MetadataWrapper, PositionProvider

        from .fixes import PlanError, apply_plans

        line, column, end_line, end_column = self.source.span(fix_plan.statement)
        original = self.source.text((line, column, end_line, end_column))
        _refuse_libcst(original)

        def shifted(span: tuple[int, int, int, int]) -> tuple[int, int, int, int]:
            first = span[1] - column if span[0] == line else span[1]
            last = span[3] - column if span[2] == line else span[3]
            return (span[0], first, span[2], last)

        moved = replace(
            fix_plan,
            node=shifted(fix_plan.node),
            child=shifted(fix_plan.child) if fix_plan.child is not None else None,
        )
        module = _parse_cst(original + "\n")
        try:
            positions = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
            new_module = apply_plans(module, positions, [moved], line - 1)
        except PlanError as exc:
            raise _FixInvalid(f"a fix could not be applied ({exc}); file left unchanged") from None
        except RecursionError:
            raise _FixInvalid("not fixed: too deeply nested for LibCST") from None
        new = new_module.code
        if not new.endswith("\n") or ("\n" in new[:-1] and "\n" not in original):
            raise _FixInvalid("a fix changed the statement's frame; file left unchanged")
        new = new[:-1]
        if _comments(new) < _comments(original):
            raise _FixInvalid("a fix would drop a comment; file left unchanged")
        head, tail = lines[line - 1][:column], lines[end_line - 1][end_column:]
        lines[line - 1 : end_line] = [head + new + tail]
        return line, end_line, head + new + tail


#: the plans that change an expression inside their statement (see ``_Analysis._inline``)
_EXPRESSION_ACTIONS = frozenset(
    {"remove-operand", "replace-by-child", "remove-element", "remove-argument", "substitute"}
)
_COMPOUND = (ast.If, ast.While, ast.For, ast.AsyncFor, ast.With, ast.AsyncWith, ast.Try, ast.FunctionDef, ast.ClassDef)


def _by_deciding_place(entries: list[Entry], path: str) -> list[list[Entry]]:
    """The findings one grad-mode read makes: one, unless every decision it reaches is
    taken in another module (grad mode handed there), where each deciding predicate
    there is a finding of its own (ZeRO's prefetch loop and its quantized all-gather,
    both gated by the ``grad_mode`` a hook passes in)."""
    places: dict[tuple[str, int], list[Entry]] = {}
    for entry in entries:
        deciding = _deciding_elsewhere(entry, path)
        if deciding is None:
            return [entries]
        places.setdefault((deciding.path, deciding.line), []).append(entry)
    return list(places.values())


def _flags_give_way(by_origin: dict[tuple[str, ast.AST], list[Entry]], path: str) -> None:
    """A flag judged by its name alone (``{"overlap_shared_expert": overlap and grad}``)
    gives way to the decisions another module takes with the value it holds, under any
    rule: its use is seen there, and those are the findings (``by_origin`` is changed)."""
    reads: dict[ast.AST, list[Entry]] = {}
    for (_, origin), entries in by_origin.items():
        reads.setdefault(origin, []).extend(entries)
    for origin, entries in reads.items():
        local = [e for e in entries if _deciding_elsewhere(e, path) is None]
        if len(local) == len(entries) or any(e.decision.kind != FLAG.name for e in local):
            continue
        for key in [k for k in by_origin if k[1] is origin]:
            kept = [e for e in by_origin[key] if _deciding_elsewhere(e, path) is not None]
            if kept:
                by_origin[key] = kept
            else:
                del by_origin[key]


def _deciding_elsewhere(entry: Entry, path: str) -> Place | None:
    """The deciding place of ``entry``'s decision where it is in another module, else None."""
    via = entry.decision.via
    deciding = next((p for p in via if p.decides), via[-1]) if via else None
    return deciding if deciding is not None and deciding.path != path else None


def _numerics(entry: Entry) -> bool:
    """Is the entry's decision a choice of numerics (a kernel's argument, the callee)?"""
    return kind_of(entry.decision.kind).intent == "numerics"


#: lines on each side of a fix's lines that :func:`_edit_near` compares with them
_EDIT_WINDOW = 32


def _edit_near(lines: list[str], first: int, last: int, new: str) -> Edit | None:
    """The :class:`Edit` of a file whose lines ``first``..``last`` (of ``lines``) become
    ``new``, as :func:`_edit` of the whole file would give it, found in a window of
    :data:`_EDIT_WINDOW` lines around them; None where the common prefix runs to the
    window's end (the file's might run further; its suffix cannot cross the prefix)."""
    low, high = max(1, first - _EDIT_WINDOW), min(len(lines), last + _EDIT_WINDOW)
    old = "".join(lines[low - 1 : high])
    changed = "".join(lines[low - 1 : first - 1]) + new + "".join(lines[last:high])
    edit = _edit(old, changed, ends_file=high == len(lines))
    if edit is None:
        return None
    return replace(edit, line=edit.line + low - 1, end_line=edit.end_line + low - 1)


@overload
def _edit(old: str, new: str) -> Edit: ...
@overload
def _edit(old: str, new: str, ends_file: bool) -> Edit | None: ...
def _edit(old: str, new: str, ends_file: bool = True) -> Edit | None:
    """The one region where ``new`` differs from ``old``, as an :class:`Edit`. Where
    ``old`` does not end the file (``ends_file`` False), None when one of them is a
    prefix of the other (the common prefix might run on into what follows) or their
    last characters differ (the end would be spelled at another line than the file's)."""
    from .source import common_prefix, common_suffix

    start = common_prefix(old, new)
    if start == min(len(old), len(new)) and not ends_file:
        return None
    end = common_suffix(old, new, min(len(old), len(new)) - start)
    if end == 0 and not ends_file:
        return None  # (the end of the window is the start of the line after it in the file)

    starts = [0]
    for piece in split_lines(old):
        starts.append(starts[-1] + len(piece))

    def position(offset: int) -> tuple[int, int]:
        import bisect

        line = max(1, bisect.bisect_right(starts, offset) if offset < starts[-1] else len(starts) - 1)
        return line, offset - starts[line - 1] + 1

    line, column = position(start)
    end_line, end_column = position(len(old) - end)
    return Edit(line, column, end_line, end_column, new[start : len(new) - end])


def _overlaps(a: tuple[int, int, int, int], b: tuple[int, int, int, int]) -> bool:
    return not (a[2] < b[0] or b[2] < a[0])


def _comments(text: str) -> int:
    import io
    import tokenize

    try:
        lines = io.StringIO(text, newline=None).readline  # a lone CR ends a line too
        return sum(t.type == tokenize.COMMENT for t in tokenize.generate_tokens(lines))
    except (tokenize.TokenError, SyntaxError):
        return text.count("#")


def _deciding_read_of_capture(
    origin: ast.AST, name: str | None, entries: list[Entry], function: ast.AST | None
) -> ast.AST:
    """Where a finding on ``origin`` is shown: ``origin`` itself, but for a pure capture
    into the local ``name`` (:func:`_captured_into`: ``overlap = torch.is_grad_enabled()``;
    a default: ``async_op = torch.is_grad_enabled() if async_op is None else async_op``,
    ``getattr(self, "drop", torch.is_grad_enabled())``) that the forward decides with
    later: the first read of the local in a decision's predicate or its call (``if
    overlap:``, ``redistribute(..., async_op=async_op)``), else in any later predicate of
    ``function``. The fix stays at the capture."""
    statement = entries[0].statement
    if function is None or name is None:
        return origin

    def reads(nodes: list[ast.AST]) -> list[ast.expr]:
        return [
            read
            for node in nodes
            for read in ast.walk(node)
            if isinstance(read, (ast.Name, ast.Attribute))
            and isinstance(read.ctx, ast.Load)
            and read.lineno > statement.lineno
            and dotted(read) == name
        ]

    deciding: list[ast.AST] = []
    for entry in entries:
        node = entry.decision.node
        if isinstance(node, (ast.If, ast.While, ast.IfExp)):
            deciding.append(node.test)
        elif isinstance(node, ast.Call):
            deciding += [*node.args, *(k.value for k in node.keywords)]
    found = reads(deciding) or reads(
        [n.test for n in ast.walk(function) if isinstance(n, (ast.If, ast.While, ast.IfExp))]
    )
    return min(found, key=lambda r: (r.lineno, r.col_offset)) if found else origin


def _passes_on(entry: Entry, read: ast.AST, held: str | None) -> bool:
    """Does ``entry``'s decision hand grad mode itself (the ``read``, or the local
    ``held`` capturing it) to a function that decides with it?"""
    call = entry.decision.node
    return (
        bool(entry.decision.via)
        and isinstance(call, ast.Call)
        and any(
            read is a or (held is not None and dotted(a) == held)
            for a in (*call.args, *(k.value for k in call.keywords))
        )
    )


def _captured_into(statement: ast.stmt, origin: ast.AST) -> str | None:
    """The local ``statement`` captures grad mode (the read ``origin``) into, purely or as
    a default (:func:`_captures`), or the mapping it sets grad mode as the default entry
    of (``kwargs.setdefault("apply_bias", torch.is_grad_enabled())``); None where it does
    something else with it."""
    if isinstance(statement, ast.Assign) and len(statement.targets) == 1 and _captures(statement.value, origin):
        # a local, or the object's attribute (`self._overlap_ok = torch.is_grad_enabled()`)
        return _held_name(statement.targets[0])
    call = statement.value if isinstance(statement, ast.Expr) else None
    if (
        isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and call.func.attr == "setdefault"
        and isinstance(call.func.value, ast.Name)
        and _captures(call, origin)
    ):
        return call.func.value.id
    return None


def _held_name(target: ast.expr) -> str | None:
    """The name a capture's target spells: a local (``overlap``) or an attribute of an
    object a name holds (``self._overlap_ok``, ``state._prefetch_decided``); None for
    anything else."""
    return dotted(target) if isinstance(target, (ast.Name, ast.Attribute)) else None


def _captures(value: ast.expr, origin: ast.AST) -> bool:
    """Is ``value`` grad mode (``origin``) itself, or grad mode as a default: a branch of
    a conditional whose other branch is a name (``grad if x is None else x``), the
    default of ``getattr`` or of a mapping's ``get``/``pop``/``setdefault``?"""
    if value is origin:
        return True
    if isinstance(value, ast.IfExp):
        return (value.body is origin and isinstance(value.orelse, ast.Name)) or (
            value.orelse is origin and isinstance(value.body, ast.Name)
        )
    if isinstance(value, ast.Call) and value.args and value.args[-1] is origin and not value.keywords:
        name = value.func.id if isinstance(value.func, ast.Name) else getattr(value.func, "attr", "")
        return (name == "getattr" and len(value.args) == 3) or (
            name in ("get", "pop", "setdefault") and len(value.args) == 2
        )
    return False


def lint_source(
    path: str,
    data: bytes,
    config: Config,
    fix: bool = False,
    prefilter: bool = True,
    unsafe_fixes: bool = False,
    edits: bool = False,
    project: Project | None = None,
    also: frozenset[bytes] = frozenset(),
    parse: Callable[[str], ast.Module] = ast.parse,
    known: Callable[[Finding], bool] | None = None,
) -> FileResult:
    """Lint (and optionally fix) ``data``, the bytes of the file ``path``.

    ``unsafe_fixes`` applies the unsafe fixes too; ``edits`` gives each finding with a
    fix its text edit (LibCST is then imported for files that have one); ``parse``
    makes the tree of the decoded text (``ast.parse``; the language server splices the
    tree of a buffer's previous text, :class:`~gradgate.model.splice.Reparser`); ``known``
    says which findings a fix leaves alone (a baseline's: reported, not fixable). Never raises
    for a file's content: a file that cannot be analysed or fixed is a result with
    ``error`` set.
    """
    try:
        encoding = decode_check(data)
    except SourceError as exc:
        return FileResult(path, error=str(exc), source=data)
    if prefilter and not may_hold_findings(data, config, also):
        return FileResult(path, source=data, stage="prefilter")
    if len(data) > MAX_FILE_BYTES:  # the per-file memory bound (docs/limits.md)
        size = f"{len(data) / 1e6:.1f} MB, over the per-file bound of {MAX_FILE_BYTES // 1_000_000} MB"
        return FileResult(path, source=data, stage="ast", notices=(Notice(path, 0, f"file not analysed ({size})"),))
    rules = selected_rules(config)
    text = data.decode(encoding)
    try:
        analysis = _Analysis(path, text, config, rules, whole=not prefilter, project=project, parse=parse, known=known)
    except LintError as exc:
        return FileResult(path, error=str(exc), source=data)
    except (BudgetExceeded, RecursionError, MemoryError) as exc:  # the last guard: a notice, never a crash
        reason = "too large for the model's budget" if isinstance(exc, BudgetExceeded) else type(exc).__name__
        return FileResult(path, source=data, stage="ast", notices=(Notice(path, 0, f"file not analysed ({reason})"),))
    if edits and not fix:
        analysis.with_edits()
    remaining = tuple(f.finding for f in analysis.found)
    dependencies = tuple(sorted(analysis.model.dependencies))
    exports = analysis.model.exports
    notices = tuple(analysis.notices)
    if not fix or not analysis.fixable(unsafe_fixes):
        return FileResult(
            path,
            remaining,
            source=data,
            stage="ast",
            suppressed=tuple(analysis.suppressed),
            dependencies=dependencies,
            exports=exports,
            notices=notices,
        )
    passes = [analysis]  # _fix holds the only reference: each pass's tree and model are freed
    del analysis  # before the next pass parses and analyses the fixed text
    try:
        final, current, fixed_findings, cst_lines = _fix(
            path, text, passes, config, rules, prefilter, unsafe_fixes, project, known
        )
    except LintError as exc:
        return FileResult(path, remaining, error=str(exc), source=data, stage="fix", notices=notices)
    except (BudgetExceeded, RecursionError, MemoryError) as exc:
        reason = f"a fix pass gave up ({type(exc).__name__}); file left unchanged"
        return FileResult(path, remaining, source=data, stage="fix", notices=(*notices, Notice(path, 0, reason)))
    notices = tuple(dict.fromkeys((*notices, *final.notices)))
    if current == text:
        return FileResult(
            path, tuple(f.finding for f in final.found), source=data, stage="fix", cst_lines=cst_lines, notices=notices
        )
    from .source import encode_fixed

    return FileResult(
        path,
        tuple(f.finding for f in final.found),
        source=data,
        fixed=encode_fixed(data, text, current, encoding),
        fixed_findings=tuple(fixed_findings),
        stage="fix",
        cst_lines=cst_lines,
        notices=notices,
    )


def attach_edits(result: FileResult, config: Config) -> FileResult:
    """``result`` with each fixable finding's text :class:`Edit` (what editors and
    SARIF consumers apply); a check leaves them out, so that it never needs LibCST."""
    if result.error is not None or not any(f.applicability for f in result.findings):
        return result
    data = result.source
    if data is None:  # a cached result: a warm run reads no file it need not
        try:
            data = read_source(result.path).data
        except SourceError:
            return result
    edited = lint_source(result.path, data, config, edits=True)
    if edited.error is not None:  # (per-file-ignores may have dropped some of edited's findings)
        return result
    from .records import replace

    by_place = {(f.line, f.column, f.rule): f.edit for f in edited.findings}
    findings = tuple(replace(f, edit=by_place.get((f.line, f.column, f.rule))) for f in result.findings)
    return replace(result, findings=findings)


def _fix(
    path: str,
    text: str,
    passes: list[_Analysis],
    config: Config,
    rules: Sequence[type[Rule]],
    prefilter: bool,
    unsafe_fixes: bool,
    project: Project | None = None,
    known: Callable[[Finding], bool] | None = None,
) -> tuple[_Analysis, str, list[Finding], int]:
    """The passes of fixes; ``passes`` holds the first analysis, taken out here so that
    one pass's tree and model are garbage before the next pass builds its own (on a
    100,000-line file each is a few hundred MB)."""
    analysis = passes.pop()
    current = text
    fixed_findings: list[Finding] = []
    cst_lines = 0
    for _ in range(MAX_FIX_PASSES):
        chosen = analysis.fixable(unsafe_fixes)
        if not chosen:
            break
        outcome = analysis.fixed_text(chosen)
        if outcome is None:
            break
        candidate, applied, parsed = outcome
        cst_lines += parsed
        expected, total = len(chosen), len(analysis.found)
        # the next pass's tree: this one's, with the statements the fix changed parsed again
        tree = spliced_tree(analysis.tree, current, candidate)
        del analysis, chosen, outcome  # freed here (no cycle holds them); ``applied`` has the findings
        if project is not None:
            project.forget(path)  # the project's reference to this pass's tree too
        try:
            next_analysis = _Analysis(
                path, candidate, config, rules, whole=not prefilter, project=project, tree=tree, known=known
            )
        except LintError as exc:
            raise _FixInvalid(f"a fix produced invalid code ({exc}); file left unchanged") from None
        if odd_layout(candidate):  # a fix spliced in is re-read by LibCST whole
            _reparse_whole(candidate, current)
        # progress: fewer fixable findings, or fewer findings (a fix can make another
        # finding's fix safe: the count of fixable ones then stays, the total falls)
        if len(next_analysis.fixable(unsafe_fixes)) >= expected and len(next_analysis.found) >= total:
            raise _FixInvalid("a fix did not remove its finding; file left unchanged")
        current, analysis = candidate, next_analysis
        fixed_findings.extend(applied)
    return analysis, current, fixed_findings, cst_lines


def _reparse_whole(fixed: str, before: str) -> None:
    if text_refusal(before) is not None:
        return  # LibCST must not be handed this file (cstguard); CPython re-read the fix
    try:
        _parse_cst(fixed)
    except LintError as exc:
        try:
            _parse_cst(before)
        except LintError:
            return  # LibCST could not read the file before the fix either
        raise _FixInvalid(f"a fix produced code LibCST cannot read ({exc}); file left unchanged") from None


def lint_file(
    path: str, config: Config, fix: bool = False, prefilter: bool = True, unsafe_fixes: bool = False
) -> FileResult:
    """:func:`lint_source` on the file at ``path`` (read, never written): the one-file
    entry for library users; many files go through :func:`gradgate.runner.run`."""
    try:
        source = read_source(path)
    except SourceError as exc:
        return FileResult(path, error=str(exc))
    return lint_source(path, source.data, config, fix=fix, prefilter=prefilter, unsafe_fixes=unsafe_fixes)
