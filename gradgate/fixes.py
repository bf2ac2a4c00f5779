"""Carry out fix plans (:mod:`gradgate.model.fixplan`) with LibCST, byte for byte.

The plans were decided on the stdlib tree; here each one finds its nodes in the LibCST
tree of the statement by their spans and swaps them. Every other byte (parentheses,
line breaks, comments) stays where it was: an ``if`` whose body is kept moves the
comment of its header line above the first kept statement, and a removed statement
hands the comment lines above it to the statement that follows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, cast

from . import lazycst as cst
from .boolchain import remove_operand, rewrap
from .model.fixplan import FixPlan, Span

if TYPE_CHECKING:
    from libcst.metadata import CodeRange


N = TypeVar("N", bound="cst.CSTNode")


class PlanError(Exception):
    """A plan's nodes were not found where the stdlib tree put them."""


def _child(plan: FixPlan) -> Span:
    if plan.child is None:
        raise PlanError(f"{plan.action} without the node it keeps or removes")
    return plan.child


def _covers(where: CodeRange, span: Span, offset: int) -> bool:
    start = (where.start.line + offset, where.start.column)
    end = (where.end.line + offset, where.end.column)
    return start <= (span[0], span[1]) and (span[2], span[3]) <= end


def _inside(where: CodeRange, span: Span, offset: int) -> bool:
    start = (where.start.line + offset, where.start.column)
    end = (where.end.line + offset, where.end.column)
    return (span[0], span[1]) <= start and end <= (span[2], span[3])


def _size(where: CodeRange) -> tuple[int, int]:
    return (where.end.line - where.start.line, where.end.column - where.start.column)


def find(positions: Mapping[cst.CSTNode, CodeRange], kinds: tuple[type[N], ...], span: Span, offset: int) -> N:
    """The smallest node of one of ``kinds`` whose range covers ``span`` (a node's
    LibCST range includes its own parentheses; the stdlib span does not)."""
    best: N | None = None
    for node, where in positions.items():
        if isinstance(node, kinds) and _covers(where, span, offset):
            if best is None or _size(where) < _size(positions[best]):
                best = node
    if best is None:
        # a parenthesised tuple: CPython's span holds the parentheses, LibCST's does not
        for node, where in positions.items():
            if isinstance(node, kinds) and _inside(where, span, offset):
                if best is None or _size(where) > _size(positions[best]):
                    best = node
    if best is None:
        raise PlanError(f"no {kinds[0].__name__} at {span}")
    return best


def apply_plans(
    module: cst.Module, positions: Mapping[cst.CSTNode, CodeRange], plans: Sequence[FixPlan], offset: int
) -> cst.Module:
    """``module`` (a snippet whose line n is file line n + offset) with ``plans`` done."""
    expressions: dict[cst.CSTNode, cst.CSTNode] = {}
    statements: dict[cst.CSTNode, FixPlan] = {}
    elif_parents: dict[cst.CSTNode, tuple[cst.If, FixPlan]] = {}
    for plan in plans:
        action = plan.action
        if action == "remove-operand":
            chain = find(positions, (cst.BooleanOperation,), plan.node, offset)
            operand = find(positions, (cst.BaseExpression,), _child(plan), offset)
            removal = remove_operand(chain, operand)
            if removal is None:
                raise PlanError("operand not removable")
            expressions[removal.original] = removal.replacement
        elif action == "replace-by-child":
            outer = find(positions, (cst.BaseExpression,), plan.node, offset)
            inner = find(positions, (cst.BaseExpression,), _child(plan), offset)
            expressions[outer] = rewrap(inner, outer)
        elif action in ("remove-element", "remove-argument"):
            _remove_item(positions, plan, offset, expressions)
        elif action == "substitute":
            outer = find(positions, (cst.BaseExpression,), plan.node, offset)
            expressions[outer] = rewrap(cst.parse_expression(plan.text), outer)
        elif plan.elif_clause:
            target = find(positions, (cst.If,), plan.node, offset)
            parent = next(n for n in positions if isinstance(n, cst.If) and n.orelse is target)
            elif_parents[parent] = (target, plan)
        else:
            kinds: tuple[type[cst.CSTNode], ...] = (
                (cst.If, cst.While)
                if action in ("keep-body", "keep-orelse")
                else (cst.BaseCompoundStatement, cst.BaseSmallStatement)
            )
            statements[find(positions, kinds, plan.node, offset)] = plan
    return module.visit(_transformer_type()(expressions, statements, elif_parents))


