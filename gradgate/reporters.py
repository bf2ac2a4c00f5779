"""Turning results into text. Reporters return strings; only the CLI prints them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from .escape import display, encodable, github_data, github_property, uri_path
from .results import Edit, FileResult, Finding, FlowStep, Notice

if TYPE_CHECKING:
    from .rule import Rule

#: ANSI styles of the text format (used only when colour is on)
_BOLD, _RED, _CYAN, _YELLOW, _DIM, _RESET = "\x1b[1m", "\x1b[31m", "\x1b[36m", "\x1b[33m", "\x1b[2m", "\x1b[0m"


def one_line(text: str) -> str:
    """``text`` on one line (line breaks in quoted code escaped as ``\\n``; see
    :func:`gradgate.escape.display`)."""
    return display(text)


def _style(text: str, style: str, color: bool) -> str:
    return f"{style}{text}{_RESET}" if color else text


def text_line(finding: Finding, color: bool = False) -> str:
    where = f"{display(finding.path)}:{finding.line}:{finding.column}:"
    if not color:
        return f"{where} {finding.rule} {one_line(finding.message)}"
    return f"{_style(where, _BOLD, True)} {_style(finding.rule, _BOLD + _RED, True)} {one_line(finding.message)}"


def _fix_note(finding: Finding, unsafe_fixes: bool) -> str | None:
    from .results import Applicability

    if finding.applicability is None:
        return None
    if finding.applicability is Applicability.DISPLAY:
        return "help: a fix is suggested (display only; never applied)"
    title = finding.fix_title or "remove the grad-mode operand"
    if finding.fixable:
        return f"help: {title} (`gradgate fix`)"
    if unsafe_fixes:
        return f"help: {title} (`gradgate fix --unsafe-fixes`; unsafe fix)"
    return "help: an unsafe fix is available (`gradgate fix --unsafe-fixes`)"


def _cells(text: str) -> int:
    """The terminal cells ``text`` takes: 2 for a wide (East Asian) character, 0 for a
    combining one, 1 for the others."""
    import unicodedata

    return sum(0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def _pad(prefix: str) -> str:
    """What goes under ``prefix`` (the line up to a finding) so that a caret lands under
    the finding: its tabs kept, blanks as wide as each other character."""
    return "".join(c if c == "\t" else " " * _cells(c) for c in prefix)


def render_text(
    findings: Sequence[Finding],
    show_source: bool = False,
    color: bool = False,
    show_fixes: bool = False,
    unsafe_fixes: bool = False,
) -> str:
    out: list[str] = []
    for finding in findings:
        out.append(text_line(finding, color))
        if show_source and finding.source_line:
            out.append(f"    {display(finding.source_line.rstrip(), keep_tabs=True)}")
            line = finding.source_line
            end = finding.end_column if finding.end_line == finding.line else finding.column + 1
            pad = _pad(line[: finding.column - 1])
            width = max(1, _cells(line[finding.column - 1 : end - 1]))
            out.append("    " + pad + _style("^" * width, _RED, color))
        for step in finding.flow if show_source else ():  # the concise form stays one line
            where = f"{display(step.path)}:{step.line}:{step.column}"
            out.append(f"    {_style('note:', _CYAN, color)} {where}: {one_line(step.message)}")
        if show_source or show_fixes:
            note = _fix_note(finding, unsafe_fixes)
            if note is not None:
                out.append("    " + _style(note, _YELLOW, color))
        if show_fixes and finding.edit is not None:
            e = finding.edit
            out.append(
                f"    {_style('fix:', _DIM, color)} replace {e.line}:{e.column}-{e.end_line}:{e.end_column} "
                f"with `{one_line(e.content)}`"
            )
    return "\n".join(out) + ("\n" if out else "")


def summary(findings: Sequence[Finding], errors: int, unsafe_fixes: bool = False, notices: int = 0) -> str:
    """The last line of the text format; never "All checks passed." when the run gave
    up on something (``notices``: a function or decision not analysed)."""
    given_up = (
        f" {notices} part{'s' if notices != 1 else ''} of the code not analysed (see the warnings)." if notices else ""
    )
    if not findings and not errors:
        return "No findings in what was analysed." + given_up if notices else "All checks passed."
    fixable = sum(f.fixable_with(unsafe_fixes) for f in findings)
    hidden = 0 if unsafe_fixes else sum(f.fixable_with(True) and not f.fixable for f in findings)
    parts = [f"Found {len(findings)} finding{'s' if len(findings) != 1 else ''}"]
    if fixable:
        parts.append(f" ({fixable} fixable with `gradgate fix{' --unsafe-fixes' if unsafe_fixes else ''}`)")
    parts.append(".")
    if hidden:
        parts.append(f" ({hidden} hidden fix{'es' if hidden != 1 else ''} can be enabled with `--unsafe-fixes`.)")
    if errors:
        parts.append(f" {errors} file{'s' if errors != 1 else ''} could not be checked.")
    return "".join(parts) + given_up


def render_statistics(findings: Sequence[Finding], unsafe_fixes: bool = False) -> str:
    """One line per rule, most frequent first: count, code, ``[*]`` when every finding
    of it is fixable, and the rule's name (ruff's ``--statistics``)."""
    from collections import Counter

    from .rule import rule_by_code

    counts = Counter(f.rule for f in findings)
    rules = rule_by_code()
    width = max((len(str(n)) for n in counts.values()), default=1)
    out = []
    for code, count in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
        fixable = all(f.fixable_with(unsafe_fixes) for f in findings if f.rule == code)
        name = rules[code].NAME if code in rules else ""
        out.append(f"{count:>{width}}\t{code}\t{'[*] ' if fixable else '    '}{name}")
    return "\n".join(out) + ("\n" if out else "")


def render_fixed(results: Sequence[FileResult]) -> str:
    """What ``gradgate fix --show-fixes`` applied, by file and rule."""
    from collections import Counter

    from .rule import rule_by_code

    rules = rule_by_code()
    out = []
    for result in results:
        if not result.fixed_findings:
            continue
        out.append(f"{display(result.path)}:")
        for code, count in sorted(Counter(f.rule for f in result.fixed_findings).items()):
            name = rules[code].NAME if code in rules else ""
            out.append(f"    {count} \u00d7 {code} ({name})")
    return "\n".join(out) + ("\n" if out else "")


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
        "applicability": None if finding.applicability is None else finding.applicability.value,
        "fix": None
        if edit is None
        else {
            "line": edit.line,
            "column": edit.column,
            "end_line": edit.end_line,
            "end_column": edit.end_column,
            "content": edit.content,
        },
        "flow": [
            {"path": step.path, "line": step.line, "column": step.column, "message": step.message}
            for step in finding.flow
        ],
    }


def render_json(findings: Sequence[Finding], notices: Sequence[Notice] = ()) -> str:
    """The findings as a JSON array, followed by what the run gave up on: an entry of a
    notice has ``"rule": null`` (as ruff's JSON gives a syntax error ``"code": null``),
    the message, and no fix, so a consumer that reads JSON alone still hears of it."""
    import json  # (the text format, the common one, needs none)

    entries = [finding_dict(f) for f in findings] + [notice_dict(n) for n in notices]
    return json.dumps(entries, indent=2) + "\n"


def notice_dict(notice: Notice) -> dict[str, object]:
    """One notice as a JSON entry shaped as a finding's, with no rule and no fix."""
    return {
        "path": notice.path,
        "line": notice.line,
        "column": 1 if notice.line else 0,
        "end_line": notice.line,
        "end_column": 1 if notice.line else 0,
        "rule": None,
        "message": notice.message,
        "fixable": False,
        "applicability": None,
        "fix": None,
        "flow": [],
    }


def unified_diff(result: FileResult) -> bytes:
    """A ``git apply``-able diff of one fixed file (paths as ``a/PATH`` / ``b/PATH``), in
    the file's own bytes: lines are split at LF only, as git splits them."""
    assert result.source is not None and result.fixed is not None
    import difflib  # only for --diff

    from .escape import git_path

    path = result.path[2:] if result.path.startswith("./") else result.path
    before = _lf_lines(result.source)
    after = _lf_lines(result.fixed)
    lines = difflib.diff_bytes(difflib.unified_diff, before, after, git_path(b"a/", path), git_path(b"b/", path))
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
def render_github(findings: Sequence[Finding], errors: Sequence[FileResult] = ()) -> str:
    """Workflow-command annotations: one ``::error`` per finding, and one per file that
    could not be read or parsed (at its line when the reason names one)."""
    out = []
    for r in errors:
        props = [f"file={github_property(r.path)}"]
        line = _error_line(r.error or "")
        if line is not None:
            props += [f"line={line[0]}", f"col={line[1]}"]
        props.append(f"title={github_property('gradgate error')}")
        out.append(f"::error {','.join(props)}::{github_data(f'{display(r.path)}: {r.error}')}\n")
    for f in findings:
        joined = ",".join(
            [
                f"file={github_property(f.path)}",
                f"line={f.line}",
                f"col={f.column}",
                f"endLine={f.end_line}",
                f"endColumn={f.end_column}",
                f"title={github_property(f'gradgate {f.rule}')}",
            ]
        )
        out.append(f"::error {joined}::{github_data(f'{f.rule} {f.message}')}\n")
    return "".join(out)


def _error_line(reason: str) -> tuple[int, int] | None:
    """(line, column) of a syntax error's reason (``syntax error at 3:7: ...``)."""
    import re

    match = re.match(r"syntax error at (\d+):(\d+)", reason)
    return (int(match.group(1)), max(1, int(match.group(2)))) if match else None


# -- SARIF 2.1.0 ----------------------------------------------------------------------
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def _region(line: int, column: int, end_line: int, end_column: int) -> dict[str, int]:
    return {"startLine": line, "startColumn": column, "endLine": end_line, "endColumn": end_column}


def _uri(path: str) -> str:
    normal = path.replace("\\", "/")
    if normal.startswith("./"):
        normal = normal[2:]
    return uri_path(normal)


def render_sarif(
    findings: Sequence[Finding],
    errors: Sequence[FileResult] = (),
    root: str | None = None,
    baselined: Sequence[Finding] = (),
    baseline_file: str | None = None,
    suppressed: Sequence[Finding] = (),
    notices: Sequence[Notice] = (),
) -> str:
    """SARIF 2.1.0. With a baseline, ``findings`` are the new results
    (``baselineState: new``) and ``baselined`` the known ones, reported as ``unchanged``
    with an external, accepted suppression (code scanning shows them as dismissed);
    ``suppressed`` are the findings a suppression comment silenced (an ``inSource``
    suppression)."""
    import os

    from . import __version__
    from .rule import all_rules

    rules = list(all_rules())
    index = {rule.CODE: i for i, rule in enumerate(rules)}
    tagged = [(f, "") for f in findings] + [(f, "baseline") for f in baselined] + [(f, "comment") for f in suppressed]
    tagged.sort(key=lambda item: item[0].sort_key())
    results = [_sarif_result(f, why, index, baseline_file) for f, why in tagged]
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
                        "rules": [_sarif_rule(rule) for rule in rules],
                    }
                },
                "columnKind": "unicodeCodePoints",
                "originalUriBaseIds": {"%SRCROOT%": {"uri": "file://" + _uri_abs(base)}},
                "invocations": [
                    {
                        "executionSuccessful": not errors,
                        "toolExecutionNotifications": [_sarif_notification(r) for r in errors]
                        + [_sarif_notice(n) for n in notices],
                    }
                ],
                "results": results,
            }
        ],
    }
    import json

    return json.dumps(sarif, indent=2) + "\n"


