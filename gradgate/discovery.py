"""Finding the Python files under the paths a user gives.

Directories are walked in sorted order (so output is deterministic), skipping VCS,
virtual-environment and build folders and anything matching an ``exclude`` glob; files
named explicitly are always taken. Paths that do not exist come back as errors, not
exceptions, so one bad argument never hides the findings in the others.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

DEFAULT_EXCLUDED_DIRS = frozenset(
    {
        ".git", ".hg", ".svn", ".tox", ".nox", ".venv", "venv", ".mypy_cache",
        ".pytest_cache", ".ruff_cache", "__pycache__", "node_modules", "site-packages",
        ".eggs", ".gradgate_cache",
    }
)


@dataclass(frozen=True)
class Discovered:
    """A file to lint, or a path that could not be used (``error`` says why)."""

    path: str
    error: str | None = None


def _excluded(path: str, patterns: tuple[str, ...]) -> bool:
    normal = path.replace(os.sep, "/")
    if normal.startswith("./"):
        normal = normal[2:]
    name = os.path.basename(normal)
    return any(
        fnmatch.fnmatch(normal, p) or fnmatch.fnmatch(name, p) or fnmatch.fnmatch(normal, f"*/{p}")
        for p in patterns
    )


def discover(paths: Iterable[str], exclude: tuple[str, ...] = ()) -> Iterator[Discovered]:
    seen: set[str] = set()

    def once(path: str) -> bool:
        key = os.path.normpath(path)
        if key in seen:
            return False
        seen.add(key)
        return True

    for root in paths:
        if os.path.isdir(root):
            yield from (d for d in _walk(root, exclude) if once(d.path))
        elif os.path.lexists(root):
            # an explicit file is linted whatever its name; a broken link is reported
            if once(root):
                yield Discovered(root)
        else:
            yield Discovered(root, "no such file or directory")


def _walk(root: str, exclude: tuple[str, ...]) -> Iterator[Discovered]:
    visited: set[tuple[int, int]] = set()
    errors: list[OSError] = []
    for directory, dirnames, filenames in os.walk(root, onerror=errors.append, followlinks=True):
        try:
            info = os.stat(directory)
        except OSError:
            continue
        if (info.st_dev, info.st_ino) in visited:  # a symlink loop: walk each folder once
            dirnames[:] = []
            continue
        visited.add((info.st_dev, info.st_ino))
        dirnames[:] = sorted(
            d
            for d in dirnames
            if d not in DEFAULT_EXCLUDED_DIRS
            and not d.endswith(".egg-info")
            and not _excluded(os.path.join(directory, d), exclude)
        )
        for name in sorted(filenames):
            path = os.path.join(directory, name)
            if name.endswith(".py") and not _excluded(path, exclude):
                yield Discovered(path)
        # a folder named like a module (``x.py/``) is not a file to lint: say so
        for name in dirnames:
            if name.endswith(".py"):
                yield Discovered(os.path.join(directory, name), "is a directory, not a Python file")
    for error in errors:
        if error.filename and error.filename != root:
            yield Discovered(error.filename, error.strerror or str(error))
        elif error.filename == root:
            yield Discovered(root, error.strerror or str(error))
