"""Reading Python sources safely, and writing fixed ones back without losing a byte.

:func:`read_source` refuses, with a one-line reason, what cannot be Python text (binary
data, undecodable bytes). :func:`encode_fixed` turns a fixed text back into bytes that
differ from the original only where the text does. :func:`write_atomic` replaces a file
only if it still holds the bytes that were read, through a temporary file in the same
directory and a rename, so a reader never sees half a file; the file keeps its mode,
owner and group, or is not written.
"""

from __future__ import annotations

import codecs
import contextlib
import errno
import os
import re
import signal
import stat
import tokenize
from collections.abc import Iterator

from .records import record

_COOKIE = re.compile(rb"^[ \t\f]*#.*?coding[:=]", re.MULTILINE)


class SourceError(Exception):
    """A file that cannot be read as Python source; ``str()`` is the reason."""


@record
class SourceFile:
    path: str
    data: bytes
    encoding: str
    #: the file's status, taken before its bytes were read
    info: os.stat_result | None = None


def _first_lines(data: bytes, count: int = 2) -> list[bytes]:
    """The first ``count`` lines of ``data`` (ends kept, a lone CR ending one), without
    splitting the rest of a file (5 MB of TransformerEngine: 135,000 lines)."""
    head = data[:4096]
    lines = head.splitlines(keepends=True)
    if len(lines) > count or len(head) == len(data):
        return lines[:count]
    return data.splitlines(keepends=True)[:count]  # long first lines


def _head(data: bytes) -> bytes:
    """The bytes up to the end of the second line ended by a line feed (the whole of
    ``data`` if it has fewer): the two lines an encoding declaration may be on, or more
    (a lone CR ends a line too)."""
    first = data.find(b"\n")
    second = data.find(b"\n", first + 1) if first >= 0 else -1
    return data if second < 0 else data[: second + 1]


def syntax_error_reason(exc: SyntaxError) -> str:
    """How a file's syntax error is reported (the engine's words, and a named file's
    that the pre-filter passed over)."""
    return f"syntax error at {exc.lineno}:{exc.offset}: {exc.msg}"


def syntax_error(data: bytes) -> str | None:
    """Why ``data`` cannot be read or parsed as Python, or None: the check a file named
    on the command line gets even when it can hold no finding (the engine parses the
    others)."""
    import ast

    try:
        text = data.decode(decode_check(data))
    except SourceError as exc:
        return str(exc)
    try:
        ast.parse(text)
    except SyntaxError as exc:
        return syntax_error_reason(exc)
    except (RecursionError, MemoryError, ValueError) as exc:
        return f"cannot parse: {type(exc).__name__}"
    return None


def decode_check(data: bytes) -> str:
    """The file's encoding (PEP 263 cookie, BOM or UTF-8) after checking all bytes decode."""
    if b"\x00" in data:
        raise SourceError("binary file: it contains NUL bytes")
    if not data.startswith(codecs.BOM_UTF8) and b"coding" not in _head(data):
        # no line that could declare an encoding, and no BOM: UTF-8 (most files), read
        # without tokenize's detection
        if data.isascii():
            return "utf-8"
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise SourceError(f"cannot decode as utf-8: byte 0x{data[exc.start]:02x} at offset {exc.start}") from None
        return "utf-8"
    try:
        # CPython's tokenizer ends a line at a lone CR too (io's readline does not);
        # the declaration is on one of the first two lines: only those are split
        lines = iter(_first_lines(data))
        encoding, _ = tokenize.detect_encoding(lambda: next(lines, b""))
    except SyntaxError as exc:
        if not _COOKIE.search(b"\n".join(_first_lines(data))):
            # no declaration at all: the first lines are simply not UTF-8
            try:
                data.decode("utf-8")
            except UnicodeDecodeError as error:
                raise SourceError(
                    f"cannot decode as utf-8: byte 0x{data[error.start]:02x} at offset {error.start}"
                ) from None
        raise SourceError(f"bad encoding declaration: {exc}") from None
    if encoding in ("utf-8", "utf-8-sig") and data.isascii():
        return encoding  # ASCII is UTF-8: nothing to decode (half of transformers' files)
    try:
        data.decode(encoding)
    except UnicodeDecodeError as exc:
        raise SourceError(f"cannot decode as {encoding}: byte 0x{data[exc.start]:02x} at offset {exc.start}") from None
    except LookupError:
        raise SourceError(f"unknown encoding {encoding!r}") from None
    return encoding


