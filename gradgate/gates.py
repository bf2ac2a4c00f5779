"""Grad-mode *gates*: the places in an expression where grad mode being off forces a
decision off, and how to remove each one without touching anything else.

Shared by the rules. The forms recognised, each with the LibCST replacement that
removes the grad-mode read (None where the rewrite would be ambiguous: report only):

* ``a and <grad> and b`` (nested and parenthesised ``and`` chains too):
  the operand and one adjoining ``and`` go (:mod:`gradgate.boolchain`);
* ``a and (<grad> or b)``: grad mode still decides; report only;
* ``x if <grad> else False`` (``None``/``0`` alike) -> ``x``; ``False if not <grad> else x``
  -> ``x``; a gate inside the ternary's test is removed from that test;
* ``all([a, <grad>, b])`` -> ``all([a, b])``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache

from . import lazycst as cst
from .boolchain import conjuncts, is_and, remove_conjunct, rewrap
from .gradmode import GradModeAnalysis
from .rule import Replacement
from .semantic import Polarity


@dataclass(frozen=True)
class Gate:
    #: the grad-mode read: where the finding is reported
    operand: cst.BaseExpression
    #: the fix removing it, or None (report only)
    replacement: Replacement | None


def strip_not(node: cst.BaseExpression) -> cst.BaseExpression:
    """``x`` for ``not x`` (and ``not not x``): the read a finding points at."""
    while isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not):
        node = node.expression
    return node


def is_falsy_constant(node: cst.BaseExpression) -> bool:
    if isinstance(node, cst.Name):
        return node.value in ("False", "None")
    if isinstance(node, cst.Integer):
        return node.value == "0"
    return False


def _grad_reads(node: cst.BaseExpression, grad: GradModeAnalysis) -> Iterator[cst.BaseExpression]:
    """Positive grad-mode reads anywhere in ``node`` (for report-only gates)."""
    if grad.polarity(node) is Polarity.GRAD:
        yield node
        return
    for child in node.children:
        if isinstance(child, cst.BaseExpression):
            yield from _grad_reads(child, grad)


def grad_gates(expression: cst.BaseExpression, grad: GradModeAnalysis) -> list[Gate]:
    """The positive grad-mode gates of ``expression`` (empty for the opposite polarity
    ``x and not is_grad_enabled``, which refuses a path while grad is on: correct)."""
    gates: list[Gate] = []
    if is_and(expression):
        operands = list(conjuncts(expression))
        # a chain of nothing but grad-mode reads has nothing to keep: report only
        only_grad = all(grad.polarity(o) is Polarity.GRAD for o in operands)
        for operand in operands:
            if grad.polarity(operand) is Polarity.GRAD:
                removal = None if only_grad else remove_conjunct(expression, operand)
                gates.append(
                    Gate(operand, Replacement(removal.original, removal.replacement) if removal else None)
                )
            elif isinstance(operand, cst.BooleanOperation) and isinstance(operand.operator, cst.Or):
                gates.extend(Gate(read, None) for read in _grad_reads(operand, grad))
    elif isinstance(expression, cst.IfExp):
        test = grad.polarity(expression.test)
        if test is Polarity.GRAD and is_falsy_constant(expression.orelse):
            gates.append(Gate(strip_not(expression.test), Replacement(expression, rewrap(expression.body, expression))))
        elif test is Polarity.NO_GRAD and is_falsy_constant(expression.body):
            gates.append(Gate(strip_not(expression.test), Replacement(expression, rewrap(expression.orelse, expression))))
        elif is_and(expression.test):
            gates.extend(grad_gates(expression.test, grad))
    elif (
        isinstance(expression, cst.Call)
        and isinstance(expression.func, cst.Name)
        and expression.func.value == "all"
        and len(expression.args) == 1
        and isinstance(expression.args[0].value, (cst.List, cst.Tuple))
    ):
        container = expression.args[0].value
        elements = list(container.elements)
        for index, element in enumerate(elements):
            if grad.polarity(element.value) is Polarity.GRAD:
                kept = elements[:index] + elements[index + 1:]
                if kept and index == len(elements) - 1:
                    kept[-1] = kept[-1].with_changes(comma=element.comma)
                fixable = len(kept) >= (2 if isinstance(container, cst.Tuple) else 1)
                replacement = Replacement(container, container.with_changes(elements=kept)) if fixable else None
                gates.append(Gate(element.value, replacement))
    return gates


def call_name(call: cst.Call) -> tuple[str | None, str | None]:
    """(dotted name of the callee or None, its last name or None)."""
    from .gradmode import dotted_name

    func = call.func
    last = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else None
    return dotted_name(func), last


@cache
def _call_finder_type() -> type:
    """Made on first use, like :func:`gradgate.rule._dispatcher_type`."""

    class CallFinder(cst.CSTVisitor):
        def __init__(self, predicate) -> None:
            self.predicate = predicate
            self.found = False

        def visit_Call(self, node: cst.Call) -> bool:
            if self.predicate(node):
                self.found = True
            return not self.found

        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return False

        def visit_ClassDef(self, node: cst.ClassDef) -> bool:
            return False

        def visit_Lambda(self, node: cst.Lambda) -> bool:
            return False

    return CallFinder


def contains_direct_call(block: cst.BaseSuite, predicate) -> bool:
    """Does a statement of ``block`` itself (not a nested block) make a call for which
    ``predicate`` holds?"""
    lines = block.body if isinstance(block, cst.IndentedBlock) else [block]
    for line in lines:
        if isinstance(line, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
            finder = _call_finder_type()(predicate)
            line.visit(finder)
            if finder.found:
                return True
    return False
