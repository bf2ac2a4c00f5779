"""What a fix does, decided on the stdlib tree: which node goes, which stays.

A fix sets the grad-mode read to its grad-on value and simplifies what that makes
neutral: an ``and`` operand that is now True (an ``or`` operand now False) goes with
its operator, ``x if grad else False`` keeps ``x``, an ``if`` whose test is now True
keeps its body, one now False keeps its ``else`` (or goes), ``flag &= grad`` goes. A
statement left as ``x = x`` goes instead. Where the simplification has no such form,
or would drop a comment, there is no plan and the finding is report-only. LibCST only
carries a plan out (:mod:`gradgate.fixes`); it decides nothing.
"""

from __future__ import annotations

import ast

from ..records import record
from .analysis import parents_of
from .index import dotted
from .lines import split_lines

#: a span: first line, first column, last line, end column (1-based lines, 0-based
#: columns counted in characters, end exclusive)
Span = tuple[int, int, int, int]


#: a statement larger than this is not rewritten (LibCST takes seconds and a gigabyte
#: on a 200,000-element literal that CPython compiles in 0.3 s)
MAX_STATEMENT_CHARS = 100_000
MAX_STATEMENT_LINES = 5_000


@record
class FixPlan:
    #: the statement a fix is parsed and spliced with (an ``elif`` needs its ``if``)
    statement: ast.stmt
    #: remove-operand, replace-by-child, remove-element, remove-argument, keep-body,
    #: keep-orelse, remove-statement, substitute
    action: str
    node: Span
    child: Span | None = None
    #: the ``if`` acted on is an ``elif`` (it sits in its parent's ``orelse``)
    elif_clause: bool = False
    #: substitute: the expression put in the node's place (``self.training``)
    text: str = ""


def odd_layout(text: str) -> bool:
    """Form feeds or lone CRs: where LibCST's tokenizer, CPython's and a count of "\\n"
    may part on what a line is. A fix spliced into such a file is re-read by LibCST
    whole (elsewhere the spliced statements are, which is what keeps a fix of a
    100,000-line file cheap), and its next pass's tree is parsed whole too."""
    return "\x0c" in text or "\r" in text.replace("\r\n", "")


class SourceLines:
    """The file's lines, for positions in characters and for comments."""

    def __init__(self, text: str, tree: ast.Module | None = None, lines: list[str] | None = None) -> None:
        """``lines``: :func:`split_lines` of ``text``, where the caller has them."""
        self.lines = lines if lines is not None else split_lines(text)
        self._encoded: dict[int, bytes] = {}
        self._comment_cache: dict[tuple[int, int], set[tuple[int, int]]] = {}
        self._tops = list(tree.body) if tree is not None else []
        self._text = text

    def column(self, line: int, byte_column: int) -> int:
        if not 1 <= line <= len(self.lines):
            return byte_column
        encoded = self._encoded.get(line)
        if encoded is None:
            encoded = self._encoded[line] = self.lines[line - 1].encode("utf-8", "surrogatepass")
        if encoded.isascii():
            return byte_column
        return len(encoded[:byte_column].decode("utf-8", "replace"))

    def span(self, node: ast.AST) -> Span:
        # ast.AST declares no positions; every node this is asked about has them
        line, column = node.lineno, node.col_offset  # type: ignore[attr-defined]
        end_line, end_column = node.end_lineno or line, node.end_col_offset or 0  # type: ignore[attr-defined]
        return (line, self.column(line, column), end_line, self.column(end_line, end_column))

    def comment_between(self, start: tuple[int, int], end: tuple[int, int]) -> bool:
        """Is there a comment token from ``start`` (inclusive) to ``end`` (exclusive)?
        Only the lines of the top-level statements the range touches are tokenized, and
        only when those of the range spell a ``#`` at all."""
        import bisect

        if not any("#" in line for line in self.lines[max(0, start[0] - 1) : end[0]]):
            return False

        tops = self._tops
        first = max(0, bisect.bisect_right([s.lineno for s in tops], start[0]) - 1) if tops else 0
        low = (tops[first - 1].end_lineno or 0) + 1 if first > 0 and tops else 1
        last = first
        while last + 1 < len(tops) and tops[last + 1].lineno <= end[0]:
            last += 1
        high = max(end[0], (tops[last].end_lineno or 0) if tops else len(self.lines))
        if start[0] < low:
            low = 1
        comments = self._comments_in(low, min(high, len(self.lines)))
        return any(start <= c < end for c in comments)

    def _comments_in(self, low: int, high: int) -> set[tuple[int, int]]:
        key = (low, high)
        found = self._comment_cache.get(key)
        if found is None:
            import io
            import tokenize

            found = set()
            chunk = "".join(self.lines[low - 1 : high])
            try:
                # newline=None: a lone CR ends a line, as CPython's tokenizer has it
                for token in tokenize.generate_tokens(io.StringIO(chunk, newline=None).readline):
                    if token.type == tokenize.COMMENT:
                        found.add((token.start[0] + low - 1, token.start[1]))
            except (tokenize.TokenError, SyntaxError, IndentationError):
                found.add((low, 0))  # cannot tell: assume a comment (no fix is the safe side)
                found.add((high, 0))
            self._comment_cache[key] = found
        return found

    def text(self, span: Span) -> str:
        line, column, end_line, end_column = span
        if line == end_line:
            return self.lines[line - 1][column:end_column]
        parts = [self.lines[line - 1][column:], *self.lines[line : end_line - 1], self.lines[end_line - 1][:end_column]]
        return "".join(parts)


