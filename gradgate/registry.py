"""Where the rules are, without importing them (importing a rule imports LibCST, which
alone costs ~0.2 s; a warm, cached run must not pay it).

Each rule lives in ``gradgate.rules`` in a module named after its code:
``gg001_<what it flags>.py`` holds ``GG001`` (the test-suite checks this).
"""

from __future__ import annotations

import importlib
import os
import pkgutil
from functools import cache


def rule_modules() -> list[str]:
    # gradgate.rules is rules/ mapped by setuptools' package-dir, which a type checker
    # cannot follow through an editable install: imported by name
    package = importlib.import_module("gradgate.rules")
    return sorted(info.name for info in pkgutil.iter_modules(package.__path__))


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
                for name in sorted(names):
                    if name.endswith(".py"):
                        info = os.stat(os.path.join(folder, name))
                        relative = os.path.relpath(os.path.join(folder, name), directory)
                        parts.append(f"{package.__name__}:{relative}:{info.st_size}:{info.st_mtime_ns}")
    return digest("\n".join(parts).encode(), 8)
