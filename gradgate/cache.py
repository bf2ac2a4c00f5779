"""A cache of per-file lint results, keyed by file content.

An entry's key is the SHA-256 of the file's bytes; the cache file it lives in is named
by a digest of gradgate's version and sources (rules included) and the configuration
(the rule selection included), so a change to any of them starts from an empty cache. A re-run over an unchanged tree then parses
nothing. Entries hold findings without their path (a file moved keeps its entry).

The cache is an optimisation only: a missing, corrupt or unwritable cache is ignored,
never fatal, and the results are the same with or without it.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile

from . import __version__
from .config import Config
from .results import FileResult, Finding

FORMAT = 2
#: at most this many entries are kept (the oldest unused ones go first)
MAX_ENTRIES = 100_000


def content_key(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def default_cache_dir() -> str:
    return os.environ.get("GRADGATE_CACHE_DIR") or ".gradgate_cache"


class ResultCache:
    def __init__(self, directory: str, config: Config) -> None:
        from .registry import code_digest

        # the configuration holds the rule selection; the code digest covers the rules
        digest = hashlib.sha256(
            json.dumps([FORMAT, __version__, code_digest(), config.fingerprint()]).encode()
        ).hexdigest()[:20]
        self.path = os.path.join(directory, f"results-{digest}.json")
        self.directory = directory
        self._entries: dict[str, dict] = {}
        self._used: dict[str, dict] = {}
        self.hits = 0
        self.dirty = False
        try:
            with open(self.path, encoding="utf-8") as handle:
                loaded = json.load(handle)
            if isinstance(loaded, dict) and loaded.get("format") == FORMAT:
                entries = loaded.get("entries")
                if isinstance(entries, dict):
                    self._entries = entries
        except (OSError, ValueError):
            pass  # no cache yet, or a corrupt one: start empty

    def get(self, key: str, path: str, source: bytes) -> FileResult | None:
        entry = self._entries.get(key)
        if not isinstance(entry, dict):
            return None
        try:
            findings = tuple(
                Finding.from_json({**f, "path": path})
                for f in entry["findings"]
            )
            result = FileResult(
                path, findings, error=entry.get("error"), source=source, stage="cache"
            )
        except (KeyError, TypeError, ValueError):
            return None  # an entry of another shape: recompute it
        self._used[key] = entry
        self.hits += 1
        return result

    def put(self, key: str, result: FileResult) -> None:
        if result.fixed is not None:
            return  # only plain check results are cached
        findings = []
        for finding in result.findings:
            data = finding.to_json()
            del data["path"]
            findings.append(data)
        self._used[key] = {"findings": findings, "error": result.error}
        self.dirty = True

    def save(self) -> None:
        """Write the cache atomically; failures are ignored."""
        if not self.dirty:
            return
        entries = {k: v for k, v in self._entries.items() if k not in self._used}
        entries.update(self._used)  # most recently used last
        if len(entries) > MAX_ENTRIES:
            entries = dict(list(entries.items())[-MAX_ENTRIES:])
        try:
            os.makedirs(self.directory, exist_ok=True)
            gitignore = os.path.join(self.directory, ".gitignore")
            if not os.path.exists(gitignore):
                with open(gitignore, "w", encoding="utf-8") as handle:
                    handle.write("# created by gradgate\n*\n")
            fd, temporary = tempfile.mkstemp(dir=self.directory, suffix=".tmp")
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump({"format": FORMAT, "entries": entries}, handle, separators=(",", ":"))
            os.replace(temporary, self.path)
        except OSError:
            pass