def plan(
    target: ast.AST,
    value: int,
    statement: ast.stmt,
    block_of: BlockIndex,
    source: SourceLines,
    fixed_too: frozenset[ast.AST] = frozenset(),
    decided: frozenset[ast.AST | str] | None = None,
) -> FixPlan | None:
    """The plan that sets ``target`` (a grad-mode expression) to ``value`` inside
    ``statement``, or None (report only). ``block_of`` finds the node and list holding
    a statement; ``fixed_too`` are the other reads the same fix run sets (a chain of
    nothing but them has nothing left to keep: report only). ``decided``: the nodes of
    the decisions the read gates (a flag's statement, a collective's call): an ``if``
    is dropped only where what else its branches do is plain assignment, so that the
    fix changes the gated decision and nothing else (None: not asked)."""
    span = source.span(statement)
    if span[2] - span[0] > MAX_STATEMENT_LINES or len(source.text(span)) > MAX_STATEMENT_CHARS:
        return None  # LibCST on it would cost far more than the check: report only
    if "\r\x0c" in "".join(source.lines[max(span[0] - 2, 0) : span[2] + 1]):
        return None  # a form feed after a lone CR: LibCST's tokenizer and CPython's part there
    parents = parents_of(statement, target)
    parent = parents.get(target)
    if _comment_inside(target, source):
        return None
    if isinstance(parent, ast.BoolOp):
        neutral = 1 if isinstance(parent.op, ast.And) else 0
        if value != neutral:  # the whole chain takes the value: simplify around it
            if _comment_inside(parent, source):
                return None
            return plan(parent, value, statement, block_of, source, fixed_too)
        if all(v is target or v in fixed_too for v in parent.values):
            return None  # every operand is a grad-mode read: nothing to keep
        if any(v is not target and v in fixed_too for v in parent.values) and _comment_inside(parent, source):
            return None  # reads removed one after another could each need the commented side
        return _remove_operand(parent, target, statement, block_of, source)
    if isinstance(parent, ast.IfExp) and parent.test is target:
        kept = parent.body if value else parent.orelse
        return _replace(parent, kept, statement, block_of, source)
    if isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name) and not parent.keywords:
        name = parent.func.id
        if name in ("min", "max") and len(parent.args) >= 2 and value == (1 if name == "min" else 0):
            if len(parent.args) == 2:
                other = parent.args[1] if parent.args[0] is target else parent.args[0]
                return _replace(parent, other, statement, block_of, source)
            return FixPlan(statement, "remove-argument", source.span(parent), source.span(target))
    if isinstance(parent, (ast.List, ast.Tuple)):
        call = parents_of(statement, parent).get(parent)
        if (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Name)
            and call.func.id in ("all", "any")
            and len(call.args) == 1
            and value == (1 if call.func.id == "all" else 0)
            and len(parent.elts) >= (3 if isinstance(parent, ast.Tuple) else 2)
        ):
            return FixPlan(statement, "remove-element", source.span(parent), source.span(target))
        return None
    if parent is statement:
        if isinstance(statement, ast.If) and decided is not None and not _only_the_gate(statement, decided):
            return None  # `if not grad: flag = False; cache.clear()`: the cache must stay gated
        return _statement_plan(statement, target, value, block_of, source)
    return None


