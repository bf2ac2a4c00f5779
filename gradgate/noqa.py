"""``gradgate check --add-noqa``: a suppression comment on each current finding's line.

The comment is gradgate's own (``# gradgate: ignore[GG001]``, codes merged into one that
is already there), appended to the finding's line, or to its statement's first line when
the finding's line ends inside a string or with a backslash. Every other byte of the file
is kept: encoding, line endings, the missing final newline.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterable

from .results import Finding
from .suppression import SUPPRESSION, suppressed

_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


def _open_lines(text: str) -> set[int]:
    """Lines whose end lies inside a token (a multi-line string) or that continue with
    a backslash: a comment cannot be appended to them."""
    blocked: set[int] = set()
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.start[0] != token.end[0]:
                blocked.update(range(token.start[0], token.end[0]))
    except (tokenize.TokenError, SyntaxError):
        pass
    for number, line in enumerate(_LINE.findall(text), start=1):
        if line.rstrip("\r\n").endswith("\\"):
            blocked.add(number)
    return blocked


def _statement_lines(text: str) -> dict[int, int]:
    """Each line of a simple statement (or compound header) -> its first line."""
    first: dict[int, int] = {}
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return first
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt):
            end = node.end_lineno or node.lineno
            body = getattr(node, "body", None)
            if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
                end = body[0].lineno - 1  # a compound statement: its header only
            for line in range(node.lineno, max(node.lineno, end) + 1):
                first.setdefault(line, node.lineno)
                if first[line] < node.lineno:
                    first[line] = node.lineno  # the innermost statement wins
    return first


def _with_codes(line: str, codes: list[str]) -> str:
    body = line.rstrip("\r\n")
    ending = line[len(body) :]
    match = SUPPRESSION.search(body)
    if match is not None and match.group("codes") is not None:
        old = [c.strip().upper() for c in match.group("codes").split(",") if c.strip()]
        merged = old + [c for c in codes if c not in old]
        body = body[: match.start()] + f"# gradgate: ignore[{', '.join(merged)}]" + body[match.end() :]
    else:
        separator = "  " if body.strip() else ""
        body = f"{body.rstrip()}{separator}# gradgate: ignore[{', '.join(codes)}]"
    return body + ending


def add_suppressions(text: str, findings: Iterable[Finding]) -> tuple[str, int]:
    """``text`` with a suppression for each of ``findings``; and how many were added."""
    lines = _LINE.findall(text)
    blocked = _open_lines(text)
    statements = _statement_lines(text)
    wanted: dict[int, list[str]] = {}
    added = 0
    for finding in findings:
        target = finding.line
        if target in blocked:
            target = statements.get(finding.line, finding.line)
        if target in blocked or not 1 <= target <= len(lines):
            continue  # nowhere a comment can go
        if suppressed(lines[target - 1], finding.rule):
            continue
        codes = wanted.setdefault(target, [])
        if finding.rule not in codes:
            codes.append(finding.rule)
            added += 1
    for line, codes in wanted.items():
        lines[line - 1] = _with_codes(lines[line - 1], codes)
    return "".join(lines), added
