"""Which files a run checks, each with the settings nearest to it.

On top of :func:`gradgate.discovery.discover` (the walk), per file:

- its settings come from a :class:`~gradgate.settings.Resolver` (nearest config file);
- its configuration's ``exclude`` globs apply, relative to that configuration's folder,
  to the file and to each folder above it up to that folder; files named on the command
  line are excluded too unless ``force_exclude`` is off (pre-commit names every file);
- files ignored by git (``.gitignore`` files from the repository's top down, and
  ``.git/info/exclude``) are skipped when found by walking, with ``respect_gitignore``;
- paths are shown relative to the working directory, without ``./``.

Paths that do not exist come back as targets with an ``error``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence

from .discovery import _excluded, discover
from .records import record
from .settings import Resolver, Settings


@record
class Target:
    """A file to check with its settings, or a path that could not be used."""

    path: str
    settings: Settings | None
    error: str | None = None
    #: named on the command line (not found in a folder)
    named: bool = False


def display_path(path: str, cwd: str | None = None) -> str:
    """``path`` as gradgate prints it: relative to the working directory when it is an
    absolute path below it, and never starting with ``./`` (otherwise as given)."""
    if os.path.isabs(path):
        # relpath's answer, worked out lexically as relpath does, without its walk over
        # both paths' components (a third of collecting transformers' 2,912 files)
        normal, base = os.path.normpath(path), os.path.normpath(cwd or os.getcwd())
        if not normal.startswith("//") and not base.startswith("//"):  # POSIX keeps a leading "//"
            if os.path.normcase(normal) == os.path.normcase(base):
                return os.curdir
            above = os.path.join(base, "")
            if os.path.normcase(normal).startswith(os.path.normcase(above)):
                below = normal[len(above) :]
                # a name starting with ".." below it (`..cache/a.py`): as relpath's answer
                # was read, a climb
                return path if below.startswith(os.pardir) else below
            return path  # not below it (relpath would climb with "..", or another drive)
        try:
            relative = os.path.relpath(path, base)
        except ValueError:  # another drive
            return path
        return path if relative.startswith(os.pardir) else relative
    while path.startswith("./") and len(path) > 2:
        path = path[2:].lstrip("/")
    return path


def _excluded_below(path: str, base: str, patterns: tuple[str, ...], stop: str | None) -> bool:
    """Is ``path`` or a folder above it (below ``stop``, an absolute folder, when given)
    matched by one of ``patterns``, taken relative to ``base``?"""
    absolute = os.path.abspath(path)
    relative = os.path.relpath(absolute, base)
    if relative.startswith(os.pardir):
        relative = display_path(path)
    parts = relative.split(os.sep)
    for end in range(len(parts), 0, -1):
        candidate = os.sep.join(parts[:end])
        if end < len(parts) and stop is not None:
            folder = os.path.normpath(os.path.join(base, candidate))
            if not (folder + os.sep).startswith(stop.rstrip(os.sep) + os.sep) or folder == stop:
                break  # a folder the user named (or one above it): not ours to exclude
        if _excluded(candidate, patterns):
            return True
    return False


class GitIgnore:
    """Git's ignore rules for files on disk: every ``.gitignore`` from the repository's
    top folder down to the file's, then ``.git/info/exclude``; the deepest match wins."""

    def __init__(self) -> None:
        self._tops: dict[str, str | None] = {}
        self._specs: dict[str, object | None] = {}

    def _top(self, directory: str) -> str | None:
        if directory not in self._tops:
            if os.path.exists(os.path.join(directory, ".git")):
                self._tops[directory] = directory
            else:
                parent = os.path.dirname(directory)
                self._tops[directory] = None if parent == directory else self._top(parent)
        return self._tops[directory]

    def _spec(self, file: str):
        if file not in self._specs:
            try:
                with open(file, encoding="utf-8", errors="replace") as handle:
                    lines = handle.read().splitlines()
            except OSError:
                lines = []
            if lines:
                import pathspec

                self._specs[file] = pathspec.GitIgnoreSpec.from_lines(lines)
            else:
                self._specs[file] = None
        return self._specs[file]

    def ignored(self, path: str) -> bool:
        absolute = os.path.abspath(path)
        directory = os.path.dirname(absolute)
        top = self._top(directory)
        if top is None:
            return False
        folders = [directory]
        while folders[-1] != top:
            folders.append(os.path.dirname(folders[-1]))
        sources = [(os.path.join(top, ".git", "info", "exclude"), top)]
        sources += [(os.path.join(folder, ".gitignore"), folder) for folder in reversed(folders)]
        verdict = False
        for file, base in sources:
            spec = self._spec(file)
            if spec is None:
                continue
            relative = os.path.relpath(absolute, base).replace(os.sep, "/")
            result = spec.check_file(relative)
            if result.include is not None:
                verdict = result.include
        return verdict


def collect(
    paths: Sequence[str],
    resolver: Resolver,
    force_exclude: bool = True,
    respect_gitignore: bool = True,
    exclude: tuple[str, ...] = (),
    skipped: Callable[[str, str], None] | None = None,
) -> list[Target]:
    """The files under ``paths`` to check, in discovery order, each once.

    ``exclude`` (the command line's globs) also prunes the walk, as before per-file
    settings; it is part of every file's settings through the resolver's override.
    ``skipped(path, reason)`` hears of the paths discovery left out on purpose.
    Raises :class:`~gradgate.config.ConfigError` for an invalid configuration file.
    """
    gitignore = GitIgnore() if respect_gitignore else None
    targets: list[Target] = []
    seen: set[str] = set()
    cwd = os.getcwd()
    for argument in paths:
        explicit_file = not os.path.isdir(argument)
        stop = None if force_exclude else os.path.abspath(argument)
        for item in discover([argument], exclude):
            shown = display_path(item.path, cwd)
            key = os.path.abspath(item.path)
            if key in seen:
                continue
            seen.add(key)
            if item.skipped is not None:
                if skipped is not None:
                    skipped(item.path, item.skipped)
                continue
            if item.error is not None:
                targets.append(Target(shown, None, item.error))
                continue
            settings = resolver.for_path(key, is_file=True)
            if explicit_file and not force_exclude:
                targets.append(Target(shown, settings, named=True))
                continue
            if settings.config.exclude and _excluded_below(item.path, settings.root, settings.config.exclude, stop):
                continue
            if gitignore is not None and not explicit_file and gitignore.ignored(key):
                continue
            targets.append(Target(shown, settings, named=explicit_file))
    return targets


def groups(targets: Iterable[Target]) -> list[tuple[Settings, list[Target]]]:
    """Targets that can be read grouped by their settings, in order of first appearance."""
    by_source: dict[int, tuple[Settings, list[Target]]] = {}
    for target in targets:
        if target.settings is None:
            continue
        entry = by_source.setdefault(id(target.settings), (target.settings, []))
        entry[1].append(target)
    return list(by_source.values())
