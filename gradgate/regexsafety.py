"""Refusing user regular expressions that can backtrack exponentially.

Python's ``re`` backtracks: ``^(a+)+$`` takes 2**n steps on ``"a" * n + "!"``. gradgate
matches user patterns (``comm-flag-patterns`` and the like) against every flag name of
every checked file, so a pattern from a configuration must not be able to do that.
:func:`backtracking_risk` finds the shape behind it, a repetition inside a repetition
(``(a+)+``, ``(a*)*``, ``(\\w+\\s?)+``, ``(a{1,3})*``), in the parsed pattern; possessive
repeats and atomic groups, which give nothing back, are allowed.
"""

from __future__ import annotations

import re

# private modules (Python 3.11+, as requires-python says), not in typeshed
from re import _constants as _c  # type: ignore[attr-defined]
from re import _parser as _p  # type: ignore[attr-defined]

_REPEATS = {_c.MAX_REPEAT, _c.MIN_REPEAT}
_POSSESSIVE = getattr(_c, "POSSESSIVE_REPEAT", None)
_ATOMIC = getattr(_c, "ATOMIC_GROUP", None)


def _walk(items, inside_repeat: bool) -> bool:
    """Does the parsed ``items`` hold a repeat of more than one, inside one?"""
    for op, av in items:
        if op in _REPEATS:
            _low, high, sub = av
            many = high is _c.MAXREPEAT or high > 1
            if many and inside_repeat:
                return True
            if _walk(sub, inside_repeat or many):
                return True
        elif op is _POSSESSIVE or op is _ATOMIC:
            sub = av[2] if op is _POSSESSIVE else av
            if _walk(sub, False):
                return True
        elif op is _c.SUBPATTERN:
            if _walk(av[-1], inside_repeat):
                return True
        elif op is _c.BRANCH:
            if any(_walk(branch, inside_repeat) for branch in av[1]):
                return True
        elif op in (_c.ASSERT, _c.ASSERT_NOT):
            if _walk(av[1], inside_repeat):
                return True
        elif op is _c.GROUPREF_EXISTS:
            if any(_walk(branch, inside_repeat) for branch in av[1:] if branch is not None):
                return True
    return False


def backtracking_risk(pattern: str) -> str | None:
    """Why ``pattern`` may take exponential time, or None. The pattern must compile."""
    try:
        parsed = _p.parse(pattern)
    except (re.error, RecursionError):
        return "too complex to check"
    if _walk(parsed, False):
        return (
            "a repetition inside a repetition (like `(a+)+`) can take exponential time; "
            "write it without the nested quantifier"
        )
    return None