def read_source(path: str) -> SourceFile:
    try:
        info = os.stat(path)
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError
        if not stat.S_ISREG(info.st_mode):  # a FIFO or device would block or never end
            raise SourceError("not a regular file")
        data = _read_bytes(path, info.st_size)
    except IsADirectoryError:
        raise SourceError("is a directory") from None
    except FileNotFoundError:
        if os.path.islink(path):
            raise SourceError("broken symbolic link") from None
        raise SourceError("no such file") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise SourceError("symbolic link loop") from None
        raise SourceError(exc.strerror or str(exc)) from None
    return SourceFile(path, data, decode_check(data), info)


def _read_bytes(path: str, size: int) -> bytes:
    """All the bytes of the regular file ``path``, expected to be ``size`` long: read to
    its end in that many (and a last read that finds the end), without a buffered file
    object to make and close (2,912 files of transformers: 13 ms less)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        chunks: list[bytes] = []
        while chunk := os.read(fd, size + 1 if not chunks else 1 << 20):
            chunks.append(chunk)
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)
    finally:
        os.close(fd)


def _keep_owner_and_mode(fd: int, original: os.stat_result) -> None:
    """Give the temporary file ``fd`` the original's owner, group and mode (in that
    order: a change of owner clears set-user-ID bits). Raises :class:`SourceError` where
    the owner or group cannot be kept (a file of another user, written by a non-root
    user): the rename would hand the file to whoever ran the fix."""
    mine = os.fstat(fd)
    if (mine.st_uid, mine.st_gid) != (original.st_uid, original.st_gid):
        try:
            os.fchown(fd, original.st_uid, original.st_gid)
        except PermissionError:
            raise SourceError(
                f"cannot keep the file's owner and group ({original.st_uid}:{original.st_gid}); not overwritten"
            ) from None
    os.fchmod(fd, stat.S_IMODE(original.st_mode))


class ChangedOnDisk(SourceError):
    """The file no longer holds the bytes the fix was computed from."""


class ReadOnly(SourceError):
    """The file is read-only (no write permission bit, or not writable by this user):
    a fix does not replace it (a rename would, for anyone who may write the folder)."""


def _writable(path: str, info: os.stat_result) -> bool:
    return bool(stat.S_IMODE(info.st_mode) & 0o222) and os.access(path, os.W_OK)


def write_atomic(path: str, expected: bytes, new: bytes) -> None:
    """Replace ``path``'s content ``expected`` by ``new``, atomically.

    Raises :class:`ChangedOnDisk` (and writes nothing) if the file changed since it was
    read, :class:`SourceError` on any I/O failure; the original is then untouched.
    """
    real = os.path.realpath(path)
    directory = os.path.dirname(real) or "."
    try:
        with open(real, "rb") as handle:
            if handle.read() != expected:
                raise ChangedOnDisk("file changed on disk since it was read; not overwritten")
        info = os.stat(real)
        if not _writable(real, info):
            raise ReadOnly("the file is read-only; not rewritten")
    except OSError as exc:
        raise SourceError(f"cannot write: {exc.strerror or exc}") from None
    # SIGTERM, SIGINT and SIGHUP wait while the temporary file exists: a fix stopped
    # meanwhile (a pre-commit hook's timeout, Ctrl-C) leaves no `.NAME.XXXX.gradgate`
    with _signals_held():
        _replace_through_temporary(real, directory, info, expected, new)


_HELD = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """Hold the signals that end a process until the block is done (they are then
    delivered: the process still stops, only later)."""
    try:
        before = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD)
    except (AttributeError, OSError, ValueError):  # a platform without signal masks
        yield
        return
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def _replace_through_temporary(real: str, directory: str, info: os.stat_result, expected: bytes, new: bytes) -> None:
    import tempfile  # only when writing

    try:
        fd, temporary = tempfile.mkstemp(prefix=f".{os.path.basename(real)}.", suffix=".gradgate", dir=directory)
    except OSError as exc:
        raise SourceError(f"cannot write: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "wb") as handle:
            _keep_owner_and_mode(handle.fileno(), info)
            handle.write(new)
            handle.flush()
            os.fsync(handle.fileno())
        # last check right before the rename: a concurrent writer wins, we back off
        with open(real, "rb") as handle:
            if handle.read() != expected:
                raise ChangedOnDisk("file changed on disk since it was read; not overwritten")
        os.replace(temporary, real)
    except OSError as exc:
        raise SourceError(f"cannot write: {exc.strerror or exc}") from None
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)


# -- fixed text back to bytes ----------------------------------------------------------
_BLOCK = 4096


def common_prefix(a: str, b: str) -> int:
    """Length of the longest common prefix of ``a`` and ``b`` (block by block, then a
    binary search: C-speed slice compares, not a Python loop over each character)."""
    limit = min(len(a), len(b))
    start = 0
    while start < limit and a[start : start + _BLOCK] == b[start : start + _BLOCK]:
        start += _BLOCK
    if start >= limit:  # one is a prefix of the other (or they are equal)
        return limit
    low, high = start, min(limit, start + _BLOCK)
    while low < high:  # a[:low] == b[:low]; find the first difference in the block
        middle = (low + high + 1) // 2
        if a[low:middle] == b[low:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def common_suffix(a: str, b: str, limit: int) -> int:
    """Length of the longest common suffix of ``a`` and ``b``, at most ``limit``."""
    n = 0
    while n < limit:
        step = min(_BLOCK, limit - n)
        if a[len(a) - n - step : len(a) - n] == b[len(b) - n - step : len(b) - n]:
            n += step
            continue
        low, high = 0, step  # the first `low` characters before `n` agree
        while low < high:
            middle = (low + high + 1) // 2
            if a[len(a) - n - middle : len(a) - n] == b[len(b) - n - middle : len(b) - n]:
                low = middle
            else:
                high = middle - 1
        return n + low
    return n


def _byte_offset(
    data: bytes, text: str, offset: int, encoding: str, whole_lines: bool, upward: bool
) -> tuple[int, int]:
    """A boundary in ``data`` (which decodes to ``text``) at or next to the character
    ``offset``, as (byte offset, character offset). The start of the offset's line is
    found by counting LF bytes; then (unless ``whole_lines``) the characters before the
    offset on that line are decoded one byte at a time. Where that fails (a stateful
    encoding) or ``whole_lines`` is asked, the boundary is the line start (or, ``upward``,
    the next line's start)."""
    import codecs

    line_start = text.rfind("\n", 0, offset) + 1
    position = 0
    for _ in range(text.count("\n", 0, line_start)):
        position = data.index(b"\n", position) + 1
    wanted = offset - line_start
    if wanted == 0:
        return position, offset
    if not whole_lines:
        decoder = codecs.getincrementaldecoder(encoding)()
        produced = 0
        for end in range(position, len(data)):
            produced += len(decoder.decode(data[end : end + 1]))
            if produced == wanted:
                return end + 1, offset
            if produced > wanted or data[end] == 0x0A:
                break
    if not upward:
        return position, line_start
    newline = text.find("\n", offset)
    if newline < 0:
        return len(data), len(text)
    return data.index(b"\n", position) + 1, newline + 1


def encode_fixed(original: bytes, original_text: str, fixed_text: str, encoding: str) -> bytes:
    """The bytes of ``fixed_text``: ``original`` (which decodes to ``original_text``)
    kept byte for byte outside the region where the two texts differ, only the new middle
    encoded. Encodings whose decoding is not the identity of encoding (cp932's duplicate
    codes, utf-7's choice of shifts) so keep every byte outside the edit.

    The changed region is the texts' common prefix and suffix, widened to a character
    boundary that decodes on its own; where a stateful encoding (utf-7) does not decode
    back to ``fixed_text`` spliced at characters, whole lines are spliced instead, and as a
    last resort the whole text is encoded. The result always decodes to ``fixed_text``.
    Raises :class:`SourceError` when the new text cannot be encoded at all.
    """
    import codecs

    name = codecs.lookup(encoding).name
    if name == "utf-8":  # decode . encode is the identity: nothing to preserve by hand
        return fixed_text.encode("utf-8")
    if name == "utf-8-sig":
        bom = codecs.BOM_UTF8 if original.startswith(codecs.BOM_UTF8) else b""
        return bom + fixed_text.encode("utf-8")
    if original_text == fixed_text:
        return original
    prefix = common_prefix(original_text, fixed_text)
    suffix = common_suffix(original_text, fixed_text, min(len(original_text), len(fixed_text)) - prefix)
    for whole_lines in (False, True):
        try:
            start, start_char = _byte_offset(original, original_text, prefix, name, whole_lines, False)
            end, end_char = _byte_offset(original, original_text, len(original_text) - suffix, name, whole_lines, True)
            middle = fixed_text[start_char : len(fixed_text) - (len(original_text) - end_char)]
            spliced = original[:start] + middle.encode(name) + original[end:]
            if spliced.decode(name) == fixed_text:
                return spliced
        except (UnicodeError, ValueError):  # ValueError: LF bytes and characters disagree
            continue
    try:
        return fixed_text.encode(name)
    except UnicodeError as exc:
        raise SourceError(f"cannot encode the fixed text as {encoding}: {exc}") from None
