"""Readable fixtures (TorchFix / flake8-bugbear style).

``check_*.py``: every line ending in ``# GG001`` (any rule code) must be reported with
that code, and no other line. ``fix_*.in.py`` must be rewritten byte for byte into
``fix_*.out.py``, which must then be clean and stay unchanged under a second fix.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gradgate.config import Config
from gradgate.engine import lint_source

FIXTURES = Path(__file__).parent / "fixtures"
_EXPECT = re.compile(rb"#\s*(GG\d{3})\s*$")


def _expected(data: bytes) -> list[tuple[int, str]]:
    out = []
    for number, line in enumerate(data.splitlines(), start=1):
        match = _EXPECT.search(line)
        if match:
            out.append((number, match.group(1).decode()))
    return out


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
    assert [(f.line, f.rule) for f in result.findings] == _expected(data)


def _fix_pairs():
    for source in sorted(FIXTURES.glob("*/fix_*.in.py")):
        yield pytest.param(source, source.with_name(source.name.replace(".in.py", ".out.py")),
                           id=f"{source.parent.name}/{source.name}")


@pytest.mark.parametrize("prefilter", [True, False], ids=["fast", "whole-module"])
@pytest.mark.parametrize(("source", "expected"), list(_fix_pairs()))
def test_fix_fixture(source: Path, expected: Path, prefilter: bool):
    result = lint_source(str(source), source.read_bytes(), Config(), fix=True, prefilter=prefilter)
    assert result.error is None
    assert result.findings == ()
    assert result.fixed == expected.read_bytes()
    again = lint_source(str(expected), expected.read_bytes(), Config(), fix=True, prefilter=prefilter)
    assert (again.findings, again.fixed) == ((), None)
