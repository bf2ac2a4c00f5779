"""Suppression comments: ``# gradgate: ignore[GG001]`` on a finding's line (or its
statement's first line) silences it; a bare ``# gradgate: ignore`` silences every rule."""

from __future__ import annotations

import re
from collections.abc import Iterator

SUPPRESSION = re.compile(r"#\s*gradgate:\s*ignore(?:\[(?P<codes>[A-Za-z0-9_,\s]*)\])?")


def suppressed(line_text: str, rule: str) -> bool:
    for match in SUPPRESSION.finditer(line_text):
        codes = match.group("codes")
        if codes is None or rule in {c.strip() for c in codes.split(",")}:
            return True
    return False


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
                    parsed = None if codes is None else tuple(c.strip() for c in codes.split(",") if c.strip())
                    yield token.start[0], token.start[1] + 1 + match.start(), match.group(0), parsed
    except (tokenize.TokenError, SyntaxError):
        return
