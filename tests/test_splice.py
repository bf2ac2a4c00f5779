"""A fix pass's tree made from the previous pass's (gradgate.model.splice): the tree
``ast.parse`` gives for the fixed text, position attributes included, or None (the whole
text is parsed then)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import gradgate.engine as engine
from gradgate.config import Config
from gradgate.engine import lint_source
from gradgate.model.splice import spliced_tree

FIXTURES = Path(__file__).parent / "fixtures"


def _dump(tree: ast.AST) -> str:
    return ast.dump(tree, include_attributes=True)


@pytest.mark.parametrize(
    "before, after, spliced",
    [
        (
            "a = 1\ndef f():\n    x = 1\n    return x\nb = 2\n",
            "a = 1\ndef f():\n    x = 2\n    return x\nb = 2\n",
            True,
        ),
        # a line fewer: the statements below move up
        (
            "def f():\n    x = g and t\n    y = x\n    return y\nb = 2\nc = 3\n",
            "def f():\n    y = x\n    return y\nb = 2\nc = 3\n",
            True,
        ),
        ("@d\n@e(1)\ndef f():\n    return 1\n\n\nz = 3\n", "@d\n@e(1)\ndef f():\n    return 2\n\n\nz = 3\n", True),
        (
            "class C:\n    def m(self):\n        k = g and t\n        return k\n\nq = 1\n",
            "class C:\n    def m(self):\n        return k\n\nq = 1\n",
            True,
        ),
        ("a = 1; b = 2\nc = 3\n", "a = 1; b = 5\nc = 3\n", True),
        ("x = 1\r\ny = 2\r\nz = 3\r\n", "x = 1\r\ny = 3\r\nz = 3\r\n", True),
        ("x = 1\ny = 2", "x = 1\ny = 3", True),  # no newline at the end
        # not a run of whole statements, or not safe alone: the whole text is parsed
        ("b = f(\n  x); c = 1\nd = 2\n", "b = g(\n  x); c = 1\nd = 2\n", False),
        ("x = 1\n# comment\ny = 2\n", "x = 1\n# other\ny = 2\n", False),
        ("from __future__ import annotations\nx = 1\n", "from __future__ import annotations\nx = 2\n", True),
        # a __future__ import is valid only at the top: re-parsed alone it would always be
        ("import os\nfrom __future__ import division\n", "import os\nfrom __future__ import annotations\n", False),
        ("x = 1\ry = 2\r", "x = 1\ry = 3\r", False),  # lone carriage returns
        ("x = 1\n\x0cy = 2\n", "x = 1\n\x0cy = 3\n", False),  # a form feed
        ("def f():\n    return 1\n", "def f(:\n    return 1\n", False),  # does not parse
        ("x = 1\n", "x = 1\n", False),
    ],
)
def test_the_spliced_tree_is_the_parsed_tree(before: str, after: str, spliced: bool):
    tree = spliced_tree(ast.parse(before), before, after)
    assert (tree is not None) == spliced
    if tree is not None:
        assert _dump(tree) == _dump(ast.parse(after))


def _fix_passes_checked(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every splice a fix makes is compared with the whole parse; returns the outcomes."""
    outcomes: list[str] = []

    def checked(tree: ast.Module, before: str, after: str) -> ast.Module | None:
        found = spliced_tree(tree, before, after)
        if found is None:
            outcomes.append("parsed whole")
        else:
            outcomes.append("spliced" if _dump(found) == _dump(ast.parse(after)) else "MISMATCH")
        return found

    monkeypatch.setattr(engine, "spliced_tree", checked)
    return outcomes


def test_every_fix_of_the_fixtures_splices_the_tree_ast_parse_gives(monkeypatch: pytest.MonkeyPatch):
    outcomes = _fix_passes_checked(monkeypatch)
    fixed = 0
    for path in sorted(FIXTURES.rglob("*.py")):
        result = lint_source(str(path), path.read_bytes(), Config(), fix=True, unsafe_fixes=True)
        fixed += result.fixed is not None and result.fixed != result.source
    assert fixed >= 20
    assert "MISMATCH" not in outcomes
    assert outcomes.count("spliced") >= 20


def test_fixes_of_transformer_engine_splice_the_tree_ast_parse_gives(te_sources: Path, monkeypatch):
    outcomes = _fix_passes_checked(monkeypatch)
    module = te_sources / "transformer_engine/pytorch/module"
    for name in ("layernorm_mlp.py", "layernorm_linear.py"):
        path = module / name
        result = lint_source(str(path), path.read_bytes(), Config(), fix=True)
        assert result.fixed is not None and result.fixed != result.source
    assert outcomes == ["spliced", "spliced"]
