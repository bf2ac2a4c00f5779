"""The bytes pre-filter: whether a file could hold any finding, from its bytes alone.

Most files of a PyTorch library read no grad mode (2,900 of transformers' 2,912), and a
search of their bytes for the configured tokens says so before anything is decoded or
parsed. It lives apart from the engine so that a run deciding files by their bytes alone
(a cache whose entries' status is too recent to trust) does not import the engine.
"""

from __future__ import annotations

from .config import Config


def may_hold_findings(data: bytes, config: Config, also: frozenset[bytes] = frozenset()) -> bool:
    """The bytes pre-filter: a file with none of these tokens reads no grad mode
    (``also``: names of functions of other files that return grad mode)."""
    gate = config.prefilter_gate()
    if (gate is None or gate in data) and any(token in data for token in config.prefilter_tokens()):
        return True
    return any(name in data for name in also)
