"""The rule API: a rule names the forward decisions it cares about and how to say what
is wrong with them; the model decides which decisions grad mode gates, once, for all
rules, and the engine turns that into findings and fixes.

A rule lives in its own module of :mod:`gradgate.rules` and is one subclass of
:class:`Rule` carrying its ``CODE``, ``NAME``, ``MESSAGE``, its documentation (the class
docstring, with the sections listed in :data:`DOC_SECTIONS`), the decision kinds it
reports (``DECISIONS``, see :class:`gradgate.model.interpret.Decision`) and its own
``VALID`` and ``INVALID`` examples, which the test-suite runs. Rules are found by
:func:`all_rules`; nothing else registers them.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from functools import cache
from typing import TYPE_CHECKING, ClassVar

from .records import record

if TYPE_CHECKING:
    from .model.analysis import Entry, ModuleAnalysis
    from .model.bdd import Manager
    from .model.interpret import Decision

DOC_SECTIONS = (
    "What it does",
    "Why is this bad?",
    "Example",
    "Use instead",
    "Fix safety",
    "References",
)


@record
class Valid:
    """Code the rule must not report."""

    code: str


@record
class Invalid:
    """Code the rule must report: at ``line``:``column`` (1-based) of the first finding
    and, when the rule fixes it, rewritten to ``expected_replacement``; ``unsafe``
    when that fix is only applied with ``--unsafe-fixes``."""

    code: str
    line: int
    column: int
    expected_replacement: str | None = None
    count: int = 1
    unsafe: bool = False


class Rule:
    CODE: ClassVar[str]
    NAME: ClassVar[str]
    MESSAGE: ClassVar[str]
    VALID: ClassVar[Sequence[Valid]] = ()
    INVALID: ClassVar[Sequence[Invalid]] = ()
    #: whether the rule runs when the configuration selects nothing explicitly
    DEFAULT_ENABLED: ClassVar[bool] = True
    #: the kinds of forward decision this rule reports
    DECISIONS: ClassVar[frozenset[str]] = frozenset()
    #: whether the model's proven fixes are offered for this rule's findings
    FIXES: ClassVar[bool] = True

    @classmethod
    def judge(cls, decision: Decision, bdd: Manager) -> bool:
        """Is this decision a finding? By default: turning grad mode off forces it
        off while with grad mode on it can still be on (the opposite polarity is
        correct and silent); for a choice (a process group, a mode switch) any
        dependence on grad mode."""
        if decision.depends_any_way:
            return bdd.depends_on_grad(decision.bdd)
        return bdd.forced_off_by_no_grad(decision.bdd)

    @classmethod
    def entries(cls, analysis: ModuleAnalysis, decision: Decision) -> list[Entry]:
        """Where grad mode enters the decision: the findings' locations."""
        return analysis.entries(decision)

    @classmethod
    def describe(cls, decision: Decision, read: str) -> str:
        """The finding's message; ``read`` is the source of the grad-mode read."""
        return cls.MESSAGE

    @classmethod
    def documentation(cls) -> str:
        import inspect

        return inspect.cleandoc(cls.__doc__ or "")

    @classmethod
    def missing_doc_sections(cls) -> list[str]:
        doc = cls.documentation()
        return [s for s in DOC_SECTIONS if f"## {s}" not in doc]


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
