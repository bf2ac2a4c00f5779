"""Where two forwards part: divergences between their event sequences (plain data, no torch).

The reference forward (grad enabled) and another forward are aligned by their event
signatures (:func:`difflib.SequenceMatcher`, no junk heuristic); each block that is not
equal is a :class:`Divergence`. Its :class:`Parting` is the user-code frame where the two
paths part: walking both anchor events' stacks from the outermost frame in, the first
frame of the same function at different lines (or the innermost common frame when the
stacks agree, as when one call is made with a different process group).
"""

from __future__ import annotations

from difflib import SequenceMatcher
from typing import Any

from ..records import field, record, replace
from .events import Event, Forward, Frame


@record
class Parting:
    """The frame where the paths part: the same function, at ``line`` in the reference
    forward and at ``other_line`` in the other (equal when one call differs in its details)."""

    path: str
    function: str
    first_line: int
    line: int
    other_line: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "function": self.function,
            "first_line": self.first_line,
            "line": self.line,
            "other_line": self.other_line,
        }


@record
class LinkedFinding:
    """A static finding of ``gradgate check`` tied to a divergence, and how."""

    path: str
    line: int
    column: int
    rule: str
    message: str
    #: "on the stack" (a frame of an anchor event runs its line) or "in the parting function"
    relation: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "line": self.line,
            "column": self.column,
            "rule": self.rule,
            "message": self.message,
            "relation": self.relation,
        }


@record
class Divergence:
    reference: str  # label of the reference forward
    other: str  # label of the forward that differs
    #: "path" (the event sequences differ) or "training" (module.training differs)
    kind: str
    index: int  # position of the block in the reference forward's events
    expected: tuple[Event, ...]  # the reference forward's events in the block
    found: tuple[Event, ...]  # the other forward's events in the block
    parting: Parting | None
    anchors: tuple[Event | None, Event | None] = field(default=(None, None))
    findings: tuple[LinkedFinding, ...] = ()

    def stack_paths(self) -> set[str]:
        """The files on the anchor events' stacks."""
        return {f.path for e in self.anchors if e is not None for f in e.stack}

    def with_findings(self, findings: tuple[LinkedFinding, ...]) -> Divergence:
        return replace(self, findings=findings)

    def as_dict(self) -> dict[str, Any]:
        return {
            "reference": self.reference,
            "other": self.other,
            "kind": self.kind,
            "index": self.index,
            "expected": [e.as_dict() for e in self.expected],
            "found": [e.as_dict() for e in self.found],
            "parting": self.parting.as_dict() if self.parting else None,
            "findings": [f.as_dict() for f in self.findings],
        }


def parting(a: Event | None, b: Event | None) -> Parting | None:
    """The frame where the stacks of ``a`` (reference) and ``b`` part; None without stacks."""
    sa = a.stack if a is not None else ()
    sb = b.stack if b is not None else ()
    last: tuple[Frame, Frame] | None = None
    for fa, fb in zip(sa, sb):
        if (fa.path, fa.function, fa.first_line) != (fb.path, fb.function, fb.first_line):
            break
        if fa.line != fb.line:
            return Parting(fa.path, fa.function, fa.first_line, fa.line, fb.line)
        last = (fa, fb)
    if last is None:
        only = sa[-1] if sa else sb[-1] if sb else None
        if only is None:
            return None
        return Parting(only.path, only.function, only.first_line, only.line, only.line)
    fa, fb = last
    return Parting(fa.path, fa.function, fa.first_line, fa.line, fb.line)


def _anchor(events: list[Event], start: int, end: int) -> Event | None:
    """The first event of ``events[start:end]``; for an empty block the event after it,
    else the one before it."""
    if start < end:
        return events[start]
    if start < len(events):
        return events[start]
    return events[start - 1] if start > 0 else None


def divergences(reference: Forward, other: Forward) -> list[Divergence]:
    """Every place where ``other`` leaves ``reference``'s path, in order."""
    out: list[Divergence] = []
    if reference.training != other.training:
        out.append(Divergence(reference.label, other.label, "training", 0, (), (), None))
    a, b = reference.events, other.events
    matcher = SequenceMatcher(None, [e.signature() for e in a], [e.signature() for e in b], autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        anchors = (_anchor(a, i1, i2), _anchor(b, j1, j2))
        out.append(
            Divergence(
                reference.label,
                other.label,
                "path",
                i1,
                tuple(a[i1:i2]),
                tuple(b[j1:j2]),
                parting(*anchors),
                anchors,
            )
        )
    return out


def _where(frame: Frame | None) -> str:
    return f"{frame.path}:{frame.line}" if frame else "<no user frame>"


def render(divergence: Divergence, limit: int = 6) -> str:
    """A readable diff of one divergence: where the paths part, '-' the reference's
    events, '+' the other forward's, and the static findings it is linked to."""
    d = divergence
    lines = [f"{d.reference} vs {d.other}:"]
    if d.kind == "training":
        lines.append(f"  module.training differs ({d.reference} and {d.other})")
        return "\n".join(lines)
    p = d.parting
    if p is not None:
        where = f"{p.path}:{p.line} in {p.function}"
        if p.other_line != p.line:
            where += f" ({d.other}: line {p.other_line})"
        lines.append(f"  paths part at {where}")
    for sign, events in (("-", d.expected), ("+", d.found)):
        for event in events[:limit]:
            lines.append(f"  {sign} {event.describe()}  @ {_where(event.frame)}")
        if len(events) > limit:
            lines.append(f"  {sign} ... {len(events) - limit} more")
    if not d.expected:
        lines.append(f"  - (nothing: {d.reference} has no such step)")
    if not d.found:
        lines.append(f"  + (nothing: {d.other} skips these steps)")
    for f in d.findings:
        lines.append(f"  static finding {f.rule} at {f.path}:{f.line}:{f.column} ({f.relation}): {f.message}")
    return "\n".join(lines)
