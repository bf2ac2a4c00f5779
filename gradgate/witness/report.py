"""Verdicts of a ``gradgate witness`` run: one per case and one per static finding (no torch).

A case is ``SAME`` (every forward took the reference's path), ``DIVERGES`` or ``ERROR``.
A finding of ``gradgate check`` in a case's source file (or on a divergence's stack) is
``WITNESSED`` when a divergence of some case names it, else ``NOT WITNESSED``.
"""

from __future__ import annotations

import os
from typing import Any

from .findings import lint_files


def shown(path: str) -> str:
    """``path`` as the verdict lines show it: relative to the current folder when under it."""
    try:
        rel = os.path.relpath(path)
    except ValueError:  # another drive (Windows)
        return path
    return path if rel.startswith("..") else rel


def case_verdict(case: dict[str, Any]) -> tuple[str, str]:
    """(status, explanation) of one case of the rank-0 result."""
    if "error" in case:
        return "ERROR", case["error"]
    per_rank = case.get("divergences_per_rank") or []
    failed = [r for r, n in enumerate(per_rank) if n == -1]
    if failed:
        return "ERROR", f"failed on rank(s) {failed}"
    diverging = [r for r, n in enumerate(per_rank) if n]
    if case.get("same") and not diverging:
        labels = ", ".join(f["label"] for f in case.get("forwards", []))
        return "SAME", f"same forward path in {labels}"
    parts = []
    for d in case.get("divergences", []):
        p = d.get("parting")
        if d["kind"] == "training":
            parts.append(f"{d['other']}: module.training differs")
        elif p:
            other = f" ({d['other']}: line {p['other_line']})" if p["other_line"] != p["line"] else ""
            where = f"{shown(p['path'])}:{p['line']}{other}"
            parts.append(f"{d['other']}: paths part at {where}")
    for mode, error in (case.get("errors") or {}).items():
        parts.append(f"{mode}: {error}")
    ranks = f" on rank(s) {diverging}" if diverging else ""
    return "DIVERGES", f"{len(case.get('divergences', []))} divergence(s){ranks}; " + "; ".join(_unique(parts))


def _unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))


def finding_verdicts(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Each static finding of the cases' files and stacks, with the cases that witness it."""
    paths = {c["source"] for c in result["cases"] if c.get("source")}
    for case in result["cases"]:
        for d in case.get("divergences", []):
            paths |= {f["path"] for side in ("expected", "found") for e in d[side] for f in e["stack"]}
    witnessed: dict[tuple[str, int, str], list[str]] = {}
    for case in result["cases"]:
        for d in case.get("divergences", []):
            for f in d.get("findings", []):
                labels = witnessed.setdefault((f["path"], f["line"], f["rule"]), [])
                entry = f"{case['name']} ({d['other']}, {f['relation']})"
                if entry not in labels:
                    labels.append(entry)
    out = []
    for findings in lint_files(paths).values():
        for finding in findings:
            by = witnessed.get((finding.path, finding.line, finding.rule), [])
            out.append(
                {
                    "path": finding.path,
                    "line": finding.line,
                    "column": finding.column,
                    "rule": finding.rule,
                    "message": finding.message,
                    "verdict": "WITNESSED" if by else "NOT WITNESSED",
                    "witnessed_by": by,
                }
            )
    return out


def verdict_lines(report: dict[str, Any]) -> list[str]:
    lines = []
    for case in report["cases"]:
        status, text = case_verdict(case)
        lines.append(f"{status:<8} {case['name']}: {text}")
    for f in report.get("findings", []):
        by = f"by {', '.join(f['witnessed_by'])}" if f["witnessed_by"] else "no case diverges there"
        lines.append(f"{f['verdict']:<13} {f['rule']} {shown(f['path'])}:{f['line']}:{f['column']} {by}")
    for error in report.get("run_errors", []):
        lines.append(f"ERROR    run: {error}")
    lines.append(summary_line(report))
    return lines


def summary_line(report: dict[str, Any]) -> str:
    counts: dict[str, int] = {}
    for case in report["cases"]:
        status = case_verdict(case)[0]
        counts[status] = counts.get(status, 0) + 1
    witnessed = sum(1 for f in report.get("findings", []) if f["verdict"] == "WITNESSED")
    cases = ", ".join(f"{counts[s]} {s}" for s in ("SAME", "DIVERGES", "ERROR") if s in counts) or "no cases"
    return f"{cases}; {witnessed} of {len(report.get('findings', []))} finding(s) witnessed"


def exit_code(report: dict[str, Any]) -> int:
    """0: every case took the same path; 1: a case diverges, errors, or the run failed."""
    if report.get("run_errors"):
        return 1
    return 0 if all(case_verdict(c)[0] == "SAME" for c in report["cases"]) else 1
