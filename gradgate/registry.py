"""Where the rules are, without importing them (importing a rule imports LibCST, which
alone costs ~0.2 s; a warm, cached run must not pay it).

Each rule lives in ``gradgate.rules`` in a module named after its code:
``gg001_<what it flags>.py`` holds ``GG001`` (the test-suite checks this).
"""

from __future__ import annotations

import importlib
import os
from functools import cache


def rule_modules() -> list[str]:
    """The modules of :mod:`gradgate.rules`, by name: its folders' ``.py`` files, listed
    directly (``pkgutil.iter_modules`` imports ``inspect``: 4 ms of a one-file check);
    a package that is not a folder (a zip) is asked through ``pkgutil``."""
    # gradgate.rules is rules/ mapped by setuptools' package-dir, which a type checker
    # cannot follow through an editable install: imported by name
    package = importlib.import_module("gradgate.rules")
    names: set[str] = set()
    for directory in package.__path__:
        if not os.path.isdir(directory):
            import pkgutil

            names.update(info.name for info in pkgutil.iter_modules([directory]))
            continue
        for entry in os.listdir(directory):
            stem, _, extension = entry.rpartition(".")
            if extension == "py" and stem.isidentifier() and stem != "__init__":
                names.add(stem)
    return sorted(names)


@cache
def known_codes() -> frozenset[str]:
    return frozenset(name.split("_", 1)[0].upper() for name in rule_modules())


@cache
def code_digest() -> str:
    """Digest of gradgate's own sources (names, sizes, modification times): a cache
    made by other code, an edited checkout included, is not reused."""
    import gradgate

    from .digest import digest

    parts = []
    for package in (gradgate, importlib.import_module("gradgate.rules")):
        for directory in package.__path__:
            for folder, subfolders, names in os.walk(directory):
                subfolders[:] = sorted(d for d in subfolders if d != "__pycache__")
                # the path below `directory` by slicing: os.path.relpath took half of this walk
                below = folder[len(directory) :].lstrip(os.sep)
                for name in sorted(names):
                    if name.endswith(".py"):
                        info = os.stat(os.path.join(folder, name))
                        relative = os.path.join(below, name) if below else name
                        parts.append(f"{package.__name__}:{relative}:{info.st_size}:{info.st_mtime_ns}")
    return digest("\n".join(parts).encode(), 8)
