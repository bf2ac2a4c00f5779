"""The rule API: a rule is a LibCST visitor that reports findings with optional fixes.

A rule lives in its own module of :mod:`gradgate.rules` and is one subclass of
:class:`Rule` carrying its ``CODE``, ``NAME``, ``MESSAGE``, its documentation (the class
docstring, with the sections listed in :data:`DOC_SECTIONS`) and its own ``VALID`` and
``INVALID`` examples, which the test-suite runs. Rules are found by :func:`all_rules`;
nothing else registers them.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, ClassVar

from . import lazycst as cst
from .config import Config
from .gradmode import GradModeAnalysis
from .semantic import ModuleModel, Scope

if TYPE_CHECKING:  # annotations only: importing them at run time would import LibCST
    from libcst.metadata import CodeRange, ProviderT

DOC_SECTIONS = (
    "What it does",
    "Why is this bad?",
    "Example",
    "Use instead",
    "Fix safety",
    "References",
)


@dataclass(frozen=True)
class Valid:
    """Code the rule must not report."""

    code: str


@dataclass(frozen=True)
class Invalid:
    """Code the rule must report: at ``line``:``column`` (1-based) of the first finding
    and, when the rule fixes it, rewritten to ``expected_replacement``."""

    code: str
    line: int
    column: int
    expected_replacement: str | None = None
    count: int = 1


@dataclass(frozen=True)
class Replacement:
    """Swap ``original`` for ``new`` (a node, or :data:`libcst.RemoveFromParent`)."""

    original: cst.CSTNode
    new: cst.CSTNode | cst.RemovalSentinel


@dataclass(frozen=True)
class Report:
    """What a rule reported, before the engine turns it into a :class:`Finding`."""

    code: str
    message: str
    node: cst.CSTNode
    replacement: Replacement | None
    statement_line: int


@dataclass
class RuleContext:
    """What one snippet of a file offers to every rule that runs on it.

    ``module`` is the parsed snippet (see :mod:`gradgate.engine`); its line ``n`` is
    line ``n + line_offset`` of the file. ``model`` is the whole file's semantic model.
    """

    path: str
    module: cst.Module
    config: Config
    metadata: Mapping[ProviderT, Mapping[cst.CSTNode, object]]
    model: ModuleModel
    line_offset: int = 0
    reports: list[Report] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.grad = GradModeAnalysis(self.model, self.line)

    def position(self, node: cst.CSTNode) -> CodeRange:
        from libcst.metadata import PositionProvider

        return self.metadata[PositionProvider][node]  # type: ignore[return-value]

    def line(self, node: cst.CSTNode) -> int:
        """The file line on which ``node`` starts."""
        return self.position(node).start.line + self.line_offset


class Rule:
    CODE: ClassVar[str]
    NAME: ClassVar[str]
    MESSAGE: ClassVar[str]
    VALID: ClassVar[Sequence[Valid]] = ()
    INVALID: ClassVar[Sequence[Invalid]] = ()
    #: whether the rule runs when the configuration selects nothing explicitly
    DEFAULT_ENABLED: ClassVar[bool] = True
    #: metadata the rule reads beyond positions and the grad-mode analysis
    METADATA_DEPENDENCIES: ClassVar[tuple[ProviderT, ...]] = ()

    def __init__(self, context: RuleContext) -> None:
        self.context = context
        self._statements: list[cst.CSTNode] = []

    # Rules report at the grad-mode operand, and suppression comments may sit on the
    # line of the statement holding it: track the innermost statement.
    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        self._statements.append(node)

    def leave_SimpleStatementLine(self, original_node: cst.SimpleStatementLine) -> None:
        self._statements.pop()

    @classmethod
    def candidate(cls, statement: ast.stmt, model: ModuleModel, scope: Scope) -> bool:
        """Cheap stdlib-``ast`` test: could this statement, which reads the grad mode in
        its own expressions, hold a finding of this rule there? Judge it by its own
        expressions (:func:`gradgate.semantic.own_nodes`) and, for a compound statement,
        the shape of its blocks; never by the statements nested in them: when every rule
        says no, those are offered one by one. It must never say no where
        :meth:`report` would be called (the test-suite checks this on every
        VALID/INVALID case and fixture, with and without the pre-filters). Only
        statements some rule accepts are parsed with LibCST."""
        return True

    def report(
        self,
        node: cst.CSTNode,
        message: str | None = None,
        replacement: Replacement | None = None,
    ) -> None:
        statement = self._statements[-1] if self._statements else node
        self.context.reports.append(
            Report(
                code=self.CODE,
                message=message or self.MESSAGE,
                node=node,
                replacement=replacement,
                statement_line=self.context.line(statement),
            )
        )

    @classmethod
    def documentation(cls) -> str:
        import inspect

        return inspect.cleandoc(cls.__doc__ or "")

    @classmethod
    def missing_doc_sections(cls) -> list[str]:
        doc = cls.documentation()
        return [s for s in DOC_SECTIONS if f"## {s}" not in doc]


def dispatch(rules: Sequence[Rule], module: cst.Module) -> None:
    """Run several rules over ``module`` in one traversal (what LibCST's
    ``visit_batched`` does, with each rule class's ``visit_*`` / ``leave_*`` table
    computed once, not per module)."""
    module.visit(_dispatcher_type()(rules))


@cache
def _dispatcher_type() -> type:
    """The LibCST visitor class behind :func:`dispatch`, made on first use (a class
    statement naming ``cst.CSTVisitor`` at import time would import LibCST)."""

    class RuleDispatcher(cst.CSTVisitor):
        def __init__(self, rules: Sequence[Rule]) -> None:
            super().__init__()
            self._visit: dict[str, list] = {}
            self._leave: dict[str, list] = {}
            for rule in rules:
                visits, leaves = _method_names(type(rule))
                for node_type, name in visits:
                    self._visit.setdefault(node_type, []).append(getattr(rule, name))
                for node_type, name in leaves:
                    self._leave.setdefault(node_type, []).append(getattr(rule, name))

        def on_visit(self, node: cst.CSTNode) -> bool:
            for method in self._visit.get(type(node).__name__, ()):
                method(node)
            return True

        def on_leave(self, original_node: cst.CSTNode) -> None:
            for method in self._leave.get(type(original_node).__name__, ()):
                method(original_node)

    return RuleDispatcher


@cache
def _method_names(rule: type[Rule]) -> tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]:
    """The ``visit_<Node>`` / ``leave_<Node>`` methods ``rule`` defines. (A rule is not
    itself a LibCST visitor: one would inherit a no-op method per node type, and the
    dispatcher would call them all on every node.)"""
    names = [n for n in dir(rule) if n.startswith(("visit_", "leave_")) and "_" not in n[6:]]
    visits = tuple((n[6:], n) for n in names if n.startswith("visit_"))
    leaves = tuple((n[6:], n) for n in names if n.startswith("leave_"))
    return visits, leaves


@cache
def all_rules() -> tuple[type[Rule], ...]:
    """Every rule in :mod:`gradgate.rules`, ordered by code."""
    from .registry import rule_modules

    found: dict[str, type[Rule]] = {}
    for name in rule_modules():
        module = importlib.import_module(f"gradgate.rules.{name}")
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and issubclass(value, Rule)
                and value is not Rule
                and value.__module__ == module.__name__
            ):
                if value.CODE in found:
                    raise RuntimeError(f"two rules share the code {value.CODE}")
                found[value.CODE] = value
    return tuple(found[code] for code in sorted(found))


def rule_by_code() -> dict[str, type[Rule]]:
    return {rule.CODE: rule for rule in all_rules()}
