"""A cache of per-file lint results that cannot change a result.

An entry belongs to a file's absolute path and holds the file's status when it was read
(size, mtime, inode, device, ctime) and the result; the entry of an analysed file also
holds the BLAKE2b digest of the content it was computed from. A run finds a file's
entry by its path; where the status is unchanged the result is taken without reading
the file, elsewhere the file is read, and an analysed file's entry is used only if the
digest of what it now holds agrees. A file the bytes pre-filter dropped (or that ignores itself)
is not hashed: the scan that decides it again costs no more than the hash would (the
digest of every file was 33 ms of a 0.5 s cold check of transformers' 2,912 files, of
which 12 are analysed). The cache file an entry lives in is named by a
digest of what makes a result valid: gradgate's version and sources (rules included),
the Python and LibCST versions and the configuration (rule selection included); a change
to any of them starts from an empty cache.

By default the cache lives outside the checked tree, in the user's cache directory
(``$GRADGATE_CACHE_DIR``, else ``$XDG_CACHE_HOME/gradgate``, else ``~/.cache/gradgate``).
Wherever it is, every cache file carries a MAC (keyed BLAKE2b, :mod:`gradgate.digest`)
of its body under a per-user secret key (``secret.key`` in the user's cache directory,
mode 0600), checked before the body is read: a cache file planted in a tree (or copied
from another user) is ignored. The body is :mod:`marshal`'s (built in, where ``json``
cost an import and a slower parse); only a body this user's gradgate wrote and signed is
ever given to ``marshal.loads``, and the file's name holds the Python version, whose
marshal format it is.

The cache is an optimisation only: a missing, corrupt, crafted, foreign or unwritable
cache is ignored, never an error, and the results are the same with or without it.
"""

from __future__ import annotations

import marshal
import os
import stat
import sys

from . import __version__
from . import digest as hashing
from .config import Config
from .results import FileResult, Finding, Notice

FORMAT = 6
#: at most this many entries are kept (the oldest unused ones go first)
MAX_ENTRIES = 100_000
#: a file modified this recently (ns) before it was read gets no status entry: a write in
#: the same clock tick could leave the status unchanged (git's "racy clean" entries)
RACY_NS = 2_000_000_000
_MAGIC = b"gradgate-cache"
KEY_NAME = "secret.key"


def content_key(data: bytes) -> str:
    return hashing.digest(data)


def user_cache_dir() -> str:
    """The per-user cache directory: ``$XDG_CACHE_HOME/gradgate`` or ``~/.cache/gradgate``."""
    base = os.environ.get("XDG_CACHE_HOME")
    if not base or not os.path.isabs(base):
        base = os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "gradgate")


def default_cache_dir() -> str:
    """Where results are cached unless ``--cache-dir`` says otherwise."""
    return os.environ.get("GRADGATE_CACHE_DIR") or user_cache_dir()


def stat_key(info: os.stat_result) -> list[int]:
    return [info.st_size, info.st_mtime_ns, info.st_ino, info.st_dev, info.st_ctime_ns]


def _libcst_stamp() -> str:
    """LibCST's version, read from its ``_version.py`` without importing it (0.2 s)."""
    import importlib.util

    spec = importlib.util.find_spec("libcst")
    if spec is None or not spec.origin:
        return "no libcst"
    try:
        with open(os.path.join(os.path.dirname(spec.origin), "_version.py"), "rb") as handle:
            return hashing.digest(handle.read(), 8)
    except OSError:
        return spec.origin


def validity_digest(config: Config) -> str:
    """Digest of everything a cached result depends on besides the file itself."""
    from .registry import code_digest

    parts = [
        FORMAT,
        __version__,
        code_digest(),
        sys.version,
        sys.implementation.cache_tag,
        _libcst_stamp(),
        config.fingerprint(),
    ]
    return hashing.digest(repr(parts).encode(), 10)


def secret_key(create: bool = True) -> bytes | None:
    """The per-user key that authenticates cache files, made on first use; None where it
    cannot be read or made, or is not this user's private regular file."""
    directory = user_cache_dir()
    path = os.path.join(directory, KEY_NAME)
    for _ in range(2):
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except FileNotFoundError:
            if not create or not _make_key(directory, path):
                return None
            continue
        except OSError:
            return None
        try:
            info = os.fstat(fd)
            if (
                not stat.S_ISREG(info.st_mode)
                or info.st_mode & 0o077
                or (hasattr(os, "geteuid") and info.st_uid != os.geteuid())
            ):
                return None
            key = os.read(fd, 256).strip()
        except OSError:
            return None
        finally:
            os.close(fd)
        return key if len(key) == 64 else None
    return None


