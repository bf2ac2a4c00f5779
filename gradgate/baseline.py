"""Baselines: adopt gradgate on a codebase with known findings, report only new ones.

A baseline records each finding by content, not position: its rule, its file and the
text of its line (whitespace-normalised), with a count for identical lines. Edits
elsewhere in the file (lines inserted above, reformatting of other statements) leave it
valid; changing the flagged line itself, or adding another identical one, shows up.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Sequence

from .reporters import fingerprint
from .results import Finding

FORMAT = 1


class BaselineError(ValueError):
    pass


def _key(finding: Finding, root: str | None) -> tuple[str, str]:
    return finding.rule, fingerprint(finding, root)


def write(path: str, findings: Sequence[Finding], root: str | None = None) -> int:
    counts = Counter(_key(f, root) for f in findings)
    first: dict[tuple[str, str], Finding] = {}
    for f in findings:
        first.setdefault(_key(f, root), f)
    entries = [
        {
            "rule": rule,
            "fingerprint": digest,
            "path": first[(rule, digest)].path.replace(os.sep, "/"),
            "line_text": first[(rule, digest)].source_line.strip(),
            "count": counts[(rule, digest)],
        }
        for rule, digest in sorted(counts, key=lambda k: (first[k].path, first[k].line))
    ]
    data = json.dumps({"format": FORMAT, "tool": "gradgate", "findings": entries}, indent=2) + "\n"
    directory = os.path.dirname(os.path.abspath(path))
    import tempfile

    try:
        fd, temporary = tempfile.mkstemp(dir=directory, suffix=".tmp")
    except OSError as exc:
        raise BaselineError(f"cannot write baseline {path}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", errors="surrogateescape") as handle:
            handle.write(data)
        os.replace(temporary, path)
    except OSError as exc:
        raise BaselineError(f"cannot write baseline {path}: {exc.strerror or exc}") from None
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)
    return len(findings)


def load(path: str) -> Counter:
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle, parse_constant=_no_constant)
    except OSError as exc:
        raise BaselineError(f"{path}: cannot read baseline: {exc.strerror}") from None
    except ValueError as exc:
        raise BaselineError(f"{path}: not a gradgate baseline (invalid JSON: {exc})") from None
    except RecursionError:
        raise BaselineError(f"{path}: not a gradgate baseline (nested too deeply)") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("findings"), list):
        raise BaselineError(f"{path}: not a gradgate baseline (format {FORMAT} expected)")
    known: Counter = Counter()
    for entry in data["findings"]:
        try:
            rule, digest, count = entry["rule"], entry["fingerprint"], entry.get("count", 1)
        except (KeyError, TypeError, AttributeError):
            raise BaselineError(f"{path}: malformed baseline entry {_short(entry)}") from None
        if (
            not isinstance(rule, str)
            or not isinstance(digest, str)
            or not isinstance(count, int)
            or isinstance(count, bool)
            or not 0 < count <= MAX_COUNT
        ):
            raise BaselineError(f"{path}: malformed baseline entry {_short(entry)}")
        known[(rule, digest)] += count
    return known


#: more identical findings than this in one baseline entry is not a baseline gradgate wrote
MAX_COUNT = 10**9


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not a count")


def _short(entry: object) -> str:
    from .escape import display

    text = repr(entry)
    return display(text if len(text) <= 200 else text[:200] + "...")


def new_findings(findings: Sequence[Finding], known: Counter, root: str | None = None) -> list[Finding]:
    remaining = Counter(known)
    out = []
    for finding in findings:
        key = _key(finding, root)
        if remaining[key] > 0:
            remaining[key] -= 1
        else:
            out.append(finding)
    return out


class Known:
    """The findings a baseline records, as the predicate a fix asks (``known(finding)``):
    a fix (``gradgate fix --baseline``, the codemod's ``--baseline``, the language
    server's ``baseline`` option) leaves such a finding alone, as ``check --baseline``
    does not report it. Every finding whose rule, file and line text the baseline
    records is left, however many it counts: which of two identical lines is the new one
    cannot be told. Plain data, so that worker processes can be handed it."""

    def __init__(self, known: Counter, root: str | None = None) -> None:
        self.keys = frozenset(key for key, count in known.items() if count > 0)
        self.root = root

    def __call__(self, finding: Finding) -> bool:
        return _key(finding, self.root) in self.keys


def known_of(path: str, root: str | None = None) -> Known:
    """:class:`Known` of the baseline file ``path`` (raises :class:`BaselineError`)."""
    return Known(load(path), root)