def _sarif_rule(rule: type[Rule]) -> dict[str, object]:
    """A rule's ``reportingDescriptor``: its message, the first section of its docs, the
    whole docs as help, and the page they are generated into."""
    doc = rule.documentation()
    first = doc.split("## Why is this bad?")[0].replace("## What it does", "").strip()
    return {
        "id": rule.CODE,
        "name": rule.NAME,
        "shortDescription": {"text": rule.MESSAGE},
        "fullDescription": {"text": " ".join(first.split())},
        "help": {"text": doc, "markdown": doc},
        "helpUri": f"https://github.com/gradgate/gradgate/blob/main/docs/rules/{rule.CODE}.md",
        "defaultConfiguration": {"level": "error"},
        "properties": {"tags": ["pytorch", "autograd", "correctness", "performance"]},
    }


def _sarif_location(path: str, region: dict[str, int]) -> dict[str, object]:
    return {"physicalLocation": {"artifactLocation": {"uri": _uri(path), "uriBaseId": "%SRCROOT%"}, "region": region}}


def _sarif_result(f: Finding, why: str, index: dict[str, int], baseline_file: str | None) -> dict[str, object]:
    """One finding as a SARIF result; ``why`` says what silenced it: ``baseline``, a
    suppression ``comment``, or nothing."""
    result: dict[str, object] = {
        "ruleId": f.rule,
        "ruleIndex": index.get(f.rule, 0),
        "level": "error",
        "message": {"text": f.message},
        "locations": [_sarif_location(f.path, _region(f.line, f.column, f.end_line, f.end_column))],
        "partialFingerprints": {"gradgate/v1": fingerprint(f)},
    }
    if baseline_file is not None:
        result["baselineState"] = "unchanged" if why == "baseline" else "new"
    if why == "baseline":
        result["suppressions"] = [
            {"kind": "external", "status": "accepted", "justification": f"recorded in the baseline {baseline_file}"}
        ]
    elif why == "comment":
        result["suppressions"] = [{"kind": "inSource", "status": "accepted"}]
    if f.flow:
        result["codeFlows"] = [{"threadFlows": [{"locations": [_sarif_flow_step(step) for step in f.flow]}]}]
    if f.edit is not None:
        result["fixes"] = [_sarif_fix(f.path, f.edit, f.fix_title)]
    return result