def _make_key(directory: str, path: str) -> bool:
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    except FileExistsError:
        return True  # another run made it first
    except OSError:
        return False
    try:
        os.write(fd, os.urandom(32).hex().encode())
    finally:
        os.close(fd)
    return True


def _mac(key: bytes, body: bytes) -> bytes:
    return hashing.mac(key, body)


class ResultCache:
    """The entries of one cache file; :meth:`save` writes back what was used and added."""

    def __init__(self, directory: str, config: Config, key: bytes | None = None) -> None:
        self.directory = directory
        self.path = os.path.join(directory, f"results-{validity_digest(config)}.marshal")
        self.key = key if key is not None else secret_key()
        self._entries: dict[str, dict] = {}
        self._used: dict[str, dict] = {}
        #: each dependency's record, made once (:meth:`dependency_record`)
        self._dependencies: dict[str, list[object]] = {}
        self.dirty = False
        if self.key is not None:
            self._entries = self._load()

    def _load(self) -> dict[str, dict]:
        try:
            with open(self.path, "rb") as handle:
                data = handle.read()
        except OSError:
            return {}  # no cache yet
        header, _, body = data.partition(b"\n")
        parts = header.split(b" ")
        if len(parts) != 3 or parts[0] != _MAGIC or parts[1] != str(FORMAT).encode():
            return {}
        assert self.key is not None
        if not hashing.same_digest(parts[2], _mac(self.key, body)):
            return {}  # not written by this user's gradgate: planted, copied or damaged
        try:
            loaded = marshal.loads(body)
        except (ValueError, EOFError, TypeError, RecursionError):
            return {}
        entries = loaded.get("entries") if isinstance(loaded, dict) else None
        return entries if isinstance(entries, dict) else {}

    # -- looking up -------------------------------------------------------------------
    def get_unchanged(self, abspath: str, info: os.stat_result, path: str) -> FileResult | None:
        """The cached result of ``abspath``, reported as ``path``, if its status is still
        ``info``."""
        entry = self._entries.get(abspath)
        if isinstance(entry, dict) and entry.get("stat") == stat_key(info):
            return self._result(abspath, entry, path)
        return None

    def confirms_content(self, abspath: str) -> bool:
        """Does the entry of ``abspath`` hold a digest (an analysed file's: its content,
        hashed, may spare the analysis)?"""
        entry = self._entries.get(abspath)
        return isinstance(entry, dict) and isinstance(entry.get("digest"), str)

    def get(self, abspath: str, digest: str, path: str) -> FileResult | None:
        """The cached result of ``abspath`` holding content ``digest``, reported as ``path``."""
        entry = self._entries.get(abspath)
        if not isinstance(entry, dict) or entry.get("digest") != digest:
            return None
        return self._result(abspath, entry, path)

    def _result(self, abspath: str, entry: dict, path: str) -> FileResult | None:
        try:
            findings = tuple(Finding.from_json(_placed(f, path)) for f in entry["findings"])
            error = entry.get("error")
            if not (error is None or isinstance(error, str)):
                return None
            # a file the pre-filter dropped is reported as such; any other came from here
            stage = "prefilter" if entry.get("stage") == "prefilter" else "cache"
            silenced = tuple(Finding.from_json(_placed(f, path)) for f in entry.get("suppressed", ()))
            dependencies = entry.get("dependencies", {})
            if not self._unchanged(dependencies):
                return None  # a file its findings rest on changed: analyse it again
            exports = tuple(str(name) for name in entry.get("exports", ()))
            carriers = tuple(str(name) for name in entry.get("carriers", ()))
            learned = tuple(str(name) for name in entry.get("learned", ()))
            notices = tuple(Notice(path, int(n["line"]), str(n["message"])) for n in entry.get("notices", ()))
            result = FileResult(
                path,
                findings,
                error=error,
                stage=stage,
                suppressed=silenced,
                dependencies=tuple(dependencies),
                exports=exports,
                carriers=carriers,
                learned=learned,
                notices=notices,
            )
        except (KeyError, TypeError, ValueError, AttributeError, RecursionError):
            return None  # an entry of another shape: recompute it
        self._used[abspath] = entry
        return result

    def _unchanged(self, dependencies: dict[str, list[object]]) -> bool:
        """Do the files an entry rests on still hold what they held? A file whose status
        is the recorded one is not read."""
        for path, (status, digest) in dependencies.items():
            try:
                info = os.stat(path)
            except OSError:
                return False
            if status is not None and stat_key(info) == status:
                continue
            try:
                with open(path, "rb") as handle:
                    if content_key(handle.read()) != digest:
                        return False
            except OSError:
                return False
        return True

    def dependency_record(self, paths: tuple[str, ...], now_ns: int) -> dict[str, list[object]]:
        """What :meth:`put` records of the files a result rests on: status and digest,
        each file's read and hashed once a cache (a run): the modules a package's files
        call are the same few (TransformerEngine: 54 reads of 20 files, 3.6 ms)."""
        record: dict[str, list[object]] = {}
        for path in paths:
            known = self._dependencies.get(path)
            if known is None:
                try:
                    info = os.stat(path)
                    with open(path, "rb") as handle:
                        known = [_trusted_stat(info, now_ns), content_key(handle.read())]
                except OSError:
                    known = []
                self._dependencies[path] = known
            if known:
                record[path] = list(known)
        return record

    def refresh(self, abspath: str, info: os.stat_result | None, now_ns: int) -> None:
        """Record the status of a file whose content matched its entry."""
        entry = self._used.get(abspath)
        if entry is not None and entry.get("stat") != _trusted_stat(info, now_ns):
            self._used[abspath] = {**entry, "stat": _trusted_stat(info, now_ns)}
            self.dirty = True

    # -- recording --------------------------------------------------------------------
    def put(
        self, abspath: str, digest: str | None, info: os.stat_result | None, now_ns: int, result: FileResult
    ) -> None:
        """Record ``result``, computed from content of digest ``digest`` (None: a result
        the bytes pre-filter or an ``ignore-file`` comment decided, found only by status)."""
        if result.fixed is not None:
            return  # only plain check results are cached

        def entries(found: tuple[Finding, ...]) -> list[dict[str, object]]:
            out = []
            for finding in found:
                data = finding.to_json()
                del data["path"]
                if finding.path != result.path:  # reported in a file the result rests on
                    data["elsewhere"] = os.path.abspath(finding.path)
                out.append(data)
            return out

        self._used[abspath] = {
            "digest": digest,
            "stat": _trusted_stat(info, now_ns),
            "findings": entries(result.findings),
            "suppressed": entries(result.suppressed),
            "error": result.error,
            "stage": result.stage,
            "dependencies": self.dependency_record(result.dependencies, now_ns),
            "exports": list(result.exports),
            "carriers": list(result.carriers),
            "learned": list(result.learned),
            "notices": [{"line": n.line, "message": n.message} for n in result.notices],
        }
        self.dirty = True

    def save(self) -> None:
        """Write the cache atomically; failures are ignored."""
        if not self.dirty or self.key is None:
            return
        entries = {k: v for k, v in self._entries.items() if k not in self._used}
        entries.update(self._used)  # most recently used last
        if len(entries) > MAX_ENTRIES:
            entries = dict(list(entries.items())[-MAX_ENTRIES:])
        try:
            body = marshal.dumps({"entries": entries})
        except ValueError:  # a value marshal cannot write (none should reach here): no cache
            return
        header = b" ".join([_MAGIC, str(FORMAT).encode(), _mac(self.key, body)])
        try:
            os.makedirs(self.directory, mode=0o700, exist_ok=True)
            _write_gitignore(self.directory)
            fd, temporary = _temporary(self.directory, ".tmp")
        except OSError:
            return
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(header + b"\n" + body)
            os.replace(temporary, self.path)
        except OSError:
            try:
                os.unlink(temporary)
            except OSError:
                pass


