"""LibCST only where bytes change: a check never parses with LibCST (nor imports it),
and a fix parses only the statements it changes."""

from __future__ import annotations

import subprocess
import sys

from gradgate.config import Config
from gradgate.engine import lint_source

BUGGY = b"import torch\ndef f(ub_overlap_ag):\n    ub_overlap_ag = ub_overlap_ag and torch.is_grad_enabled()\n    return ub_overlap_ag\n"


def test_a_check_of_te_parses_nothing_with_libcst_and_a_fix_only_the_changed_statements(te_sources):
    module = te_sources / "transformer_engine" / "pytorch" / "module"
    for name, lines in (("layernorm_linear.py", 3), ("layernorm_mlp.py", 2)):
        data = (module / name).read_bytes()
        check = lint_source(name, data, Config())
        assert (check.stage, check.cst_lines, len(check.findings)) == ("ast", 0, 3 - lines + 1 if lines == 3 else 2)
        fixed = lint_source(name, data, Config(), fix=True)
        assert (fixed.stage, fixed.cst_lines, fixed.findings) == ("fix", lines, ())


def test_libcst_is_imported_only_to_make_a_fix(tmp_path):
    (tmp_path / "buggy.py").write_bytes(BUGGY)
    probe = (
        "import sys\n"
        "from gradgate.config import Config\n"
        "from gradgate.engine import lint_file\n"
        "check = lint_file('buggy.py', Config())\n"
        "assert [f.line for f in check.findings] == [3], check\n"
        "print('libcst' in sys.modules)\n"
        "fix = lint_file('buggy.py', Config(), fix=True)\n"
        "assert fix.fixed is not None and fix.findings == (), fix\n"
        "print('libcst' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, check=True)
    assert out.stdout.decode().split() == ["False", "True"]


def test_an_elif_fix_is_parsed_with_its_if():
    code = (
        b"def f(a, ub_overlap_ag, is_grad_enabled):\n"
        b"    if a:\n"
        b"        ub_overlap_ag = a\n"
        b"    elif is_grad_enabled:\n"
        b"        ub_overlap_ag = ub_overlap_ag\n"
        b"    else:\n"
        b"        ub_overlap_ag = False\n"
        b"    return ub_overlap_ag\n"
    )
    result = lint_source("m.py", code, Config(), fix=True)
    assert result.error is None and result.findings == ()
    assert result.cst_lines == 6
    assert result.fixed == code.replace(
        b"    elif is_grad_enabled:\n        ub_overlap_ag = ub_overlap_ag\n    else:\n        ub_overlap_ag = False\n",
        b"    else:\n        ub_overlap_ag = ub_overlap_ag\n",
    )
