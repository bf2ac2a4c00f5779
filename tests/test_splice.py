"""A fix pass's tree made from the previous pass's (gradgate.model.splice): the tree
``ast.parse`` gives for the fixed text, position attributes included, or None (the whole
text is parsed then)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gradgate.engine as engine
from gradgate.config import Config
from gradgate.engine import lint_source
from gradgate.model.splice import Reparser, spliced_tree

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
        # between statements: the lines changed are parsed alone (comments: nothing)
        ("x = 1\n# comment\ny = 2\n", "x = 1\n# other\ny = 2\n", True),
        ("# a\nx = 1\n", "# edit 3\n# a\nx = 1\n", True),  # the language server's benchmark edit
        ("x = 1\n\ny = 2\n", "x = 1\n\ndef g():\n    return 1\n\ny = 2\n", True),  # a new function
        ("x = 1\ny = 2\nz = 3\n", "x = 1\nz = 3\n", True),  # a statement deleted
        ("x = 1\ny = 2\n", "x = 1\n", True),  # the last one
        ("x = 1\n", "x = 1\ny = 2\n", True),  # one appended
        ("# only a comment\n", "# only a comment\nx = 1\n", True),  # into an empty module
        ("x = 1\n\n\ny = 2\nz = 3\n", "x = 1\n# c\ny = 3\nz = 3\n", True),  # a gap and a statement
        # lines that continue a neighbour, or leave something open: the whole text decides
        ("if a:\n    x = 1\n\ny = 2\n", "if a:\n    x = 1\nelse:\n    x = 2\ny = 2\n", False),
        ("def f():\n    return 1\n\ny = 2\n", "def f():\n    return 1\n    z = 1\ny = 2\n", False),
        ("x = 1\n\ny = 2\n", "x = 1\nz = (\ny = 2\n", False),
        ("x = 1\n\ny = 2\n", "x = 1\n@decorator\ny = 2\n", False),
        # a line a backslash joins to the one before is not a line between statements
        ("x = 1 \\\n# c\n", "x = 1 \\\n+ 2\n", False),
        ("x = 1 \\\n\ny = 2\n", "x = 1 \\\ny = 2\n", False),  # the joined line deleted
        # a lone carriage return before the change counts lines as "\n" does not
        ("a = 1\rb = 2\n", "a = 1\nb = 2\n", False),
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


#: lines an edit of a buffer may insert, each alone or next to others: statements,
#: comments, blank lines, and lines that continue or open something
_LINES = [
    "x = 1",
    "# a comment",
    "",
    "    y = 2",
    "else:",
    "def g(a):",
    "    return a",
    "@decorator",
    "z = (",
    ")",
    '"""',
    "class K:",
    "    k = 1",
    "if flag and torch.is_grad_enabled():",
    "    ub = True",
    "from __future__ import annotations",
    "a = 1; b = 2",
    "z = 1 + \\",
    "# a comment ending in a backslash \\",
]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 10_000), st.integers(0, 3), st.lists(st.sampled_from(_LINES), max_size=3)),
        min_size=1,
        max_size=6,
    )
)
def test_a_buffers_trees_through_its_edits_are_the_parsed_trees(edits):
    """Each edit replaces up to three lines of the buffer with up to three others; after
    every edit the reparser's tree is ast.parse's (or both raise SyntaxError)."""
    lines = (FIXTURES / "gg001" / "check_te_shapes.py").read_text().splitlines()
    reparse = Reparser()
    reparse("\n".join(lines) + "\n")
    for at, removed, inserted in edits:
        at %= len(lines) + 1
        lines[at : at + removed] = inserted
        text = "\n".join(lines) + "\n"
        try:
            expected = _dump(ast.parse(text))
        except SyntaxError:
            with pytest.raises(SyntaxError):
                reparse(text)
            continue
        assert _dump(reparse(text)) == expected


def test_the_reparser_splices_an_edit_between_statements():
    text = "import torch\n\n\ndef f():\n    return torch.is_grad_enabled()\n"
    reparse = Reparser()
    first = reparse(text)
    edited = "# edit 1\n" + text
    second = reparse(edited)
    assert second.body[1] is first.body[1]  # the function's node kept, moved a line down
    assert (second.body[1].lineno, _dump(second)) == (5, _dump(ast.parse(edited)))
    assert reparse(edited) is second