def _temporary(directory: str, suffix: str) -> tuple[int, str]:
    """A new file of this user's only (``tempfile.mkstemp``'s contract, without the
    import of ``tempfile``, ``shutil`` and ``random`` that costs a check 4 ms)."""
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        path = os.path.join(directory, f"tmp{os.urandom(6).hex()}{suffix}")
        try:
            return os.open(path, flags, 0o600), path
        except FileExistsError:
            continue
    raise FileExistsError(f"no temporary file name free in {directory}")


def _trusted_stat(info: os.stat_result | None, now_ns: int) -> list[int] | None:
    if info is None or info.st_mtime_ns > now_ns - RACY_NS or info.st_ctime_ns > now_ns - RACY_NS:
        return None
    return stat_key(info)


def _write_gitignore(directory: str) -> None:
    """A ``.gitignore`` of ``*`` in the cache folder, made only where no entry of that
    name exists (a dangling symbolic link included: its target is never created)."""
    path = os.path.join(directory, ".gitignore")
    if os.path.lexists(path):
        return
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
    except OSError:
        return
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write("# created by gradgate\n*\n")


def _placed(data: dict, path: str) -> dict:
    """A cached finding's data with its path: the file's (as this run shows it), or
    where the finding is reported when that is another file (a callee's predicate)."""
    elsewhere = data.get("elsewhere")
    out = {k: v for k, v in data.items() if k != "elsewhere"}
    if isinstance(elsewhere, str):
        relative = os.path.relpath(elsewhere)
        out["path"] = elsewhere if relative.startswith("..") else relative
    else:
        out["path"] = path
    return out