def _sarif_flow_step(step: FlowStep) -> dict[str, object]:
    """A step of grad mode's way from its capture to the decision, as a thread-flow location."""
    location = _sarif_location(step.path, {"startLine": step.line, "startColumn": step.column})
    return {"location": {**location, "message": {"text": step.message}}}


def _sarif_fix(path: str, e: Edit, title: str = "") -> dict[str, object]:
    """A SARIF ``fix``: the edit, described by what it does (its finding's fix title:
    "Delete the statement ...", "Remove the grad-mode operand")."""
    title = title or "remove the grad-mode operand"
    return {
        "description": {"text": title[0].upper() + title[1:]},
        "artifactChanges": [
            {
                "artifactLocation": {"uri": _uri(path), "uriBaseId": "%SRCROOT%"},
                "replacements": [
                    {
                        "deletedRegion": _region(e.line, e.column, e.end_line, e.end_column),
                        "insertedContent": {"text": e.content},
                    }
                ],
            }
        ],
    }


def _sarif_notification(r: FileResult) -> dict[str, object]:
    """A file that could not be checked, as a tool execution notification."""
    physical: dict[str, object] = {"artifactLocation": {"uri": _uri(r.path), "uriBaseId": "%SRCROOT%"}}
    line = _error_line(r.error or "")
    if line is not None:
        physical["region"] = {"startLine": line[0], "startColumn": line[1]}
    return {
        "level": "error",
        "descriptor": {"id": "syntax-error" if line is not None else "unreadable-file"},
        "message": {"text": f"{display(r.path)}: {display(r.error or '')}"},
        "locations": [{"physicalLocation": physical}],
    }


