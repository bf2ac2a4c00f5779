"""gradgate.model.index: the order the functions of a module are interpreted in."""

from __future__ import annotations

import ast

from gradgate.config import Config
from gradgate.model.index import ModuleIndex, _components

_CYCLE = """\
def helper(flag):
    return flag


class Layer:
    def forward(self, x):
        if x is None:
            return self.fallback(x)
        return helper(x)

    def fallback(self, x):
        return self.forward(x)
"""


def _levels(text: str, keys: list[str | None]) -> list[list[str | None]]:
    return ModuleIndex(ast.parse(text), Config()).callers_first(keys)


def test_a_function_called_from_a_cycle_comes_after_the_cycle_it_is_called_from():
    """``forward`` and ``fallback`` call each other, ``helper`` is called from the cycle:
    the cycle is cut where it is entered, and ``helper`` waits for ``forward``
    (defined first, it was cut at, and ran before ``forward`` passed it anything)."""
    levels = _levels(_CYCLE, ["helper", "Layer.forward"])
    order = [k for level in levels for k in level]
    assert order.index("Layer.forward") < order.index("helper")
    assert order.index("Layer.forward") < order.index("Layer.fallback")
    assert levels[0] == ["Layer.forward"]


def test_functions_that_nothing_calls_come_first_in_the_order_of_the_keys():
    text = "def a():\n    b()\n\ndef b():\n    pass\n\ndef c():\n    b()\n"
    assert _levels(text, ["b", "c", "a"]) == [["c", "a"], ["b"]]


def test_strongly_connected_components():
    nodes: list[str | None] = [None, "a", "b", "c", "d"]
    callers: dict[str | None, list[str | None]] = {None: [], "a": ["b"], "b": ["a", None], "c": ["c"], "d": ["a"]}
    component = _components(nodes, callers)
    assert component["a"] == component["b"]
    assert len({component[k] for k in nodes}) == 4


_CYCLE_INTO_CYCLE = """\
def b(x):
    if x:
        return a(x)
    return x


def a(x):
    return b(x)


class Outer:
    def forward(self, x):
        if x is None:
            return self.fallback(x)
        return b(x)

    def fallback(self, x):
        return self.forward(x)
"""


def test_a_cycle_called_from_another_cycle_waits_for_it_and_is_cut_at_its_first_function():
    """``a`` and ``b`` call each other, and ``Outer.forward`` (in a cycle with its
    fallback) calls ``b``: the outer cycle runs first, then the inner one from ``b``, its
    first function in the order, where ``forward`` enters it (cut at a function whose own
    callers were all in its cycle, ``a`` ran first)."""
    assert _levels(_CYCLE_INTO_CYCLE, ["b", "a", "Outer.forward"]) == [
        ["Outer.forward"],
        ["b", "Outer.fallback"],
        ["a"],
    ]
