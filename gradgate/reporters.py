"""Turning results into text. Reporters return strings; only the CLI prints them."""

from __future__ import annotations

import difflib
import json
from collections.abc import Sequence

from .engine import FileResult, Finding


def text_line(finding: Finding) -> str:
    return f"{finding.path}:{finding.line}:{finding.column}: {finding.rule} {finding.message}"


def render_text(findings: Sequence[Finding], show_source: bool = False) -> str:
    out: list[str] = []
    for finding in findings:
        out.append(text_line(finding))
        if show_source and finding.source_line:
            out.append(f"    {finding.source_line.rstrip()}")
            width = max(1, (finding.end_column - finding.column) if finding.end_line == finding.line else 1)
            out.append("    " + " " * (finding.column - 1) + "^" * width)
            if finding.fixable:
                out.append("    help: remove the grad-mode operand (`gradgate fix`)")
    return "\n".join(out) + ("\n" if out else "")


def summary(findings: Sequence[Finding], errors: int) -> str:
    if not findings and not errors:
        return "All checks passed."
    fixable = sum(f.fixable for f in findings)
    parts = [f"Found {len(findings)} finding{'s' if len(findings) != 1 else ''}"]
    if fixable:
        parts.append(f" ({fixable} fixable with `gradgate fix`)")
    parts.append(".")
    if errors:
        parts.append(f" {errors} file{'s' if errors != 1 else ''} could not be checked.")
    return "".join(parts)


def finding_dict(finding: Finding) -> dict[str, object]:
    return {
        "path": finding.path,
        "line": finding.line,
        "column": finding.column,
        "end_line": finding.end_line,
        "end_column": finding.end_column,
        "rule": finding.rule,
        "message": finding.message,
        "fixable": finding.fixable,
    }


def render_json(findings: Sequence[Finding]) -> str:
    return json.dumps([finding_dict(f) for f in findings], indent=2) + "\n"


def unified_diff(result: FileResult) -> str:
    """A ``git apply``-able diff of one fixed file (paths as ``a/PATH`` / ``b/PATH``)."""
    assert result.source is not None and result.fixed is not None
    from .source import decode_check

    encoding = decode_check(result.source)
    before = result.source.decode(encoding).splitlines(keepends=True)
    after = result.fixed.decode(encoding).splitlines(keepends=True)
    path = result.path[2:] if result.path.startswith("./") else result.path
    lines = difflib.unified_diff(before, after, f"a/{path}", f"b/{path}")
    out = []
    for line in lines:
        out.append(line)
        if not line.endswith(("\n", "\r")):
            out.append("\n\\ No newline at end of file\n")
    return "".join(out)