def _sarif_notice(notice: Notice) -> dict[str, object]:
    """Something the run gave up on, as a warning notification."""
    physical: dict[str, object] = {"artifactLocation": {"uri": _uri(notice.path), "uriBaseId": "%SRCROOT%"}}
    if notice.line:
        physical["region"] = {"startLine": notice.line}
    return {
        "level": "warning",
        "descriptor": {"id": "not-analysed"},
        "message": {"text": f"{display(notice.path)}: {display(notice.message)}"},
        "locations": [{"physicalLocation": physical}],
    }


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


# -- JUnit XML --------------------------------------------------------------------------
def render_junit(findings: Sequence[Finding], errors: Sequence[FileResult] = ()) -> str:
    """JUnit XML as ruff writes it: a test suite per file, a failing test case per
    finding, an erroring one (``<error>``, counted in ``errors``) per file that could not
    be checked; one passing case when all is clean."""
    from xml.sax.saxutils import quoteattr

    def attr(value: object) -> str:
        return quoteattr(_xml_text(str(value)))

    by_file: dict[str, list[tuple[str, str, str, str]]] = {}
    for f in findings:
        by_file.setdefault(display(f.path), []).append(
            (
                f"org.gradgate.{f.rule}",
                f"{display(f.path)}:{f.line}:{f.column}: {f.rule} {f.message}",
                f"line {f.line}, col {f.column}, {f.message}",
                "failure",
            )
        )
    for r in errors:
        by_file.setdefault(display(r.path), []).append(
            ("org.gradgate.error", f"{display(r.path)}: {r.error}", str(r.error), "error")
        )
    cases_in = sum(len(cases) for cases in by_file.values())
    failures, failed = len(findings), len(errors)
    out = ['<?xml version="1.0" encoding="UTF-8"?>']
    out.append(
        f'<testsuites name="gradgate" tests={attr(max(cases_in, 1))} failures={attr(failures)} errors={attr(failed)}>'
    )
    if not by_file:
        out.append('  <testsuite name="gradgate" tests="1" failures="0" errors="0">')
        out.append('    <testcase name="No findings" classname="gradgate"/>')
        out.append("  </testsuite>")
    for path, cases in by_file.items():
        errored = sum(1 for case in cases if case[3] == "error")
        out.append(
            f"  <testsuite name={attr(path)} tests={attr(len(cases))} failures={attr(len(cases) - errored)} "
            f"errors={attr(errored)}>"
        )
        for name, message, body, kind in cases:
            out.append(f"    <testcase name={attr(name)} classname={attr(path)}>")
            out.append(f"      <{kind} message={attr(message)}>{_xml_escape(body)}</{kind}>")
            out.append("    </testcase>")
        out.append("  </testsuite>")
    out.append("</testsuites>")
    return "\n".join(out) + "\n"