def _only_the_gate(statement: ast.If, decided: frozenset[ast.AST | str]) -> bool:
    """Is every statement of the ``if``'s branches a decision the read gates (a node of
    ``decided``, or a store of a flag it names), or a plain assignment that calls nothing?
    Then dropping the test changes the gated decision only."""
    # another form of a decided collective (`all_reduce(x)` beside `all_reduce(x, async_op=True)`)
    forms = {ast.dump(n.func) for n in decided if isinstance(n, ast.Call)}
    for branch in (statement.body, statement.orelse):
        for child in branch:
            if isinstance(child, ast.Pass) or child in decided:
                continue
            if any(node in decided for node in ast.walk(child)):
                continue
            calls = [n for n in ast.walk(child) if isinstance(n, ast.Call)]
            if calls and all(ast.dump(c.func) in forms for c in calls):
                continue
            targets = (
                child.targets
                if isinstance(child, ast.Assign)
                else [child.target]
                if isinstance(child, (ast.AnnAssign, ast.AugAssign))
                else []
            )
            if targets and all((dotted(t) or "").rsplit(".", 1)[-1] in decided for t in targets):
                continue  # the decided flag's own store (`flag = f(x)` under `if grad:`)
            if isinstance(child, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and not any(
                isinstance(node, (ast.Call, ast.Await, ast.Yield, ast.YieldFrom)) for node in ast.walk(child)
            ):
                continue
            return False
    return True


def substitute(target: ast.AST, text: str, statement: ast.stmt, source: SourceLines) -> FixPlan | None:
    """The plan that puts the expression ``text`` in the place of the grad-mode read
    ``target`` (grad mode standing in for training mode: ``self.training``)."""
    if _comment_inside(target, source):
        return None
    return FixPlan(statement, "substitute", source.span(target), text=text)


def _comment_inside(node: ast.AST, source: SourceLines) -> bool:
    line, column, end_line, end_column = source.span(node)
    return source.comment_between((line, column), (end_line, end_column))


def _replace(
    node: ast.AST,
    kept: ast.AST,
    statement: ast.stmt,
    block_of: BlockIndex,
    source: SourceLines,
) -> FixPlan | None:
    outer, inner = source.span(node), source.span(kept)
    if source.comment_between(outer[:2], inner[:2]) or source.comment_between(inner[2:], outer[2:]):
        return None
    if _is_self_assignment(statement, node, kept) and _removable_self_assignment(statement, block_of):
        return _statement_removal(statement, block_of, source)
    return FixPlan(statement, "replace-by-child", outer, inner)


def _remove_operand(
    chain: ast.BoolOp,
    operand: ast.AST,
    statement: ast.stmt,
    block_of: BlockIndex,
    source: SourceLines,
) -> FixPlan | None:
    values = chain.values
    index = values.index(operand)  # type: ignore[arg-type]
    span = source.span(operand)
    before = source.span(values[index - 1])[2:] if index > 0 else None
    after = source.span(values[index + 1])[:2] if index + 1 < len(values) else None
    clean_before = before is not None and not source.comment_between(before, span[:2])
    clean_after = after is not None and not source.comment_between(span[2:], after)
    if not (clean_before or clean_after):
        return None
    if (
        len(values) == 2
        and _is_self_assignment(statement, chain, values[1 - index])
        and _removable_self_assignment(statement, block_of)
    ):
        return _statement_removal(statement, block_of, source)
    return FixPlan(statement, "remove-operand", source.span(chain), span)


def _is_self_assignment(statement: ast.stmt, value: ast.AST, kept: ast.AST) -> bool:
    """Would ``statement`` become ``x = x`` with ``value`` reduced to ``kept``?"""
    if isinstance(statement, (ast.Assign, ast.AnnAssign)) and statement.value is value:
        targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
        return len(targets) == 1 and ast.dump(targets[0], include_attributes=False).replace(
            "ctx=Store()", "ctx=Load()"
        ) == ast.dump(kept, include_attributes=False)
    return False


def _removable_self_assignment(statement: ast.stmt, block_of: BlockIndex) -> bool:
    """Can ``x = x`` go? At a module's top level the name read is the one bound (a
    module's names may come from anywhere: a star import, the caller's globals), so
    yes. In a function ``x = x`` reads the local ``x``: where neither a parameter nor a
    line before binds it, it raises ``UnboundLocalError``, and it stays. In a class body
    it reads the enclosing scope's ``x`` and binds a class attribute: it goes only where
    the class body bound ``x`` before it."""
    scope = block_of.scope_of(statement)
    target = statement.targets[0] if isinstance(statement, ast.Assign) else getattr(statement, "target", None)
    if not isinstance(target, ast.Name) or isinstance(scope, ast.Module):
        return True  # `obj.x = obj.x` stores where it reads
    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
        arguments = scope.args
        parameters = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs, arguments.vararg, arguments.kwarg]
        if any(a is not None and a.arg == target.id for a in parameters):
            return True
    return _bound_before(scope, target.id, statement)


