"""The tree of a fixed text, made from the tree of the text before the fix.

A fix changes a few statements of a file. The next pass of ``fix`` analyses the fixed
text, and parsing it whole was 0.4 s of the 1.0 s check of a 100,000-line file: most of
what made ``fix`` cost more than twice its check. Here only the top-level statements the
change touches are parsed again; the others are the nodes of the tree before, moved by
the number of lines the change added or removed above them. The result is the tree
``ast.parse`` gives for the fixed text (``tests/test_splice.py`` compares them, position
attributes included, on every fix the fixtures and TransformerEngine make).

Where the change is not a run of whole top-level statements replaced by others
(it touches a line between statements, a ``from __future__`` import, a file with form
feeds or lone carriage returns), :func:`spliced_tree` says None and the caller parses the
whole text, as before.
"""

from __future__ import annotations

import ast
import re

from ..source import common_prefix, common_suffix
from .fixplan import odd_layout

_NEWLINE = re.compile("\n")


def _first_line(statement: ast.stmt) -> int:
    """The first line of a top-level statement, its decorators included."""
    decorators = getattr(statement, "decorator_list", None) or ()
    return min([statement.lineno, *(d.lineno for d in decorators)])


def spliced_tree(tree: ast.Module, before: str, after: str) -> ast.Module | None:
    """The tree of ``after`` from ``tree``, the tree of ``before``, re-parsing only the
    top-level statements that differ; None where that cannot be done (see the module's
    documentation) or where the re-parsed statements do not parse."""
    if before == after or not tree.body:
        return None
    if odd_layout(after):
        return None  # where CPython's idea of a line may not be "\n"-separated
    prefix = common_prefix(before, after)
    suffix = common_suffix(before, after, min(len(before), len(after)) - prefix)
    first_changed = before.count("\n", 0, prefix) + 1
    last_changed = before.count("\n", 0, max(prefix, len(before) - suffix)) + 1
    body = tree.body
    first = next((i for i, s in enumerate(body) if (s.end_lineno or s.lineno) >= first_changed), None)
    last = next((i for i in range(len(body) - 1, -1, -1) if _first_line(body[i]) <= last_changed), None)
    if first is None or last is None or first > last:
        return None  # the change is between statements, or after the last
    start_line, end_line = _first_line(body[first]), body[last].end_lineno or body[last].lineno
    if first_changed < start_line or last_changed > end_line:
        return None
    if first > 0 and (body[first - 1].end_lineno or body[first - 1].lineno) >= start_line:
        return None  # a statement before shares the first line (`a = 1; b = 2`)
    if last + 1 < len(body) and _first_line(body[last + 1]) <= end_line:
        return None  # or one after shares the last
    delta = after.count("\n") - before.count("\n")
    starts = [0, *(m.end() for m in _NEWLINE.finditer(after))]
    new_end_line = end_line + delta
    if not 1 <= start_line <= new_end_line <= len(starts):
        return None
    segment_start = starts[start_line - 1]
    segment_end = starts[new_end_line] if new_end_line < len(starts) else len(after)
    # everything outside the segment is the same text as before it was fixed
    if segment_start > prefix or segment_end < len(after) - suffix:
        return None
    segment = after[segment_start:segment_end]
    if "__future__" in segment:
        return None  # valid only at the top of a module: a statement alone does not say
    try:
        replaced = ast.parse(segment).body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    for statement in replaced:
        ast.increment_lineno(statement, start_line - 1)
    following = body[last + 1 :]
    if delta:
        for statement in following:
            ast.increment_lineno(statement, delta)
    return ast.Module(body=[*body[:first], *replaced, *following], type_ignores=list(tree.type_ignores))