def _xml_text(text: str) -> str:
    """``text`` without the characters XML 1.0 cannot carry."""
    return "".join(c if c in "\t\n\r" or (c >= " " and c not in "\ufffe\uffff") else "\ufffd" for c in text)


def _xml_escape(text: str) -> str:
    from xml.sax.saxutils import escape

    return escape(_xml_text(text))


# -- GitLab Code Quality -----------------------------------------------------------------
def render_gitlab(findings: Sequence[Finding], errors: Sequence[FileResult] = ()) -> str:
    """GitLab Code Quality report (a JSON array of issues; ``artifacts: reports:
    codequality``). Fingerprints are unique per issue: an identical line's second
    finding gets its own."""
    import hashlib
    import json

    out = []
    seen: dict[str, int] = {}

    def unique(key: str) -> str:
        digest = hashlib.sha256(key.encode()).hexdigest()[:32]
        n = seen.get(digest, 0)
        seen[digest] = n + 1
        return digest if n == 0 else hashlib.sha256(f"{key}\0{n}".encode()).hexdigest()[:32]

    for f in findings:
        out.append(
            {
                "description": f"{f.rule} {f.message}",
                "check_name": f.rule,
                "fingerprint": unique(fingerprint(f)),
                "severity": "major",
                "location": {
                    "path": encodable(f.path).replace("\\", "/"),
                    "positions": {
                        "begin": {"line": f.line, "column": f.column},
                        "end": {"line": f.end_line, "column": f.end_column},
                    },
                },
            }
        )
    for r in errors:
        line = _error_line(r.error or "") or (1, 1)
        out.append(
            {
                "description": f"{encodable(r.path)}: {r.error}",
                "check_name": "gradgate-error",
                "fingerprint": unique(f"error\0{r.path}\0{r.error}"),
                "severity": "blocker",
                "location": {"path": encodable(r.path).replace("\\", "/"), "lines": {"begin": line[0]}},
            }
        )
    return json.dumps(out, indent=2) + "\n"
