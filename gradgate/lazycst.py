"""LibCST, imported on first use: ``from gradgate import lazycst as cst``.

Importing LibCST costs about 0.2 s, more than the rest of a single-file check. The rule
modules, and the helpers they use, name LibCST only inside functions (annotations are
strings, ``from __future__ import annotations``), through this module: its first
attribute read (``cst.Name``) imports LibCST, and every read after that is a plain
module-global lookup. So importing the rules and running their cheap stdlib-``ast``
``candidate`` tests never imports LibCST; only a file with a candidate statement does.

Type checkers see the module as LibCST itself: under ``TYPE_CHECKING`` it re-exports
LibCST's public names (and its ``metadata`` package), so ``cst.BooleanOperation`` is the
real class to mypy and pyright. At run time that block does not run and the module
``__getattr__`` below does the importing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from libcst import *  # noqa: F403  (the re-export is the point)
    from libcst import metadata as metadata
else:

    def __getattr__(name: str) -> object:
        import libcst

        value = getattr(libcst, name)
        globals()[name] = value  # later reads skip this function
        return value