def _remove_item(
    positions: Mapping[cst.CSTNode, CodeRange],
    plan: FixPlan,
    offset: int,
    expressions: dict[cst.CSTNode, cst.CSTNode],
) -> None:
    if plan.action == "remove-element":
        sequence = cast("cst.List | cst.Tuple", find(positions, (cst.List, cst.Tuple), plan.node, offset))
        victim = find(positions, (cst.BaseExpression,), _child(plan), offset)
        expressions[sequence] = sequence.with_changes(elements=_without(list(sequence.elements), victim))
    else:
        call = find(positions, (cst.Call,), plan.node, offset)
        victim = find(positions, (cst.BaseExpression,), _child(plan), offset)
        expressions[call] = call.with_changes(args=_without(list(call.args), victim))


Item = TypeVar("Item", "cst.BaseElement", "cst.Arg")


def _without(items: list[Item], victim: cst.CSTNode) -> list[Item]:
    """``items`` less the one holding ``victim``; the last keeps the removed one's comma."""
    index = next((i for i, item in enumerate(items) if item.value is victim), None)
    if index is None:
        raise PlanError("item not found")
    kept = items[:index] + items[index + 1 :]
    if kept and index == len(items) - 1:
        kept[-1] = kept[-1].with_changes(comma=items[index].comma)
    return kept


def _moved_header_comment(node: cst.If | cst.While) -> list[cst.EmptyLine]:
    header = node.body.header if isinstance(node.body, cst.IndentedBlock) else None
    if header is not None and header.comment is not None:
        return [cst.EmptyLine(indent=True, whitespace=cst.SimpleWhitespace(""), comment=header.comment)]
    return []


def _with_leading(statement: cst.CSTNode, lines: list[cst.EmptyLine]) -> cst.CSTNode:
    if not lines:
        return statement
    return statement.with_changes(leading_lines=[*lines, *statement.leading_lines])  # type: ignore[attr-defined]


def _body_statements(block: cst.BaseSuite) -> list[cst.CSTNode]:
    if isinstance(block, cst.IndentedBlock):
        if any(line.comment for line in block.footer):
            raise PlanError("a comment at the end of the block")
        return list(block.body)
    if isinstance(block, cst.SimpleStatementSuite):
        return [cst.SimpleStatementLine(body=list(block.body))]
    raise PlanError(f"a block of an unknown kind ({type(block).__name__})")


def _branching(statement: cst.CSTNode) -> cst.If | cst.While:
    if not isinstance(statement, (cst.If, cst.While)):
        raise PlanError(f"a branch kept of a {type(statement).__name__}")
    return statement


