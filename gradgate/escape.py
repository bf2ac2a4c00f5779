"""Escaping what comes from a file name or a source file before it is printed.

A file name may hold any byte but ``/`` and NUL, and a source line any character, so
what gradgate prints from them is escaped for where it goes:

- :func:`display` for text output and stderr: control characters (newlines included),
  line and paragraph separators and bidirectional overrides become Python-style escapes
  (``\\n``, ``\\x1b``, ``\\u202e``), and the bytes of a name that is not UTF-8 (decoded
  by Python with ``surrogateescape``) become ``\\xNN``. A printed line is then one line,
  and no name can forge another line (a GitHub annotation, a finding) or a terminal
  escape.
- :func:`github_data` and :func:`github_property` for GitHub workflow commands, as
  GitHub's own toolkit escapes them (``%``, CR and LF; in properties also ``:`` and ``,``).
- :func:`uri_path` for SARIF: the name's bytes, percent-encoded.
- :func:`git_path` for the ``---``/``+++`` lines of a patch: the name's bytes, C-quoted
  as git writes them when they need it.
"""

from __future__ import annotations

import os

#: characters that break a line or reorder text on a terminal, beyond the C0/C1 controls
_INVISIBLE = frozenset("\u2028\u2029\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _needs_escape(char: str, keep_tabs: bool) -> bool:
    code = ord(char)
    if char == "\t":
        return not keep_tabs
    return code < 0x20 or 0x7F <= code < 0xA0 or 0xD800 <= code < 0xE000 or char in _INVISIBLE


def _escape_char(char: str) -> str:
    code = ord(char)
    if char in _NAMED:
        return _NAMED[char]
    if 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8 (surrogateescape)
        return f"\\x{code - 0xDC00:02x}"
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}"


def display(text: str, keep_tabs: bool = False) -> str:
    """``text`` as one printable line (see the module docstring); unchanged when safe."""
    if text.isprintable() and (keep_tabs or "\t" not in text):
        return text
    return "".join(_escape_char(c) if _needs_escape(c, keep_tabs) else c for c in text)


def encodable(text: str) -> str:
    """``text`` with only the bytes of a non-UTF-8 name escaped (``\\xNN``): what JSON and
    SARIF carry, whose own escaping handles control characters."""
    if not any(0xD800 <= ord(c) < 0xE000 for c in text):
        return text
    return "".join(_escape_char(c) if 0xD800 <= ord(c) < 0xE000 else c for c in text)


def github_data(text: str) -> str:
    """The message part of a workflow command (after ``::``)."""
    return encodable(text).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def github_property(text: str) -> str:
    """A property value of a workflow command (``file=...``)."""
    return github_data(text).replace(":", "%3A").replace(",", "%2C")


def uri_path(path: str) -> str:
    """A relative path as a URI reference: its bytes percent-encoded, ``/`` kept."""
    from urllib.parse import quote

    return quote(os.fsencode(path))


def git_path(prefix: bytes, path: str) -> bytes:
    """``prefix + path`` as git writes a file name in a patch header: as is when it
    holds no control character, ``"`` or ``\\``; else C-quoted (``"a/x\\ny.py"``)."""
    raw = prefix + os.fsencode(path)
    if not any(b < 0x20 or b in (0x22, 0x5C, 0x7F) for b in raw):
        return raw
    named = {
        0x07: b"\\a",
        0x08: b"\\b",
        0x09: b"\\t",
        0x0A: b"\\n",
        0x0B: b"\\v",
        0x0C: b"\\f",
        0x0D: b"\\r",
        0x22: b'\\"',
        0x5C: b"\\\\",
    }
    out = bytearray(b'"')
    for byte in raw:
        if byte in named:
            out += named[byte]
        elif byte < 0x20 or byte == 0x7F:
            out += b"\\%03o" % byte
        else:
            out.append(byte)
    out += b'"'
    return bytes(out)