def _bound_before(scope: ast.AST, name: str, statement: ast.stmt) -> bool:
    """Does the body of ``scope`` (a class, a function, a module; not its functions' or
    nested classes') bind ``name`` on a line before ``statement``?"""
    stack: list[ast.AST] = list(getattr(scope, "body", []))
    while stack:
        node = stack.pop()
        if node is statement or getattr(node, "lineno", 0) >= statement.lineno:
            continue
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if node.name == name:
                return True
            continue  # their bodies are scopes of their own
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and node.id == name:
            return True
        if isinstance(node, ast.alias) and (node.asname or node.name.split(".")[0]) == name:
            return True
        if isinstance(node, (ast.Lambda, ast.GeneratorExp, ast.ListComp, ast.SetComp, ast.DictComp)):
            continue
        stack.extend(ast.iter_child_nodes(node))
    return False


def _statement_plan(
    statement: ast.stmt,
    target: ast.AST,
    value: int,
    block_of: BlockIndex,
    source: SourceLines,
) -> FixPlan | None:
    if isinstance(statement, ast.If) and statement.test is target:
        holder, _block = block_of.get(statement, (None, []))
        elif_clause = (
            isinstance(holder, ast.If)
            and holder.orelse == [statement]
            and source.lines[statement.lineno - 1].lstrip().startswith("elif")
        )
        top = _top_if(statement, block_of, source) if elif_clause else statement
        test_span = source.span(statement.test)
        header_end = (statement.body[0].lineno, 0)
        if (
            source.comment_between(test_span[:2], (test_span[0], len(source.lines[test_span[0] - 1])))
            and statement.body[0].lineno == test_span[2]
        ):
            return None  # `if grad: x = 1  # comment` on one line
        if value:
            if statement.orelse and _has_comment_in(statement.orelse, source, else_header=statement):
                return None
            return FixPlan(top, "keep-body", source.span(statement), elif_clause=elif_clause)
        if _has_comment_in(statement.body, source) or source.comment_between(test_span[:2], header_end):
            return None
        if statement.orelse:
            return FixPlan(top, "keep-orelse", source.span(statement), elif_clause=elif_clause)
        if elif_clause:
            return FixPlan(top, "keep-orelse", source.span(statement), elif_clause=True)
        return _statement_removal(statement, block_of, source)
    if isinstance(statement, ast.AugAssign) and statement.value is target:
        if value == (1 if isinstance(statement.op, ast.BitAnd) else 0) and isinstance(
            statement.op, (ast.BitAnd, ast.BitOr)
        ):
            return _statement_removal(statement, block_of, source)
        return None
    if isinstance(statement, ast.While) and statement.test is target and not value and not statement.orelse:
        if _has_comment_in(statement.body, source):
            return None
        return _statement_removal(statement, block_of, source)
    return None


def _top_if(statement: ast.If, block_of: BlockIndex, source: SourceLines) -> ast.stmt:
    node: ast.stmt = statement
    while True:
        holder, _ = block_of.get(node, (None, []))
        if (
            isinstance(holder, ast.If)
            and holder.orelse == [node]
            and source.lines[node.lineno - 1].lstrip().startswith("elif")
        ):
            node = holder
        else:
            return node


def _has_comment_in(block: list[ast.stmt], source: SourceLines, else_header: ast.If | None = None) -> bool:
    if not block:
        return False
    start = (block[0].lineno, 0)
    if else_header is not None:  # from the end of the body: the `else:` line too
        last = else_header.body[-1]
        start = (
            last.end_lineno or last.lineno,
            source.column(last.end_lineno or last.lineno, last.end_col_offset or 0),
        )
    end_node = block[-1]
    end = (end_node.end_lineno or end_node.lineno, len(source.lines[(end_node.end_lineno or end_node.lineno) - 1]))
    return source.comment_between(start, end)


def _statement_removal(statement: ast.stmt, block_of: BlockIndex, source: SourceLines) -> FixPlan | None:
    """Remove ``statement``; its own comments would go with it (no plan then), the
    comment lines above it move to the next statement (no plan when there is none)."""
    span = source.span(statement)
    end_line = span[2]
    if source.comment_between(span[:2], (end_line, len(source.lines[end_line - 1]))):
        return None
    holder, block = block_of.get(statement, (None, []))
    position = next((i for i, s in enumerate(block) if s is statement), -1)
    previous_end = (
        block[position - 1].end_lineno
        if position > 0
        else (getattr(holder, "lineno", 0) if holder is not None and not isinstance(holder, ast.Module) else 0)
    )
    has_leading = source.comment_between(((previous_end or 0) + 1, 0), (statement.lineno, 0))
    if has_leading and position + 1 >= len(block):
        return None
    if len(block) == 1 and not isinstance(holder, ast.Module):
        return FixPlan(statement, "pass-statement", span)
    return FixPlan(statement, "remove-statement", span)


