"""Load a file of witness cases: ``def case(): return module, inputs`` (no torch import).

Every top-level function named ``case`` or ``case_*`` is a case, taken in the order of
the file. A case returns ``(module, inputs)``: the module to watch and the positional
arguments of its forward (a tuple, or a single tensor).
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..records import record


class CasesError(ValueError):
    """The cases file cannot be loaded or holds no case."""


@record
class Case:
    name: str
    function: Callable[[], Any]
    line: int


def is_case_name(name: str) -> bool:
    return name == "case" or name.startswith("case_")


def load_cases(path: str | Path, only: tuple[str, ...] = ()) -> list[Case]:
    """The cases of the file ``path`` (those named in ``only``, if given)."""
    path = Path(path).resolve()
    if not path.is_file():
        raise CasesError(f"{path}: no such file")
    module_name = f"gradgate_witness_cases_{abs(hash(str(path)))}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise CasesError(f"{path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    cases = [
        Case(name, fn, fn.__code__.co_firstlineno)
        for name, fn in vars(module).items()
        if is_case_name(name) and callable(fn) and getattr(fn, "__module__", None) == module_name
    ]
    cases.sort(key=lambda c: c.line)
    if only:
        missing = sorted(set(only) - {c.name for c in cases})
        if missing:
            raise CasesError(f"{path}: no case {', '.join(missing)}")
        cases = [c for c in cases if c.name in only]
    if not cases:
        raise CasesError(f"{path}: no function named `case` or `case_*`")
    return cases
