"""The tree of a changed text, made from the tree of the text before the change.

A fix changes a few statements of a file, an editor's keystroke one line. The next pass
of ``fix`` analyses the fixed text, and parsing it whole was 0.4 s of the 1.0 s check of
a 100,000-line file: most of what made ``fix`` cost more than twice its check; in the
language server the parse was a quarter of the time from a change to its diagnostics.
Here only the top-level statements the change touches, and the lines between statements
it touches, are parsed again; the other statements are the nodes of the tree before,
moved by the number of lines the change added or removed above them (a change that only
touches comments or blank lines between statements re-parses those lines alone). The
result is the tree ``ast.parse`` gives for the changed text (``tests/test_splice.py``
compares them, position attributes included, on every fix the fixtures and
TransformerEngine make, and on edits between, across and inside statements).

Where that cannot be told from the lines alone (a statement that shares a line with a
neighbour the change does not touch, a line a backslash joins to the one before it, a
``from __future__`` import, a text before or after the change with form feeds or lone
carriage returns), :func:`spliced_tree` says None and the caller parses the whole text.
It says None too where the re-parsed lines do not parse alone: a change that continues a
neighbour (an ``else:`` after an ``if``, an indented line after a ``def``) or leaves a
bracket or a string open; parsed whole, such a text either fails as well or joins the
lines to a statement outside them.

:class:`Reparser` keeps the last tree of one document (an editor's buffer) to splice the
next from.
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


def _last_line(statement: ast.stmt) -> int:
    return statement.end_lineno or statement.lineno


def _continued(text: str, start: int) -> bool:
    """Does the line before the one that starts at offset ``start`` end in a backslash,
    which joins the two? (A statement's last line does not count the line its backslash
    takes in, and a backslash in a comment joins nothing: this says yes to both, and the
    caller parses the whole text.) The lines before the change are the same in the texts
    before and after it."""
    end = start - 1  # the newline that ends the line before
    if end < 1 or text[end] != "\n":
        return False
    end -= 1 if text[end - 1] == "\r" else 0
    return end >= 1 and text[end - 1] == "\\"


def spliced_tree(tree: ast.Module, before: str, after: str) -> ast.Module | None:
    """The tree of ``after`` from ``tree``, the tree of ``before``, re-parsing only the
    lines of the top-level statements the change touches and the changed lines between
    them; None where that cannot be done (see the module's documentation). The
    statements of ``tree`` below the change are moved in place: ``tree`` is the tree of
    ``before`` no more."""
    if before == after or odd_layout(before) or odd_layout(after):
        return None  # odd layout: where CPython's idea of a line may not be "\n"-separated
    prefix = common_prefix(before, after)
    suffix = common_suffix(before, after, min(len(before), len(after)) - prefix)
    # the lines of `before` that differ (the last one at most one too many)
    first_changed = before.count("\n", 0, prefix) + 1
    last_changed = before.count("\n", 0, max(prefix, len(before) - suffix)) + 1
    body = tree.body
    # the statements touched: body[first : last + 1], empty where the change lies
    # between two statements (first == last + 1)
    first = next((i for i, s in enumerate(body) if _last_line(s) >= first_changed), len(body))
    last = next((i for i in range(len(body) - 1, first - 1, -1) if _first_line(body[i]) <= last_changed), first - 1)
    start_line, end_line = first_changed, last_changed
    if first <= last:
        start_line = min(start_line, _first_line(body[first]))
        end_line = max(end_line, _last_line(body[last]))
    if first > 0 and _last_line(body[first - 1]) >= start_line:
        return None  # a statement before shares the first line (`a = 1; b = 2`)
    if last + 1 < len(body) and _first_line(body[last + 1]) <= end_line:
        return None  # or one after shares the last
    delta = after.count("\n") - before.count("\n")
    starts = [0, *(m.end() for m in _NEWLINE.finditer(after))]
    new_end_line = end_line + delta
    if not 1 <= start_line <= new_end_line + 1 <= len(starts) + 1:
        return None
    segment_start = starts[start_line - 1] if start_line <= len(starts) else len(after)
    if _continued(after, segment_start):
        return None  # the line before ends in a backslash: the first line goes on from it
    segment_end = starts[new_end_line] if new_end_line < len(starts) else len(after)
    # everything outside the segment is the same text as before the change
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


class Reparser:
    """The trees of one document's successive texts (an editor's buffer): each spliced
    from the tree of the text before (:func:`spliced_tree`), else parsed whole. A tree
    it gave is valid until the next call: the splice moves the nodes it keeps. Calls
    must not overlap (the language server runs its checks one at a time)."""

    def __init__(self) -> None:
        self._text: str | None = None
        self._tree: ast.Module | None = None

    def __call__(self, text: str) -> ast.Module:
        """The tree of ``text``, as ``ast.parse`` gives it (and raises what it raises)."""
        if self._tree is not None and self._text is not None:
            if text == self._text:
                return self._tree
            tree = spliced_tree(self._tree, self._text, text)
            if tree is not None:
                self._text, self._tree = text, tree
                return tree
        tree = ast.parse(text)  # a syntax error keeps the last tree that parsed
        self._text, self._tree = text, tree
        return tree
