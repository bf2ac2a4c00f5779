"""LibCST, imported on first use: ``from gradgate import lazycst as cst``.

Importing LibCST costs about 0.2 s, more than the rest of a single-file check. The rule
modules, and the helpers they use, name LibCST only inside functions (annotations are
strings, ``from __future__ import annotations``), through this module: its first
attribute read (``cst.Name``) imports LibCST, and every read after that is a plain
module-global lookup. So importing the rules and running their cheap stdlib-``ast``
``candidate`` tests never imports LibCST; only a file with a candidate statement does.
"""

from __future__ import annotations


def __getattr__(name: str) -> object:
    import libcst

    value = getattr(libcst, name)
    globals()[name] = value  # later reads skip this function
    return value
