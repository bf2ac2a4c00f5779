"""LibCST parses only the statements that can hold a finding (issue 6).

``FileResult.cst_lines`` counts the lines handed to LibCST. These tests pin it, so that a
rule whose cheap ``candidate`` test grows too loose (and sends whole blocks, or whole
files, to LibCST) fails here rather than only in the benchmark.
"""

from __future__ import annotations

from pathlib import Path

from gradgate.config import Config
from gradgate.engine import lint_source
from gradgate.runner import RunOptions, run

FIXTURES = Path(__file__).parent / "fixtures"


def test_te_hands_libcst_only_the_three_flagged_statements(te_sources, monkeypatch):
    monkeypatch.chdir(te_sources)
    results = list(run(["transformer_engine"], Config(), RunOptions(jobs=1)))
    parsed = {r.path: r.cst_lines for r in results if r.cst_lines}
    # layernorm_linear.py:212-214 is one parenthesised assignment; 388 and 389 one line each
    assert parsed == {
        "transformer_engine/pytorch/module/layernorm_linear.py": 3,
        "transformer_engine/pytorch/module/layernorm_mlp.py": 2,
    }
    assert sum(len(r.findings) for r in results) == 3


def test_a_rejected_grad_branch_is_not_parsed_but_its_nested_statements_are():
    path = FIXTURES / "gg001" / "check_nested_in_grad_branch.py"
    result = lint_source(str(path), path.read_bytes(), Config())
    assert [f.line for f in result.findings] == [13, 17, 19]
    # the `elif` at 16 cannot be framed alone and is widened to its `if` (9-17); the
    # `while` at 18 and the `if not grad` at 20 are judged by their own shape and
    # rejected; line 19 is parsed on its own
    assert result.cst_lines == 9 + 1


def test_a_statement_sharing_a_line_with_else_is_widened_to_its_parent():
    source = (
        "def f(ub_overlap_ag, is_grad_enabled, x):\n"
        "    y = 0\n"
        "    if x:\n"
        "        y = 1\n"
        "    else: ub_overlap_ag = ub_overlap_ag and is_grad_enabled\n"
        "    return ub_overlap_ag, y\n"
    )
    result = lint_source("t.py", source.encode(), Config())
    assert [(f.line, f.column, f.rule) for f in result.findings] == [(5, 45, "GG001")]
    assert result.cst_lines == 3  # the `if` at 3-5, not the whole file
    fixed = lint_source("t.py", source.encode(), Config(), fix=True).fixed
    assert fixed == source.replace(" and is_grad_enabled\n", "\n").encode()


def _modules_after(code: str, tmp_path) -> list[str]:
    """Run ``code`` in a fresh interpreter; the top-level packages it imported."""
    import subprocess
    import sys

    script = code + "\nimport sys\nprint(sorted({m.split('.')[0] for m in sys.modules}))\n"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path, check=True)
    return eval(done.stdout)  # noqa: S307  (our own print of a list of names)


def test_libcst_is_imported_only_for_a_file_with_a_candidate_statement(tmp_path):
    """Importing the rules and running their stdlib-ast tests never imports LibCST
    (~0.2 s): a file whose grad-mode reads can hold no finding is checked without it."""
    (tmp_path / "correct.py").write_text(
        "import torch\n"
        "def forward(ctx, x, weight):\n"
        "    if torch.is_grad_enabled():\n"
        "        ctx.save_for_backward(x, weight)\n"
        "    return x\n"
    )
    (tmp_path / "buggy.py").write_text("ub_overlap_ag = ub_overlap_ag and is_grad_enabled\n")
    check = (
        "from gradgate.config import Config\n"
        "from gradgate.engine import lint_file\n"
        "result = lint_file({!r}, Config())\n"
        "assert (result.stage, len(result.findings)) == {!r}, result\n"
    )
    assert "libcst" not in _modules_after(check.format("correct.py", ("ast", 0)), tmp_path)
    assert "libcst" in _modules_after(check.format("buggy.py", ("snippets", 1)), tmp_path)
