"""gradgate.model.types: what makes ``self.x``, read from the stores of a class's methods."""

from __future__ import annotations

import ast

from gradgate.config import Config
from gradgate.model.index import ModuleIndex
from gradgate.model.lines import LineIndex
from gradgate.model.outline import body_parsed, parse_outline
from gradgate.model.types import TypeHints

_MODULE = """\
import comm


class Layer:
    def __init__(self, group):
        self.coordinator = comm.Coordinator(group)
        self.handles = {}
        self.handles["a"] = comm.Handle()

    def reset(self):
        self.coordinator = comm.Coordinator(None)

    def rebind(self):
        self.other = comm.Other()
        self.other = comm.Different()

    def helper_a(self):
        return 1

    def helper_b(self):
        return 2

    def helper_c(self):
        return 3

    def helper_d(self):
        return 4

    def helper_e(self):
        return 5
"""


def _hints(tree: ast.Module) -> TypeHints:
    return TypeHints(ModuleIndex(tree, Config(), LineIndex(_MODULE).lines_with), "m")


def test_what_the_stores_of_an_attribute_make_agreeing_or_not():
    hints = _hints(ast.parse(_MODULE))
    assert hints.attribute("Layer", "coordinator") == "comm.Coordinator"
    assert hints.attribute("Layer", "handles[]") == "comm.Handle"
    assert hints.attribute("Layer", "handles") is None  # a placeholder only: nothing known
    assert hints.attribute("Layer", "other") is None  # two makers: a conflict
    assert hints.attribute("Layer", "absent") is None


def test_an_outlined_class_parses_only_the_methods_that_spell_the_attribute_asked():
    tree = parse_outline(_MODULE)
    hints = _hints(tree)
    assert hints.attribute("Layer", "coordinator") == "comm.Coordinator"
    (layer,) = (s for s in tree.body if isinstance(s, ast.ClassDef))
    parsed = [m.name for m in layer.body if isinstance(m, ast.FunctionDef) and body_parsed(m)]
    assert parsed == ["__init__", "reset"]


def test_a_store_spelled_in_another_unicode_form_of_the_name_is_found_in_an_outline():
    """Python reads ``self.ﬁeld`` (the ligature) as ``self.field``."""
    text = _MODULE.replace("self.coordinator = comm.Coordinator(group)", "self.\ufb01eld = comm.Coordinator(group)")
    tree = parse_outline(text)
    hints = TypeHints(ModuleIndex(tree, Config(), LineIndex(text).lines_with), "m")
    assert hints.attribute("Layer", "field") == "comm.Coordinator"
