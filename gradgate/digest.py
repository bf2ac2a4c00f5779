"""Digests and message authentication codes, without OpenSSL.

``import hashlib`` (and ``import hmac``, which imports it) loads OpenSSL's ``_hashlib``:
3-4.5 ms, a twentieth of a warm check, for a few digests of small inputs. BLAKE2b is
built into CPython (``_blake2``) and is both a fast digest and, keyed, a MAC (RFC 7693),
so the cache, the configuration fingerprint and the language server's memo take their
digests here. Where ``_blake2`` is missing (another Python), ``hashlib``'s is used.
Reports whose fingerprints users compare across versions (SARIF, GitLab) keep SHA-256.
"""

from __future__ import annotations

try:
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - CPython has it
    from hashlib import blake2b

try:
    from _operator import _compare_digest as same_digest
except ImportError:  # pragma: no cover - CPython has it
    from hmac import compare_digest as same_digest  # type: ignore[no-redef]

__all__ = ["digest", "mac", "same_digest"]

#: the longest key BLAKE2b takes (bytes)
MAX_KEY = 64


def digest(data: bytes, size: int = 32) -> str:
    """The BLAKE2b digest of ``data``, ``size`` bytes long, in hex."""
    return blake2b(data, digest_size=size).hexdigest()


def mac(key: bytes, data: bytes) -> bytes:
    """The keyed BLAKE2b-256 of ``data`` under ``key`` (at most :data:`MAX_KEY` bytes), in hex."""
    if len(key) > MAX_KEY:
        raise ValueError(f"a BLAKE2b key holds at most {MAX_KEY} bytes")
    return blake2b(data, key=key, digest_size=32).hexdigest().encode()
