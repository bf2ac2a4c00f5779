"""A module's lines as CPython's tokenizer splits them, and where words occur in them:
the pre-filter that lets the model skip the functions that cannot hold what a question
looks for."""

from __future__ import annotations

import bisect
import itertools
import re

_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


def split_lines(text: str) -> list[str]:
    """Lines with their own endings, split where CPython's tokenizer splits them (at
    ``\\r\\n``, ``\\r`` and ``\\n``; ``str.splitlines`` splits at more)."""
    if "\r" in text:
        return _LINE.findall(text)
    lines = text.split("\n")  # no carriage return: the lines end at each newline (twice as fast)
    last = lines.pop()
    out = [line + "\n" for line in lines]
    if last:
        out.append(last)
    return out


def holds_line_within(lines: list[int], first: int, last: int) -> bool:
    """Does ``lines`` (line numbers, ascending, as :meth:`LineIndex.lines_with` gives them)
    hold one from ``first`` to ``last``?"""
    at = bisect.bisect_left(lines, first)
    return at < len(lines) and lines[at] <= last


class LineIndex:
    """Line numbers of the places where words occur in a text.

    Python reads an identifier as its NFKC form (``self.ﬁeld`` is ``self.field``,
    ``t.ｒegister_hook`` calls ``register_hook``): a line that is not ASCII is searched in
    that form, so that a word found nowhere is spelled nowhere in the code."""

    def __init__(self, text: str, lines: list[str] | None = None) -> None:
        """``lines``: :func:`split_lines` of ``text``, where the caller has them."""
        if lines is None:
            lines = split_lines(text)
        if not text.isascii():
            import unicodedata

            read = [line if line.isascii() else unicodedata.normalize("NFKC", line) for line in lines]
            if any(new is not old for new, old in zip(read, lines)):  # (a line in NFKC already is returned as it is)
                lines, text = read, "".join(read)
        self._text = text
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
        # each word found with str.find, a pass of its own: an alternation of the words
        # in one regular expression tried every branch at every offset (TransformerEngine's
        # module/ folder, 585 kB, nine grad-mode words: 5.1 ms as one alternation, 1.6 ms
        # as nine passes). A word holds no line end, so an occurrence lies on one line,
        # and the lines are those the leftmost matches of the alternation gave
        text, starts, found = self._text, self._starts, set()
        for word in words:
            if not word:  # the empty word occurs at every offset, the text's end too
                return list(range(1, bisect.bisect_right(starts, len(text)) + 1))
            at = text.find(word)
            while at >= 0:
                line = bisect.bisect_right(starts, at)
                found.add(line)
                # the rest of this line holds nothing new: go on from the next
                at = text.find(word, starts[line])
        return sorted(found)