def _rebuilt_block(
    statements: Mapping[cst.CSTNode, FixPlan],
    original: cst.IndentedBlock | cst.Module,
    updated: cst.IndentedBlock | cst.Module,
) -> cst.IndentedBlock | cst.Module:
    """``updated`` with the statement plans of its statements carried out: a kept body or
    ``else`` takes the statement's place, a removed statement hands the comment lines
    above it to the next one, and an emptied block gets a ``pass``."""
    body: list[cst.CSTNode] = []
    carried: list[cst.EmptyLine] = []
    for before, statement in zip(original.body, updated.body):
        plan = statements.get(before)
        if plan is None and isinstance(before, cst.SimpleStatementLine) and len(before.body) == 1:
            plan = statements.get(before.body[0])
        if plan is None:
            body.append(_with_leading(statement, carried))
            carried = []
            continue
        if not isinstance(statement, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            raise PlanError(f"a statement of an unknown kind ({type(statement).__name__})")
        leading = [*carried, *statement.leading_lines]
        carried = []
        if plan.action == "keep-body":
            branch = _branching(statement)
            kept = _body_statements(branch.body)
            kept[0] = _with_leading(kept[0], [*leading, *_moved_header_comment(branch)])
            body.extend(kept)
        elif plan.action == "keep-orelse":
            orelse = _branching(statement).orelse
            if isinstance(orelse, cst.If):
                body.append(orelse.with_changes(leading_lines=[*leading, *orelse.leading_lines]))
            elif isinstance(orelse, cst.Else):
                kept = _body_statements(orelse.body)
                kept[0] = _with_leading(kept[0], leading)
                body.extend(kept)
            else:
                carried = leading
        elif plan.action == "pass-statement":
            body.append(cst.SimpleStatementLine(body=[cst.Pass()], leading_lines=leading))
        else:  # remove-statement
            carried = leading
    if carried:
        raise PlanError("comment lines with no statement to carry them")
    if not body and isinstance(updated, cst.IndentedBlock):
        body = [cst.SimpleStatementLine(body=[cst.Pass()])]
    return updated.with_changes(body=body)


def _elif_replaced(updated: cst.If, target: cst.If, plan: FixPlan) -> cst.If:
    """``updated`` (the ``if`` whose ``orelse`` is the fixed ``elif`` ``target``) with
    that ``elif`` replaced by its kept body (as an ``else``) or by its own ``orelse``."""
    orelse: cst.If | cst.Else | None
    if plan.action == "keep-body":
        orelse = cst.Else(body=target.body, leading_lines=target.leading_lines)
    else:
        orelse = target.orelse
    return updated.with_changes(orelse=orelse)


def _small_statements_removed(
    statements: Mapping[cst.CSTNode, FixPlan],
    original: cst.SimpleStatementLine | cst.SimpleStatementSuite,
    updated: cst.SimpleStatementLine | cst.SimpleStatementSuite,
) -> cst.SimpleStatementLine | cst.SimpleStatementSuite:
    """``updated`` less the ``;``-separated statements a plan removes (when some stay)."""
    small = [u for o, u in zip(original.body, updated.body) if o not in statements]
    if len(small) != len(updated.body) and small:
        small[-1] = small[-1].with_changes(semicolon=cst.MaybeSentinel.DEFAULT)
        return updated.with_changes(body=small)
    return updated


def _transformer_type() -> type:
    """The LibCST transformer that carries out plans, made on first use (its base class
    is LibCST's, which a check never imports)."""
    global _TYPE
    if _TYPE is not None:
        return _TYPE

    class Transformer(cst.CSTTransformer):
        def __init__(
            self,
            expressions: dict[cst.CSTNode, cst.CSTNode],
            statements: dict[cst.CSTNode, FixPlan],
            elif_parents: dict[cst.CSTNode, tuple[cst.If, FixPlan]],
        ) -> None:
            super().__init__()
            self.expressions = expressions
            self.statements = statements
            self.elif_parents = elif_parents

        def on_leave(self, original_node: Any, updated_node: Any) -> Any:
            updated_node = super().on_leave(original_node, updated_node)
            if original_node in self.expressions:
                return self.expressions[original_node]
            if original_node in self.elif_parents:
                return _elif_replaced(updated_node, *self.elif_parents[original_node])
            if isinstance(updated_node, (cst.IndentedBlock, cst.Module)):
                return _rebuilt_block(self.statements, original_node, updated_node)
            if isinstance(updated_node, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
                return _small_statements_removed(self.statements, original_node, updated_node)
            return updated_node

    _TYPE = Transformer
    return Transformer


_TYPE: type | None = None
