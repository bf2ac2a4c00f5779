"""gradgate.model.index: what the index finds where it searches the lines first."""

from __future__ import annotations

import ast

import pytest

from gradgate.config import Config
from gradgate.model.index import ModuleIndex
from gradgate.model.lines import LineIndex


def _index(text: str) -> ModuleIndex:
    return ModuleIndex(ast.parse(text), Config(), LineIndex(text).lines_with)


@pytest.mark.parametrize(
    "text",
    [
        "def f():\n    def g():\n        pass\n",
        "def f():\n    def\tg():\n        pass\n",
        "def f():\n    def\fg():\n        pass\n",  # a form feed is white space to the tokenizer
        "def f():\n    def\\\n g():\n        pass\n",  # a backslash goes on to the next line
        "def f():\n    async def\\\n g():\n        pass\n",
    ],
)
def test_a_nested_def_is_found_however_the_space_after_def_is_spelled(text):
    assert sorted(_index(text).functions) == ["f", "f.<locals>.g"]


def test_a_function_that_spells_default_only_is_not_searched_for_nested_defs():
    index = _index("def f(default=1):\n    defaults = default\n    return defaults\n")
    assert sorted(index.functions) == ["f"]


@pytest.mark.parametrize(
    "text",
    [
        "def f():\n    import torch.distributed as dist\n    return dist\n",
        "def f():\n    from torch import distributed as dist\n    return dist\n",
        "def f(): import torch.distributed as dist; return dist\n",  # on the def's own line
        "def f():\n    from torch \\\n        import distributed as dist\n    return dist\n",
    ],
)
def test_a_function_s_own_imports_are_found(text):
    index = _index(text)
    assert index.aliases_of(index.functions["f"])["dist"] == "torch.distributed"


def test_only_functions_that_spell_a_registrar_are_read_for_backward_hooks():
    from gradgate.model.outline import body_parsed, parse_outline

    fillers = "".join(f"def filler_{k}():\n    return {k}\n\n\n" for k in range(8))
    text = (
        "def grad_hook(grad):\n    return grad\n\n\n"
        "def registers(t):\n    t.register_hook(grad_hook)\n\n\n"
        "def names_a_hook():\n    my_hook = None  # a _hook spelled, nothing registered\n    return my_hook\n\n\n"
        + fillers
    )
    tree = parse_outline(text)
    index = ModuleIndex(tree, Config(), LineIndex(text).lines_with)
    assert index.functions["grad_hook"].backward
    assert not index.functions["names_a_hook"].backward
    parsed = {s.name for s in tree.body if isinstance(s, ast.FunctionDef) and body_parsed(s)}
    assert parsed == {"registers"}


def test_a_registrar_spelled_in_another_unicode_form_is_found():
    text = "def grad_hook(grad):\n    return grad\n\n\ndef registers(t):\n    t.\uff52egister_hook(grad_hook)\n"
    index = ModuleIndex(ast.parse(text), Config(), LineIndex(text).lines_with)
    assert index.functions["grad_hook"].backward
