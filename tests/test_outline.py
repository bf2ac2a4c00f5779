"""gradgate.model.outline: a consulted module's tree with top-level function bodies
parsed on first read is, read whole, the tree ``ast.parse`` gives, positions included."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from conftest import invoke
from hypothesis import given, settings
from hypothesis import strategies as st

import gradgate.model.outline as outline
from gradgate.model.outline import LazyAsyncFunctionDef, LazyFunctionDef, is_outlined, parse_outline

#: enough top-level functions for the outline to be worth making
PADDING = "".join(f"\n\ndef pad{i}(x):\n    return x + {i}\n" for i in range(outline.MIN_FUNCTIONS))


def _dump(tree: ast.AST) -> str:
    text = ast.dump(tree, include_attributes=True)
    return re.sub(r"\bLazy(\w*Def)\(", r"\1(", text)


def _lazy(tree: ast.Module) -> list[str]:
    return [s.name for s in tree.body if isinstance(s, (LazyFunctionDef, LazyAsyncFunctionDef))]


CASES = {
    "string lines at column 0": 'def f():\n    s = """\ndef not_a_function():\n    pass\n"""\n    return s\n',
    "backslash at column 0": "def f():\n    y = 1 + \\\n2\n    return y\n",
    "decorators over lines": "@a(\n    1,\n)\n@b\ndef f(x,\n      y):\n    return x\n",
    "quotes in comments, hashes in strings": "def f():\n    # don't stop\n    s = '# not a comment'\n    return s\n",
    "async def": "async def f():\n    await g()\n",
    "CRLF line ends": "def f():\r\n    return 1\r\n\r\nclass C:\r\n    def m(self):\r\n        return 2\r\n",
    "classes and statements between": "import os\n\n\nclass C:\n    def m(self):\n        return 1\n\n\nif os.sep:\n    def g():\n        pass\nelse:\n    g = None\n\n\ndef f():\n    return C\n",
    "tabs": "def f():\n\tif True:\n\t\treturn 1\n\ndef g():\n    return 2\n",
    # a backslash before a CRLF goes on with the string (a review found the scan lost step)
    "CRLF after a backslash in a string": (
        "def f():\r\n    return \"a\\\r\n\" + \"'''\"\r\ndef g():\r\n    return 1\r\ny = 1  # '''\r\n"
    ),
    "comment lines at column 0 inside": "def f():\n    x = 1\n# a comment at column 0\n    return x\n",
    # methods of top-level classes
    "methods, decorated, one-line and last": (
        "@dataclass\nclass C(Base,\n        metaclass=M):  # a comment\n    '''doc\ndef not_a_method(self):\n'''\n"
        "    x: int = 1\n\n    @property\n    def p(self):\n        return self.x\n\n    def one(self): return 1\n"
        "  # a comment at another indentation\n    async def a(self):\n        y = 1 + \\\n    2\n        return y\n"
    ),
    "a nested class and statements after methods": (
        "class C:\n    class Inner:\n        def m(self):\n            return 1\n    def outer(self):\n"
        "        return 2\n    z = outer\n"
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_an_outline_read_whole_is_the_parse(name):
    text = CASES[name] + PADDING
    tree = parse_outline(text)
    assert is_outlined(tree)
    assert len(_lazy(tree)) >= outline.MIN_FUNCTIONS  # the padding at least: the outline was made
    assert _dump(tree) == _dump(ast.parse(text))


def test_the_methods_of_top_level_classes_are_outlined_too():
    text = CASES["methods, decorated, one-line and last"] + PADDING
    tree = parse_outline(text)
    klass = next(s for s in tree.body if isinstance(s, ast.ClassDef))
    lazy = [s.name for s in klass.body if isinstance(s, (LazyFunctionDef, LazyAsyncFunctionDef))]
    assert lazy == ["p", "one", "a"]
    # the class ends where its last method does: read from that method
    assert isinstance(klass, outline.LazyClassDef) and (klass.end_lineno, klass.end_col_offset) == (18, 16)


@pytest.mark.parametrize(
    "text",
    [
        "class C: pass\n",  # the body on the header's line
        "class C:\n\tdef m(self):\n\t\treturn 1\n",  # a tab in the indentation
        "class C:\n    def m(self):\n        return g(\n    1)\n",  # a bracket's line at the methods' indentation
    ],
)
def test_classes_whose_methods_the_scan_cannot_take_are_kept_whole(text):
    tree = parse_outline(text + PADDING)
    methods = [s for c in tree.body if isinstance(c, ast.ClassDef) for s in c.body]
    assert not any(isinstance(s, LazyFunctionDef) for s in methods)
    assert _dump(tree) == _dump(ast.parse(text + PADDING))


def test_the_last_function_may_end_the_text_without_a_newline():
    text = PADDING + "\n\ndef last():\n    return 1"
    tree = parse_outline(text)
    assert _lazy(tree)[-1] == "last" and _dump(tree) == _dump(ast.parse(text))


@pytest.mark.parametrize(
    "text",
    [
        "def few():\n    return 1\n",  # too few functions to pay
        "def f():\n    x = 1\ry = 2\n" + PADDING,  # a lone carriage return: a line end the scan does not count
        # after a form feed the tokenizer's column is 0 again: `g` is top-level (a review found it)
        "def f():\n    return 1\n\x0cdef g():\n    return 2\n" + PADDING,
        # a line inside brackets at column 0: taken for a statement's start, the function
        # is cut short and the rest does not parse
        "def f():\n    return g(\n1,\n2)\n\nx = 1\n" + PADDING,
    ],
)
def test_texts_the_outline_does_not_pay_for_or_cannot_scan_are_parsed_whole(text):
    tree = parse_outline(text)
    assert not is_outlined(tree) and _lazy(tree) == []
    assert _dump(tree) == _dump(ast.parse(text))


@pytest.mark.parametrize("text", ["def f(:\n    pass\n" + PADDING, "x = 1\0\n" + PADDING])
def test_what_ast_parse_refuses_at_the_top_is_refused(text):
    with pytest.raises((SyntaxError, ValueError)) as expected:
        ast.parse(text)
    with pytest.raises(expected.type):
        parse_outline(text)


def test_a_body_that_does_not_parse_reads_as_the_outline_ellipsis():
    text = "def broken():\n    return (\n" + PADDING
    with pytest.raises(SyntaxError):
        ast.parse(text)
    tree = parse_outline(text)
    assert is_outlined(tree)
    broken = tree.body[0]
    assert isinstance(broken, LazyFunctionDef)
    assert [ast.dump(s) for s in broken.body] == ["Expr(value=Constant(value=Ellipsis))"]


def test_a_syntax_error_in_a_consulted_module_is_still_reported_for_the_module_itself(tmp_path, monkeypatch):
    """``b.py`` is read as ``a.py``'s dependency (outlined, its broken body hidden) and then
    checked itself in the same run: parsed whole, its syntax error is reported."""
    import gradgate.model.project as project

    outlined = []

    def recording(text):
        tree = parse_outline(text)
        outlined.append(is_outlined(tree))
        return tree

    monkeypatch.setattr(project, "parse_outline", recording)
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "b.py").write_text(
        "import torch\n\n\ndef helper():\n    return (\n\n\ndef mode():\n    return torch.is_grad_enabled()\n" + PADDING
    )
    (package / "a.py").write_text(
        "import torch\nfrom pkg.b import helper, pad1\n\n\ndef forward(x):\n"
        "    ub_overlap_ag = torch.is_grad_enabled() and helper()\n    return pad1(x)\n"
    )
    result = invoke(["check", "--no-cache", "pkg/a.py", "pkg/b.py"], cwd=tmp_path)
    assert result.exit_code == 2
    assert result.stderr.splitlines()[0].startswith("error: pkg/b.py: syntax error at")


def test_a_module_of_the_run_with_a_broken_body_still_answers_for_the_files_that_consult_it(tmp_path):
    """``overlap.py`` is in the run and one of its bodies does not parse: consulted by
    ``layers.py`` before its own analysis, it was parsed whole, refused, and the finding
    that rests on it (reported at its predicate in ``overlap.py``, grad mode coming from ``layers.py``) was lost (found when ``layers.py`` was checked
    alone). It is outlined instead; its own analysis reports the syntax error."""
    import shutil

    shutil.copytree(Path(__file__).parent / "fixtures" / "xmod" / "pos_attr_method", tmp_path / "case")
    overlap = tmp_path / "case" / "tpkit" / "overlap.py"
    overlap.write_text(
        overlap.read_text() + PADDING + "\nimport torch\n\n\ndef broken():\n    return torch.is_grad_enabled() +\n"
    )
    result = invoke(["check", "-j", "1", "--no-cache", "."], cwd=tmp_path / "case")
    assert result.exit_code == 2
    assert result.stdout.splitlines()[0].startswith("tpkit/overlap.py:17:79: GG001 ")  # the predicate
    assert result.stderr.splitlines()[0].startswith("error: tpkit/overlap.py: syntax error at")


@pytest.mark.slow
@pytest.mark.network
def test_every_transformer_engine_module_outlines_to_its_parse(te_sources: Path):
    """Each module of TransformerEngine (from PyPI): the outline, read whole, is the parse;
    and the function-heavy ones are outlined."""
    outlined = set()
    for path in sorted(te_sources.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        tree = parse_outline(text)
        whole = ast.parse(text)
        if is_outlined(tree):
            outlined.add(path.name)
            assert _lazy(tree) == [s.name for s in whole.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))]
        assert _dump(tree) == _dump(whole), path
    assert {"utils.py", "distributed.py"} <= outlined


@pytest.mark.network
def test_a_check_gives_the_same_output_with_the_outline_as_without(te_sources: Path, monkeypatch):
    module = "transformer_engine/pytorch/module/layernorm_mlp.py"
    root = te_sources
    assert (root / module).is_file()
    with_outline = invoke(["check", "--no-cache", "--format", "json", module], cwd=root)
    monkeypatch.setattr(outline, "MIN_FUNCTIONS", 10**9)
    without = invoke(["check", "--no-cache", "--format", "json", module], cwd=root)
    assert with_outline.exit_code == without.exit_code == 1
    assert with_outline.stdout == without.stdout and '"GG001"' in with_outline.stdout


# -- property: any text made of risky pieces outlines to its parse, or is refused alike ------

#: top-level pieces that stress the scan: strings over lines, lines at column 0 inside
#: brackets, backslashes, comments holding quotes, decorators, blocks that go on
PIECES = [
    "def f{n}(a):\n    return a\n",
    'def s{n}():\n    return """\ndef inside():\n    pass\n"""\n',
    "def s{n}():\n    return '''it''s\n# not a comment\n'''\n",
    'def q{n}():\n    x = "a \\" # b"  # a comment with a \' quote\n    return x\n',
    "def b{n}():\n    return g(\n1,\n)\n",
    "def c{n}():\n    y = 1 + \\\n2\n    return y\n",
    "@dec(\n    {n},\n)\n@other\ndef d{n}(x,\n       y=2):\n    return x\n",
    "async def a{n}():\n    async with x:\n        await y\n",
    "class K{n}:\n    def m(self):\n        return {n}\n",
    "if X:\n    def i{n}():\n        pass\nelse:\n    pass\n",
    "try:\n    import m{n}\nexcept ImportError:\n    m{n} = None\n",
    "def e{n}():\n    pass\n# a comment at column 0\n    return 1\n",
    "def r{n}():\n    return rb'\\x00' + f'{{1}}' + u\"x\"\n",
    "x{n} = [\n1,\n2]\n",
    "def broken{n}():\n    return (\n",
    "def t{n}():\n\tif 1:\n\t\treturn 2\n",
    "\n\n",
    "# def not_a_function():\n",
    "def ff{n}():\n    return 1\n\x0cdef gg{n}():\n    return 2\n",
    'def sb{n}():\n    return "a\\\n" + "\'\'\'"\n',
    "y{n} = 1  # '''\n",
    # classes: methods the scan leaves out, and the class bodies it must keep whole
    "class M{n}(Base,\n        metaclass=Meta):\n    '''doc\n    def not_method(self):\n'''\n    x = 1\n\n"
    "    @property\n    def p(self):\n        return g(\n    1)\n\n    # c\n    def q(self, a=(\n1)):\n"
    "        return a\n    y = 2\n",
    "class One{n}: pass\n",
    "class Tab{n}:\n\tdef m(self):\n\t\treturn 1\n",
    "class Nest{n}:\n    class Inner:\n        def m(self):\n            return 1\n    def outer(self):\n        return 2\n",
    "@dataclass\nclass D{n}:\n    a: int = 1\n    def m(self): return self.a\n",
    "class Cont{n}:  # c\n    def m(self):\n        x = 1 + \\\n    2\n        return x\n  # odd\n    z = 3\n",
    "class B{n}:\n    def broken_m{n}(self):\n        return (\n    def ok(self):\n        return 1\n",
    'class S{n}:\n    def m(self):\n        return """\n    def not_method(self):\n"""\n',
]


@settings(max_examples=300, deadline=None)
@given(
    pieces=st.lists(st.sampled_from(PIECES), min_size=1, max_size=14),
    crlf=st.booleans(),
    final_newline=st.booleans(),
)
def test_risky_texts_outline_to_their_parse_or_are_refused_alike(pieces, crlf, final_newline):
    text = "".join(piece.format(n=i) for i, piece in enumerate(pieces)) + PADDING
    if not final_newline:
        text = text.rstrip("\n")
    if crlf:
        text = text.replace("\n", "\r\n")
    try:
        whole = ast.parse(text)
    except (SyntaxError, ValueError):
        whole = None
    if whole is not None:
        assert _dump(parse_outline(text)) == _dump(whole)
        return
    # a text that does not parse: refused alike, or outlined with the broken body as `...`
    try:
        tree = parse_outline(text)
    except (SyntaxError, ValueError):
        return
    assert is_outlined(tree)
    methods = [m for c in tree.body if isinstance(c, ast.ClassDef) for m in c.body]
    broken = [s for s in (*tree.body, *methods) if isinstance(s, LazyFunctionDef) and s.name.startswith("broken")]
    assert broken and all(ast.dump(s.body[0]) == "Expr(value=Constant(value=Ellipsis))" for s in broken)


#: the scan's strings and comments as first written: a char or an escape at a time
_TOKEN_DEFINITION = re.compile(
    r"""
      \#[^\n]*
    | \"\"\"(?:[^"\\]|\\(?:\r\n|.)|"(?!""))*\"\"\"
    | '''(?:[^'\\]|\\(?:\r\n|.)|'(?!''))*'''
    | "(?:[^"\\\n]|\\(?:\r\n|.))*"
    | '(?:[^'\\\n]|\\(?:\r\n|.))*'
    """,
    re.S | re.X,
)


@given(
    st.lists(st.sampled_from(['"', "'", '"""', "'''", "\\", "#", "a", "\n", "\r\n", "\r"]), max_size=40).map("".join)
)
def test_the_scan_finds_the_strings_and_comments_of_its_definition(text):
    assert [m.span() for m in outline._TOKEN.finditer(text)] == [m.span() for m in _TOKEN_DEFINITION.finditer(text)]


@given(
    st.lists(st.sampled_from(['"', "'", '"""', "'''", "\\", "#", "a", "\n", "\r\n"]), max_size=30).map("".join),
    st.integers(min_value=0, max_value=30),
)
def test_the_scan_matches_a_string_or_comment_where_its_definition_does_from_any_offset(text, offset):
    got, want = outline._TOKEN.match(text, offset), _TOKEN_DEFINITION.match(text, offset)
    assert (got and got.span()) == (want and want.span())


def test_a_text_defines_enough_functions_counted_up_to_the_number_asked():
    assert outline._defines_at_least("def f():\n    pass\n" * 3, 3)
    assert not outline._defines_at_least("def f():\n    pass\n" * 2, 3)
    assert outline._defines_at_least("", 0)
