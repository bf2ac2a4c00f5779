"""Turning results into text. Reporters return strings; only the CLI prints them."""

from __future__ import annotations

import json
from collections.abc import Sequence

from .escape import display, encodable, github_data, github_property, uri_path
from .results import FileResult, Finding


def text_line(finding: Finding) -> str:
    return f"{display(finding.path)}:{finding.line}:{finding.column}: {finding.rule} {display(finding.message)}"


def render_text(findings: Sequence[Finding], show_source: bool = False) -> str:
    out: list[str] = []
    for finding in findings:
        out.append(text_line(finding))
        if show_source and finding.source_line:
            out.append(f"    {display(finding.source_line.rstrip(), keep_tabs=True)}")
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
    edit = finding.edit
    return {
        "path": encodable(finding.path),
        "line": finding.line,
        "column": finding.column,
        "end_line": finding.end_line,
        "end_column": finding.end_column,
        "rule": finding.rule,
        "message": finding.message,
        "fixable": finding.fixable,
        "fix": None if edit is None else {
            "line": edit.line, "column": edit.column, "end_line": edit.end_line,
            "end_column": edit.end_column, "content": edit.content,
        },
    }


def render_json(findings: Sequence[Finding]) -> str:
    return json.dumps([finding_dict(f) for f in findings], indent=2) + "\n"


def unified_diff(result: FileResult) -> bytes:
    """A ``git apply``-able diff of one fixed file (paths as ``a/PATH`` / ``b/PATH``), in
    the file's own bytes: lines are split at LF only, as git splits them."""
    assert result.source is not None and result.fixed is not None
    import difflib  # only for --diff

    from .escape import git_path

    path = result.path[2:] if result.path.startswith("./") else result.path
    before = _lf_lines(result.source)
    after = _lf_lines(result.fixed)
    lines = difflib.diff_bytes(
        difflib.unified_diff, before, after, git_path(b"a/", path), git_path(b"b/", path)
    )
    out = []
    for line in lines:
        out.append(line)
        if not line.endswith(b"\n"):
            out.append(b"\n\\ No newline at end of file\n")
    return b"".join(out)


def _lf_lines(data: bytes) -> list[bytes]:
    lines = data.split(b"\n")
    last = lines.pop()
    out = [line + b"\n" for line in lines]
    if last:
        out.append(last)
    return out


# -- GitHub Actions workflow commands ---------------------------------------------------
def render_github(findings: Sequence[Finding]) -> str:
    out = []
    for f in findings:
        props = ",".join(
            [
                f"file={github_property(f.path)}",
                f"line={f.line}",
                f"col={f.column}",
                f"endLine={f.end_line}",
                f"endColumn={f.end_column}",
                f"title={github_property(f'gradgate {f.rule}')}",
            ]
        )
        out.append(f"::error {props}::{github_data(f'{f.rule} {f.message}')}\n")
    return "".join(out)


# -- SARIF 2.1.0 ----------------------------------------------------------------------
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def _region(line: int, column: int, end_line: int, end_column: int) -> dict[str, int]:
    return {"startLine": line, "startColumn": column, "endLine": end_line, "endColumn": end_column}


def _uri(path: str) -> str:
    normal = path.replace("\\", "/")
    if normal.startswith("./"):
        normal = normal[2:]
    return uri_path(normal)


def render_sarif(findings: Sequence[Finding], errors: Sequence[FileResult] = (), root: str | None = None) -> str:
    import os

    from . import __version__
    from .rule import all_rules

    rules = list(all_rules())
    index = {rule.CODE: i for i, rule in enumerate(rules)}
    driver_rules = []
    for rule in rules:
        doc = rule.documentation()
        first = doc.split("## Why is this bad?")[0].replace("## What it does", "").strip()
        driver_rules.append(
            {
                "id": rule.CODE,
                "name": rule.NAME,
                "shortDescription": {"text": rule.MESSAGE},
                "fullDescription": {"text": " ".join(first.split())},
                "help": {"text": doc, "markdown": doc},
                "helpUri": f"https://github.com/gradgate/gradgate/blob/main/docs/rules/{rule.CODE}.md",
                "defaultConfiguration": {"level": "error"},
                "properties": {"tags": ["pytorch", "autograd", "correctness", "performance"]},
            }
        )
    results = []
    for f in findings:
        location = {
            "physicalLocation": {
                "artifactLocation": {"uri": _uri(f.path), "uriBaseId": "%SRCROOT%"},
                "region": _region(f.line, f.column, f.end_line, f.end_column),
            }
        }
        result: dict[str, object] = {
            "ruleId": f.rule,
            "ruleIndex": index.get(f.rule, 0),
            "level": "error",
            "message": {"text": f.message},
            "locations": [location],
            "partialFingerprints": {"gradgate/v1": fingerprint(f)},
        }
        if f.edit is not None:
            e = f.edit
            result["fixes"] = [
                {
                    "description": {"text": "Remove the grad-mode operand"},
                    "artifactChanges": [
                        {
                            "artifactLocation": {"uri": _uri(f.path), "uriBaseId": "%SRCROOT%"},
                            "replacements": [
                                {
                                    "deletedRegion": _region(e.line, e.column, e.end_line, e.end_column),
                                    "insertedContent": {"text": e.content},
                                }
                            ],
                        }
                    ],
                }
            ]
        results.append(result)
    notifications = [
        {
            "level": "error",
            "message": {"text": f"{display(r.path)}: {display(r.error or '')}"},
            "locations": [{"physicalLocation": {"artifactLocation": {"uri": _uri(r.path), "uriBaseId": "%SRCROOT%"}}}],
        }
        for r in errors
    ]
    base = (root or os.getcwd()).replace("\\", "/").rstrip("/") + "/"
    sarif = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "gradgate",
                        "version": __version__,
                        "semanticVersion": __version__,
                        "informationUri": "https://github.com/gradgate/gradgate",
                        "rules": driver_rules,
                    }
                },
                "originalUriBaseIds": {"%SRCROOT%": {"uri": "file://" + _uri_abs(base)}},
                "invocations": [
                    {"executionSuccessful": not errors, "toolExecutionNotifications": notifications}
                ],
                "results": results,
            }
        ],
    }
    return json.dumps(sarif, indent=2) + "\n"


def _uri_abs(path: str) -> str:
    return uri_path(path if path.startswith("/") else "/" + path)


def fingerprint(finding: Finding, root: str | None = None) -> str:
    """Identity of a finding that survives unrelated edits: the rule, the file (relative
    to ``root`` when given) and the text of its line (not its number)."""
    import hashlib
    import os

    path = os.path.relpath(os.path.abspath(finding.path), root) if root else finding.path
    normal = path.replace("\\", "/")
    if normal.startswith("./"):
        normal = normal[2:]
    key = "\0".join([finding.rule, normal, " ".join(finding.source_line.split())])
    return hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()[:32]
