"""Tie divergences to the static findings of ``gradgate check`` (no torch).

The files on a divergence's stacks are linted with :func:`gradgate.engine.lint_source`
and the project's settings. A finding is linked when its line is on an anchor event's
stack ("on the stack"), or when it lies in the function where the paths part, at or
before the parting line ("in the parting function": the flag assignment that decides the
branch taken a few lines later).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from ..results import Finding
from .diff import Divergence, LinkedFinding


def lint_files(paths: Iterable[str]) -> dict[str, list[Finding]]:
    """Findings per file; files that cannot be read or linted have none."""
    from .. import settings as settings_module
    from ..engine import lint_source

    out: dict[str, list[Finding]] = {}
    for path in sorted(set(paths)):
        try:
            data = Path(path).read_bytes()
        except OSError:
            out[path] = []
            continue
        config = settings_module.resolve((path,)).config
        result = lint_source(path, data, config)
        out[path] = list(result.findings)
    return out


def _linked(finding: Finding, relation: str) -> LinkedFinding:
    return LinkedFinding(finding.path, finding.line, finding.column, finding.rule, finding.message, relation)


def link(divergence: Divergence, findings: dict[str, list[Finding]]) -> tuple[LinkedFinding, ...]:
    """The findings of ``findings`` (per file) that explain ``divergence``."""
    on_stack = {(f.path, f.line) for e in divergence.anchors if e is not None for f in e.stack}
    p = divergence.parting
    out: list[LinkedFinding] = []
    for path in sorted(divergence.stack_paths()):
        for finding in findings.get(path, []):
            lines = {finding.line, *(step.line for step in finding.flow if step.path == path)}
            if any((path, line) in on_stack for line in lines):
                out.append(_linked(finding, "on the stack"))
            elif p is not None and p.path == path and p.first_line <= finding.line <= max(p.line, p.other_line):
                out.append(_linked(finding, "in the parting function"))
    return tuple(out)


def link_all(divergences: list[Divergence]) -> list[Divergence]:
    """``divergences`` with their linked findings (each file linted once)."""
    paths = {path for d in divergences for path in d.stack_paths()}
    if not paths:
        return divergences
    findings = lint_files(paths)
    return [d.with_findings(link(d, findings)) for d in divergences]