class BlockIndex:
    """Which node and list (block) hold a statement, found on demand by descending from
    the module along the statement's lines: the cost is the path's, not the file's."""

    def __init__(self, tree: ast.Module) -> None:
        self._tree = tree
        self._found: dict[ast.stmt, tuple[ast.AST, list[ast.stmt]]] = {}
        #: the first lines of each block's statements, by the block's id (a module of
        #: 9,000 functions asks its top level for each finding)
        self._starts: dict[int, list[int]] = {}

    def _lines_of(self, block: list[ast.stmt]) -> list[int]:
        starts = self._starts.get(id(block))
        if starts is None:
            starts = self._starts[id(block)] = [s.lineno for s in block]
        return starts

    def get(
        self, statement: ast.stmt, default: tuple[ast.AST | None, list[ast.stmt]] = (None, [])
    ) -> tuple[ast.AST | None, list[ast.stmt]]:
        found = self._found.get(statement)
        if found is None:
            found = self._descend(statement)
            if found is None:
                return default
            self._found[statement] = found
        return found

    def _descend(self, statement: ast.stmt) -> tuple[ast.AST, list[ast.stmt]] | None:
        import bisect

        line = statement.lineno
        node: ast.AST = self._tree
        for _ in range(1000):
            chosen = None
            for block in _blocks_of(node):
                at = bisect.bisect_right(self._lines_of(block), line) - 1
                for candidate in block[max(at, 0) : at + 2] if at >= 0 else ():
                    if candidate is statement:
                        return node, block
                    if candidate.lineno <= line <= (candidate.end_lineno or candidate.lineno):
                        chosen = candidate
                if chosen is not None:
                    break
            if chosen is None:
                return None
            node = chosen
        return None

    def scope_of(self, statement: ast.stmt) -> ast.AST:
        """The innermost function, class or module whose body holds ``statement``."""
        scope: ast.AST = self._tree
        node: ast.AST = self._tree
        line = statement.lineno
        for _ in range(1000):
            inner = self._child_holding(node, line)
            if inner is None or inner is statement:
                return scope
            if isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                scope = inner
            node = inner
        return scope

    def _child_holding(self, node: ast.AST, line: int) -> ast.AST | None:
        """The statement, handler or case directly under ``node`` whose lines hold
        ``line``: the module's top level by bisection, other nodes (a few children) by
        a scan."""
        if isinstance(node, ast.Module):
            import bisect

            at = bisect.bisect_right(self._lines_of(node.body), line) - 1
            candidates: list[ast.AST] = list(node.body[at : at + 1]) if at >= 0 else []
        else:
            candidates = list(ast.iter_child_nodes(node))
        return next(
            (
                c
                for c in candidates
                if isinstance(c, (ast.stmt, ast.excepthandler, ast.match_case))
                and getattr(c, "lineno", getattr(getattr(c, "pattern", None), "lineno", 0))
                <= line
                <= (getattr(c, "end_lineno", None) or line)
            ),
            None,
        )

    def holder(self, statement: ast.stmt) -> ast.stmt | None:
        """The statement whose block holds ``statement`` (None at the top level)."""
        holder, _ = self.get(statement)
        while holder is not None and not isinstance(holder, ast.stmt) and not isinstance(holder, ast.Module):
            holder = None  # an except handler or a match case: widen through its statement
        return holder if isinstance(holder, ast.stmt) else None


def _blocks_of(node: ast.AST) -> list[list[ast.stmt]]:
    out: list[list[ast.stmt]] = []
    for name in ("body", "orelse", "finalbody"):
        block = getattr(node, name, None)
        if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
            out.append(block)
    for name in ("handlers", "cases"):
        for child in getattr(node, name, None) or ():
            if child.body:
                out.append(child.body)
    return out


class _ParentMap:
    """``BlockIndex`` as the statement -> enclosing statement mapping snippets widen by."""

    def __init__(self, index: BlockIndex) -> None:
        self._index = index

    def __contains__(self, statement: object) -> bool:
        return isinstance(statement, ast.stmt) and self._index.holder(statement) is not None

    def __getitem__(self, statement: ast.stmt) -> ast.stmt:
        holder = self._index.holder(statement)
        if holder is None:
            raise KeyError(statement)
        return holder


def parent_map(index: BlockIndex) -> _ParentMap:
    return _ParentMap(index)
