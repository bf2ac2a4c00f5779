"""What the engine returns: frozen result objects, never printed here.

A :class:`Finding` may carry a fix (:class:`Edit`, with its :class:`Applicability`) and
the path grad mode took to reach the decision (:class:`FlowStep`, capture first).
"""

from __future__ import annotations

import enum
from typing import Any

from .records import as_dict, record


class Applicability(enum.StrEnum):
    """How sure a fix is, as ruff grades them.

    ``safe`` fixes keep the program's meaning but for the bug and are applied by
    ``gradgate fix``; ``unsafe`` ones may change behaviour in other ways too and are
    applied only with ``--unsafe-fixes``; ``display`` ones are shown, never applied.
    """

    SAFE = "safe"
    UNSAFE = "unsafe"
    DISPLAY = "display"


@record
class Edit:
    """The fix of one finding as text: replace the region with ``content``.

    Lines are 1-based, columns 1-based and counted in characters; the end is
    exclusive. Consumers that apply one edit at a time (SARIF viewers, editors) can use
    it; ``gradgate fix`` applies the fixes itself.
    """

    line: int
    column: int
    end_line: int
    end_column: int
    content: str


@record
class FlowStep:
    """One step of the path grad mode took, from its capture to the decision."""

    path: str
    line: int
    column: int  # 1-based
    message: str


@record
class Finding:
    path: str
    rule: str
    message: str
    line: int
    column: int  # 1-based
    end_line: int
    end_column: int  # 1-based, exclusive
    #: the fix's applicability, or None when the finding has no fix
    applicability: Applicability | None = None
    source_line: str = ""
    edit: Edit | None = None
    #: capture first, the decision last; empty when grad mode was read where it decides
    flow: tuple[FlowStep, ...] = ()
    #: what the fix does, in a few words ("remove the grad-mode operand"); "" without one
    fix_title: str = ""

    @property
    def fixable(self) -> bool:
        """Does plain ``gradgate fix`` (no ``--unsafe-fixes``) fix it?"""
        return self.applicability is Applicability.SAFE

    def fixable_with(self, unsafe_fixes: bool) -> bool:
        if self.applicability is Applicability.SAFE:
            return True
        return unsafe_fixes and self.applicability is Applicability.UNSAFE

    def sort_key(self) -> tuple[str, int, int, str]:
        return (self.path, self.line, self.column, self.rule)

    def to_json(self) -> dict[str, Any]:
        """Plain JSON data (the cache's form); :meth:`from_json` reads it back."""
        data = as_dict(self)
        data["applicability"] = None if self.applicability is None else self.applicability.value
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Finding:
        """Raises KeyError, TypeError or ValueError on data of another shape."""
        edit = data.get("edit")
        applicability = data.get("applicability")
        return cls(
            **{
                **data,
                "applicability": None if applicability is None else Applicability(applicability),
                "edit": Edit(**edit) if edit else None,
                "flow": tuple(FlowStep(**step) for step in data.get("flow", ())),
            }
        )


@record
class Notice:
    """Something a run gave up on in a file (a function or decision not analysed, a
    summary not settled, a fix refused before LibCST): reported, never silent, and no
    finding. ``line`` is 1-based; 0 when the notice is about the whole file."""

    path: str
    line: int
    message: str

    def to_json(self) -> dict[str, Any]:
        return as_dict(self)


@record
class FileResult:
    path: str
    findings: tuple[Finding, ...] = ()
    error: str | None = None
    #: the bytes that were analysed (None when the file could not be read)
    source: bytes | None = None
    #: the fixed bytes, when fixing was asked for and something changed
    fixed: bytes | None = None
    #: findings the fix removed
    fixed_findings: tuple[Finding, ...] = ()
    #: how far the file got: "prefilter" (no grad-mode token), "ast" (analysed, nothing
    #: to fix) or "fix" (LibCST parsed the statements a fix changes)
    stage: str = ""
    #: how many of the file's lines LibCST parsed
    cst_lines: int = 0
    #: findings a suppression comment silenced (SARIF reports them as suppressed)
    suppressed: tuple[Finding, ...] = ()
    #: the other files whose functions the findings rest on (absolute paths): a change
    #: to one of them invalidates the cached result
    dependencies: tuple[str, ...] = ()
    #: names of the file's functions that return grad mode: a file calling one must be
    #: analysed though it spells no grad-mode token itself
    exports: tuple[str, ...] = ()
    #: the fields and keys the run had learned to carry grad mode when this result was
    #: decided (:mod:`gradgate.learned`): a run that learned others decides it again
    carriers: tuple[str, ...] = ()
    #: what the file's bytes store grad mode in (:meth:`gradgate.learned.Learned.encoded`):
    #: a warm run learns it from the cache, without reading the file
    learned: tuple[str, ...] = ()
    #: what the run gave up on in this file (see :class:`Notice`)
    notices: tuple[Notice, ...] = ()

    @property
    def changed(self) -> bool:
        return self.fixed is not None and self.fixed != self.source
