"""Which expressions carry the autograd grad mode, and with which polarity.

Every rule asks the same question of an expression: "is this the grad mode?". The answer
is a :class:`Polarity`: ``GRAD`` for an expression that is True exactly when grad mode
is on (``torch.is_grad_enabled()``, a parameter named ``is_grad_enabled``, a local
assigned from either), ``NO_GRAD`` for its negation (``not is_grad_enabled``,
``torch.is_inference_mode_enabled()``), ``NONE`` for anything else.

Sources are resolved through LibCST metadata: import aliases through
:class:`~libcst.metadata.QualifiedNameProvider`, locals through the assignments that
:class:`~libcst.metadata.ScopeProvider` links to each access.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

import libcst as cst
from libcst.metadata import (
    Assignment,
    QualifiedNameProvider,
    ScopeProvider,
)

from .config import Config


class Polarity(enum.IntEnum):
    NO_GRAD = -1
    NONE = 0
    GRAD = 1

    def negated(self) -> "Polarity":
        return Polarity(-int(self))


def dotted_name(node: cst.BaseExpression) -> str | None:
    """``a.b.c`` for a chain of attributes on a name, else None."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        base = dotted_name(node.value)
        return None if base is None else f"{base}.{node.attr.value}"
    return None


class _AssignedValues(cst.CSTVisitor):
    """Maps each simple assignment target (a ``Name``) to the value assigned to it."""

    def __init__(self) -> None:
        self.values: dict[cst.Name, cst.BaseExpression] = {}

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            if isinstance(target.target, cst.Name):
                self.values[target.target] = node.value

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if isinstance(node.target, cst.Name) and node.value is not None:
            self.values[node.target] = node.value


class GradModeAnalysis:
    """Answers :meth:`polarity` for expressions of one parsed module."""

    METADATA = (QualifiedNameProvider, ScopeProvider)

    def __init__(
        self,
        module: cst.Module,
        metadata: Mapping[type, Mapping[cst.CSTNode, object]],
        config: Config,
    ) -> None:
        self._qualified = metadata[QualifiedNameProvider]
        self._scopes = metadata[ScopeProvider]
        self._config = config
        self._grad_functions = frozenset(config.grad_functions)
        self._inference_functions = frozenset(config.inference_functions)
        self._grad_names = frozenset(config.grad_names)
        collector = _AssignedValues()
        module.visit(collector)
        self._assigned = collector.values
        self._cache: dict[cst.CSTNode, Polarity] = {}

    # -- public -------------------------------------------------------------------
    def polarity(self, node: cst.BaseExpression) -> Polarity:
        cached = self._cache.get(node)
        if cached is None:
            self._cache[node] = Polarity.NONE  # guards cycles such as ``g = g and g``
            cached = self._cache[node] = self._compute(node)
        return cached

    def is_grad_mode(self, node: cst.BaseExpression) -> bool:
        return self.polarity(node) is Polarity.GRAD

    # -- sources ------------------------------------------------------------------
    def _compute(self, node: cst.BaseExpression) -> Polarity:
        if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not):
            return self.polarity(node.expression).negated()
        if isinstance(node, cst.Call) and not node.args:
            return self._call_polarity(node)
        if isinstance(node, cst.Attribute):
            if node.attr.value not in self._grad_names:
                return Polarity.NONE
            # ``torch.is_grad_enabled`` without a call is the function, not the mode
            is_function = self._qualified_names(node) & self._grad_functions
            return Polarity.NONE if is_function else Polarity.GRAD
        if isinstance(node, cst.Name):
            return self._name_polarity(node)
        return Polarity.NONE

    def _qualified_names(self, node: cst.CSTNode) -> set[str]:
        value = self._qualified.get(node, ())
        if callable(value):  # LibCST computes qualified names lazily
            value = value()
        return {q.name for q in value}

    def _call_polarity(self, node: cst.Call) -> Polarity:
        names = self._qualified_names(node.func)
        if not names:
            # ``torch`` used without an import (a re-export, a star import): fall back to
            # the spelled name, which is still unambiguous for ``torch.*`` functions.
            spelled = dotted_name(node.func)
            names = {spelled} if spelled else set()
        if names & self._grad_functions:
            return Polarity.GRAD
        if names & self._inference_functions:
            return Polarity.NO_GRAD
        return Polarity.NONE

    def _name_polarity(self, node: cst.Name) -> Polarity:
        if node.value in self._grad_names:
            return Polarity.GRAD
        scope = self._scopes.get(node)
        if scope is None:
            return Polarity.NONE
        referents: set[object] = set()
        for access in scope.accesses[node.value]:
            if access.node is node:
                referents = set(access.referents)
                break
        polarities = set()
        for referent in referents:
            if not isinstance(referent, Assignment) or referent.node not in self._assigned:
                return Polarity.NONE  # a parameter, an import, a loop variable, ...
            polarities.add(self.polarity(self._assigned[referent.node]))
        if len(polarities) == 1:
            return polarities.pop()
        return Polarity.NONE
