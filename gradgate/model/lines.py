"""A module's lines as CPython's tokenizer splits them, and where words occur in them:
the pre-filter that lets the model skip the functions that cannot hold what a question
looks for."""

from __future__ import annotations

import bisect
import itertools
import re

_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


def split_lines(text: str) -> list[str]:
    """Lines with their own endings, split where CPython's tokenizer splits them."""
    return _LINE.findall(text)


class LineIndex:
    """Line numbers of the places where words occur in a text."""

    def __init__(self, text: str, lines: list[str] | None = None) -> None:
        """``lines``: :func:`split_lines` of ``text``, where the caller has them."""
        self._text = text
        if lines is None:
            lines = split_lines(text)
        self._starts = list(itertools.accumulate(map(len, lines), initial=0))
        self._found: dict[frozenset[str], list[int]] = {}

    def lines_with(self, words: set[str]) -> list[int]:
        """The lines (1-based, ascending) where one of ``words`` occurs; each set of words
        is searched for once (a search is a pass over the whole text)."""
        key = frozenset(words)
        found = self._found.get(key)
        if found is None:
            found = self._found[key] = self._search(key)
        return found

    def _search(self, words: frozenset[str]) -> list[int]:
        if not words:
            return []
        alternatives = "|".join(re.escape(w) for w in sorted(words, key=lambda w: (-len(w), w)))
        found = {bisect.bisect_right(self._starts, m.start()) for m in re.finditer(alternatives, self._text)}
        return sorted(found)
