"""Reading Python sources safely, and writing fixed ones back without losing a byte.

:func:`read_source` refuses, with a one-line reason, what cannot be Python text (binary
data, undecodable bytes). :func:`write_atomic` replaces a file only if it still holds the
bytes that were read, through a temporary file in the same directory and a rename, so a
reader never sees half a file and the file keeps its permissions.
"""

from __future__ import annotations

import errno
import io
import os
import re
import stat
import tokenize
from dataclasses import dataclass


_COOKIE = re.compile(rb"^[ \t\f]*#.*?coding[:=]", re.MULTILINE)


class SourceError(Exception):
    """A file that cannot be read as Python source; ``str()`` is the reason."""


@dataclass(frozen=True)
class SourceFile:
    path: str
    data: bytes
    encoding: str


def decode_check(data: bytes) -> str:
    """The file's encoding (PEP 263 cookie, BOM or UTF-8) after checking all bytes decode."""
    if b"\x00" in data:
        raise SourceError("binary file: it contains NUL bytes")
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:
        if not _COOKIE.search(b"\n".join(data.splitlines()[:2])):
            # no declaration at all: the first lines are simply not UTF-8
            try:
                data.decode("utf-8")
            except UnicodeDecodeError as error:
                raise SourceError(
                    f"cannot decode as utf-8: byte 0x{data[error.start]:02x} at offset {error.start}"
                ) from None
        raise SourceError(f"bad encoding declaration: {exc}") from None
    try:
        data.decode(encoding)
    except UnicodeDecodeError as exc:
        raise SourceError(
            f"cannot decode as {encoding}: byte 0x{data[exc.start]:02x} at offset {exc.start}"
        ) from None
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
        with open(path, "rb") as handle:
            data = handle.read()
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
    return SourceFile(path, data, decode_check(data))


class ChangedOnDisk(SourceError):
    """The file no longer holds the bytes the fix was computed from."""


def write_atomic(path: str, expected: bytes, new: bytes) -> None:
    """Replace ``path``'s content ``expected`` by ``new``, atomically.

    Raises :class:`ChangedOnDisk` (and writes nothing) if the file changed since it was
    read, :class:`SourceError` on any I/O failure; the original is then untouched.
    """
    import tempfile  # only when writing

    real = os.path.realpath(path)
    directory = os.path.dirname(real) or "."
    try:
        with open(real, "rb") as handle:
            if handle.read() != expected:
                raise ChangedOnDisk("file changed on disk since it was read; not overwritten")
        mode = stat.S_IMODE(os.stat(real).st_mode)
        fd, temporary = tempfile.mkstemp(
            prefix=f".{os.path.basename(real)}.", suffix=".gradgate", dir=directory
        )
    except OSError as exc:
        raise SourceError(f"cannot write: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(new)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, mode)
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
