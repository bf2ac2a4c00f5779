"""Cross-module cases (issue 15): grad mode captured in one module decides a forward
communication or a train/eval mode in another.

Each directory under ``fixtures/xmod/`` is a small package tree checked as one run
(``gradgate check --format json .`` from a copy of the directory). Every line ending in
``# GG001`` (any rule code) in any of its files must be reported with that code, and no
other line: a finding belongs at the deciding predicate (issue 27): where grad mode is
combined into a decision when that is in the module that decides (``f(flag and grad)`` of
a function of the same file), else in the module that decides with what it is handed
(grad mode itself, or a value it gates: a field, an argument, a property).
``pos*_`` cases hold markers, ``neg*_`` cases (correct uses) none.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

CASES_ROOT = Path(__file__).parent / "fixtures" / "xmod"
CASES = sorted(p for p in CASES_ROOT.iterdir() if p.is_dir())
#: case-name prefixes; the second and third batches are named ``pos2_*`` / ``neg2_*`` and ``pos3_*`` / ``neg3_*``
POSITIVE = ("pos_", "pos2_", "pos3_")
NEGATIVE = ("neg_", "neg2_", "neg3_")
#: ``# GG001`` (optionally ``# GG001:COL message``) ending a line, as in fixtures/v2/check_*.py
_MARKER = re.compile(r"#\s*(GG\d{3})(?::\d+(?:[ \t]+\S.*?)?)?\s*$")


def _markers(case: Path) -> set[tuple[str, int, str]]:
    out = set()
    for path in sorted(case.rglob("*.py")):
        relative = path.relative_to(case).as_posix()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            match = _MARKER.search(line)
            if match:
                out.add((relative, number, match.group(1)))
    return out


def _findings(workdir: Path) -> tuple[int, set[tuple[str, int, str]]]:
    proc = subprocess.run(
        [sys.executable, "-m", "gradgate", "check", "--format", "json", "--no-cache", "."],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode in (0, 1), f"gradgate failed (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    found = set()
    for finding in json.loads(proc.stdout):
        path = Path(finding["path"])
        if path.is_absolute():
            path = path.resolve().relative_to(workdir.resolve())
        found.add((path.as_posix(), finding["line"], finding["rule"]))
    return proc.returncode, found


def test_cases_are_there():
    names = [case.name for case in CASES]
    assert len([n for n in names if n.startswith(POSITIVE)]) >= 40
    assert len([n for n in names if n.startswith(NEGATIVE)]) >= 33
    for case in CASES:
        assert case.name.startswith(POSITIVE + NEGATIVE), case.name
        assert bool(_markers(case)) == case.name.startswith(POSITIVE), f"{case.name}: markers do not match its kind"


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_cross_module_case(case: Path, tmp_path: Path):
    workdir = tmp_path / case.name
    shutil.copytree(case, workdir)
    expected = _markers(workdir)
    code, found = _findings(workdir)
    assert sorted(found) == sorted(expected), (
        f"missing {sorted(expected - found)}, unexpected {sorted(found - expected)}"
    )
    assert code == (1 if expected else 0)
