"""The LibCST view of grad mode: which expressions of a parsed snippet carry it.

A :class:`GradModeAnalysis` answers :meth:`~GradModeAnalysis.polarity` for LibCST
expressions by mapping each to a tree-independent :class:`~gradgate.semantic.Shape`
and asking the module's :class:`~gradgate.semantic.ModuleModel` in the scope that holds
the expression's line. Import aliases, carrier locals and attributes are resolved there.
"""

from __future__ import annotations

from collections.abc import Callable

from . import lazycst as cst
from .semantic import OTHER, ModuleModel, Polarity, Scope, Shape

__all__ = ["GradModeAnalysis", "Polarity", "dotted_name", "cst_shape"]


def dotted_name(node: cst.BaseExpression) -> str | None:
    """``a.b.c`` for a chain of attributes on a name, else None."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        base = dotted_name(node.value)
        return None if base is None else f"{base}.{node.attr.value}"
    return None


def cst_shape(node: cst.CSTNode) -> Shape:
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not):
        return Shape("not", inner=cst_shape(node.expression))
    if isinstance(node, cst.Call):
        return OTHER if node.args else Shape("call", dotted=dotted_name(node.func))
    if isinstance(node, cst.Name):
        return Shape("name", dotted=node.value)
    if isinstance(node, cst.Attribute):
        return Shape("attribute", dotted=dotted_name(node), attr=node.attr.value)
    return OTHER


class GradModeAnalysis:
    """Grad-mode polarity of LibCST expressions, in the scope of their source line."""

    def __init__(self, model: ModuleModel, line_of: Callable[[cst.CSTNode], int]) -> None:
        self.model = model
        self._line_of = line_of

    def scope(self, node: cst.CSTNode) -> Scope:
        return self.model.scope_at(self._line_of(node))

    def polarity(self, node: cst.BaseExpression) -> Polarity:
        return self.model.classify(cst_shape(node), self.scope(node))

    def is_grad_mode(self, node: cst.BaseExpression) -> bool:
        return self.polarity(node) is Polarity.GRAD
