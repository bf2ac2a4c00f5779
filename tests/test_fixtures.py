"""Readable fixtures (TorchFix / flake8-bugbear style).

``check_*.py``: every line ending in ``# GG001`` (any rule code) must be reported with
that code, and no other line. The long form ``# GG001:37 forward communication flag``
also says the finding's column (1-based, as the CLI prints it) and how its message
starts (flake8-bugbear's and TorchFix's expected-output style). ``fix_*.in.py`` must be rewritten byte for byte into
``fix_*.out.py``, which must then be clean and stay unchanged under a second fix.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from gradgate.config import Config
from gradgate.engine import lint_source
from gradgate.results import Finding

FIXTURES = Path(__file__).parent / "fixtures"
#: ``# GG001`` or ``# GG001:COL message-prefix`` ending a line
_EXPECT = re.compile(rb"#\s*(GG\d{3})(?::(\d+)(?:[ \t]+(\S.*?))?)?\s*$")


@dataclass(frozen=True)
class Marker:
    line: int
    rule: str
    column: int | None = None
    message: str | None = None

    def matches(self, finding: Finding) -> bool:
        return (
            (finding.line, finding.rule) == (self.line, self.rule)
            and self.column in (None, finding.column)
            and (self.message is None or finding.message.startswith(self.message))
        )


def _expected(data: bytes) -> list[Marker]:
    out = []
    for number, line in enumerate(data.splitlines(), start=1):
        match = _EXPECT.search(line)
        if match:
            rule, column, message = match.groups()
            out.append(
                Marker(
                    number, rule.decode(), int(column) if column else None, message.decode("utf-8") if message else None
                )
            )
    return out


def _unmatched(findings: tuple[Finding, ...], markers: list[Marker]) -> list[str]:
    """What differs between the findings and the markers, one line each (empty: none)."""
    problems = []
    if [(f.line, f.rule) for f in findings] != [(m.line, m.rule) for m in markers]:
        problems.append(f"found {[(f.line, f.rule) for f in findings]}, marked {[(m.line, m.rule) for m in markers]}")
    for finding, marker in zip(findings, markers):
        if not marker.matches(finding):
            problems.append(
                f"line {finding.line}: found {finding.rule}:{finding.column} {finding.message!r}, "
                f"marked {marker.rule}:{marker.column} {marker.message!r}"
            )
    return problems


#: the configuration of fixtures/configured/: extra sources, patterns and APIs
CONFIGURED = Config(
    grad_functions=(*Config().grad_functions, "mylib.grad_on"),
    grad_names=(*Config().grad_names, "grad_carrier"),
    comm_flag_patterns=(*Config().comm_flag_patterns, "^my_pipe_"),
    comm_apis=("mylib.comm.send_async",),
)


def _config(path: Path) -> Config:
    return CONFIGURED if path.parent.name == "configured" else Config()


@pytest.mark.parametrize("prefilter", [True, False], ids=["fast", "whole-module"])
@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*/check_*.py")), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_check_fixture(path: Path, prefilter: bool):
    data = path.read_bytes()
    result = lint_source(str(path), data, _config(path), prefilter=prefilter)
    assert result.error is None
    assert _unmatched(result.findings, _expected(data)) == []


def test_markers_say_line_column_and_message():
    """The marker forms, and that a wrong column or message is caught."""
    data = (
        b"x = 1  # GG001\n"
        b"y = 2  # GG001:12 forward communication flag `y`\n"
        b"z = 3  # GG003:4\n"
        b"w = 4  # GG001 is not a marker when text follows\n"
    )
    assert _expected(data) == [
        Marker(1, "GG001"),
        Marker(2, "GG001", 12, "forward communication flag `y`"),
        Marker(3, "GG003", 4),
    ]
    flag = Finding("t.py", "GG001", "forward communication flag `y` is gated on grad mode", 2, 12, 2, 13)
    assert Marker(2, "GG001", 12, "forward communication flag `y`").matches(flag)
    assert not Marker(2, "GG001", 13).matches(flag)
    assert not Marker(2, "GG001", 12, "forward communication flag `z`").matches(flag)
    assert not Marker(2, "GG002").matches(flag)
    assert _unmatched((flag,), [Marker(2, "GG001", 11)]) != []


def _fix_pairs():
    for source in sorted(FIXTURES.glob("*/fix_*.in.py")):
        yield pytest.param(
            source, source.with_name(source.name.replace(".in.py", ".out.py")), id=f"{source.parent.name}/{source.name}"
        )


@pytest.mark.parametrize("prefilter", [True, False], ids=["fast", "whole-module"])
@pytest.mark.parametrize(("source", "expected"), list(_fix_pairs()))
def test_fix_fixture(source: Path, expected: Path, prefilter: bool):
    result = lint_source(str(source), source.read_bytes(), Config(), fix=True, prefilter=prefilter)
    assert result.error is None
    assert result.findings == ()
    assert result.fixed == expected.read_bytes()
    again = lint_source(str(expected), expected.read_bytes(), Config(), fix=True, prefilter=prefilter)
    assert (again.findings, again.fixed) == ((), None)
