"""Boolean chains: remove one operand without touching the rest.

LibCST stores ``a and b and c`` as a left-leaning tree of binary
:class:`~libcst.BooleanOperation` nodes, each operator carrying the whitespace (and any
comments) on both sides of its ``and``. Removing an operand means dropping it together
with one adjoining operator and that operator's whitespace; every other byte, the
parentheses, line breaks and comments included, stays where it was. ``or`` chains alike.
"""

from __future__ import annotations

from functools import cache

from . import lazycst as cst
from .records import record


def _same_operator(node: cst.CSTNode, operator: type) -> bool:
    return isinstance(node, cst.BooleanOperation) and isinstance(node.operator, operator)


def has_comment(node: cst.CSTNode) -> bool:
    finder = _comment_finder_type()()
    node.visit(finder)
    return finder.found


@cache
def _comment_finder_type() -> type:
    """Made on first use, like :func:`gradgate.rule._dispatcher_type`."""

    class CommentFinder(cst.CSTVisitor):
        found = False

        def visit_Comment(self, node: cst.Comment) -> bool:
            self.found = True
            return False

    return CommentFinder


def rewrap(inner: cst.BaseExpression, outer: cst.BaseExpression) -> cst.BaseExpression:
    """``inner`` taking the place of ``outer``: it keeps outer's parentheses too."""
    if not outer.lpar:
        return inner
    return inner.with_changes(lpar=[*outer.lpar, *inner.lpar], rpar=[*inner.rpar, *outer.rpar])


@record
class Removal:
    """Replace ``original`` (a node of the chain) by ``replacement``."""

    original: cst.BooleanOperation
    replacement: cst.BaseExpression


def _parents(root: cst.BaseExpression, operator: type) -> dict[cst.CSTNode, cst.BooleanOperation]:
    parents: dict[cst.CSTNode, cst.BooleanOperation] = {}
    stack = [root]
    while stack:
        node = stack.pop()
        if _same_operator(node, operator):
            assert isinstance(node, cst.BooleanOperation)
            parents[node.left] = node
            parents[node.right] = node
            stack.extend((node.left, node.right))
    return parents


def remove_operand(chain: cst.BooleanOperation, operand: cst.BaseExpression) -> Removal | None:
    """Remove ``operand`` and one adjoining operator from the chain of ``chain``'s own
    operator (``and`` or ``or``) rooted at ``chain``.

    Prefers the ``and`` before the operand (``a and g and c`` -> ``a and c`` keeps the
    whitespace of the second ``and``); falls back to the one after it when the first
    choice would drop a comment. Returns None when every choice would drop a comment
    (or the operand itself holds one): the caller then reports without a fix.
    """
    parents = _parents(chain, type(chain.operator))
    parent = parents.get(operand)
    if parent is None or has_comment(operand):
        return None
    candidates: list[tuple[cst.CSTNode, Removal]] = []
    if parent.right is operand:
        # drop "<ws> and <ws> operand": the parent becomes its left side
        candidates.append((parent.operator, Removal(parent, rewrap(parent.left, parent))))
        grandparent = parents.get(parent)
        if grandparent is not None and grandparent.left is parent and not parent.lpar:
            # drop "operand <ws> and <ws>" of the next operator instead
            candidates.append(
                (
                    grandparent.operator,
                    Removal(
                        grandparent,
                        grandparent.with_changes(left=parent.left, operator=parent.operator),
                    ),
                )
            )
    else:
        # first operand: drop "operand <ws> and <ws>": the parent becomes its right side
        candidates.append((parent.operator, Removal(parent, rewrap(parent.right, parent))))
    for dropped_operator, removal in candidates:
        if not has_comment(dropped_operator):
            return removal
    return None
