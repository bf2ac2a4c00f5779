"""A branch's write to a name the function never reads is not joined after the branch
(``ModuleIndex.names_read``): what the function can read keeps its joined value."""

from __future__ import annotations

import ast

from gradgate.config import Config
from gradgate.engine import lint_source
from gradgate.model.index import ModuleIndex

SOURCE = """\
import torch


def forward(x, items):
    if torch.is_grad_enabled():
        mode = True
        unread = 1
    else:
        mode = False
        unread = 2
    total = 0
    for item in items:
        total += item

    @decorate(level)
    def inner(y, ub_overlap_ag=mode):
        return y

    class Local(Base, metaclass=Meta):
        attribute = hidden

    return inner(x)
"""


def test_names_read_are_the_loaded_the_augmented_and_those_a_definition_evaluates():
    tree = ast.parse(SOURCE)
    index = ModuleIndex(tree, Config())
    assert sorted(index.names_read("forward")) == [
        "Base", "Meta", "decorate", "inner", "item", "items", "level", "mode", "torch", "total", "x",
    ]  # fmt: skip


def test_a_name_read_only_by_a_nested_default_keeps_its_joined_value():
    """``mode`` is read only where ``inner``'s default is evaluated: joined after the ``if``,
    it is grad mode, and the flag's default is a finding."""
    result = lint_source("m.py", SOURCE.encode(), Config())
    assert [(f.rule, f.line, f.column) for f in result.findings] == [("GG001", 16, 32)]
