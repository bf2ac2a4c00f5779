"""Suppression comments.

On a finding's line (or its statement's first line):

- ``# gradgate: ignore[GG001]`` silences GG001; a bare ``# gradgate: ignore`` every rule;
- ``# noqa: GG001`` silences GG001 too, and a bare ``# noqa`` every rule (ruff's and
  flake8's semantics: ``# noqa:GG001,GG003`` and ``# NOQA`` work, codes of other tools in
  the same comment are ignored).

Anywhere in a file, on a line of its own, ``# gradgate: ignore-file`` skips the whole file
(:func:`file_ignored`). Codes are matched case-insensitively.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

SUPPRESSION = re.compile(r"#\s*gradgate:\s*ignore(?![-\w])(?:\[(?P<codes>[A-Za-z0-9_,\s]*)\])?")
#: flake8's and ruff's no-QA comment, bare or with codes after a colon (``A1, B2``; the colon
#: with or without spaces)
NOQA = re.compile(r"#\s*noqa(?::\s?(?P<codes>[A-Za-z]+[0-9]+(?:[,\s]+[A-Za-z]+[0-9]+)*))?", re.IGNORECASE)
#: a file-level exemption on a line of its own
IGNORE_FILE = re.compile(r"^[ \t\f]*#\s*gradgate:\s*ignore-file\b", re.MULTILINE)


def _codes(text: str) -> set[str]:
    return {c.upper() for c in re.split(r"[,\s]+", text) if c}


def suppressed(line_text: str, rule: str) -> bool:
    """Does a suppression comment in ``line_text`` silence ``rule``?"""
    rule = rule.upper()
    if "gradgate" in line_text:
        for match in SUPPRESSION.finditer(line_text):
            codes = match.group("codes")
            if codes is None or rule in _codes(codes):
                return True
    if "noqa" in line_text.lower():
        for match in NOQA.finditer(line_text):
            codes = match.group("codes")
            if codes is None or rule in _codes(codes):
                return True
    return False


def file_ignored(text: str) -> bool:
    """Does ``text`` hold a ``# gradgate: ignore-file`` comment on a line of its own?"""
    return "ignore-file" in text and IGNORE_FILE.search(text) is not None


def suppression_comments(text: str) -> Iterator[tuple[int, int, str, tuple[str, ...] | None]]:
    """(line, 1-based column, comment text, codes or None for a bare one) of every
    ``# gradgate: ignore`` comment (real comments only, not strings)."""
    import io
    import tokenize

    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.COMMENT:
                match = SUPPRESSION.search(token.string)
                if match:
                    codes = match.group("codes")
                    parsed = None if codes is None else tuple(c.strip().upper() for c in codes.split(",") if c.strip())
                    yield token.start[0], token.start[1] + 1 + match.start(), match.group(0), parsed
    except (tokenize.TokenError, SyntaxError):
        return


def file_ignored_bytes(data: bytes) -> bool:
    """:func:`file_ignored` on a file's bytes (any ASCII-compatible encoding); cheap
    when the file holds no ``ignore-file``."""
    return b"ignore-file" in data and file_ignored(data.decode("latin-1"))
