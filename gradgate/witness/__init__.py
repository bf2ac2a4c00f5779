"""The runtime witness: show that a module's forward takes different paths under grad modes.

``compare_forwards(build, inputs, modes=("grad", "no_grad", "checkpoint"))`` runs the forward
once per mode and records, per forward, the collectives, ATen ops, probe calls and
``module.training``; the result lists where each forward leaves the grad-mode forward's
path, at which user-code frame, and which ``gradgate check`` finding explains it.
``assert_same_forward_paths`` fails a test with that diff; ``gradgate witness CASES.py``
runs a file of cases under torchrun. See docs/witness.md.

Importing this package does not import torch; its names that need torch load on first use.
"""

from __future__ import annotations

from typing import Any

from .probes import Probe

__all__ = [
    "Comparison",
    "ForwardPathsDiffer",
    "Probe",
    "assert_same_forward_paths",
    "compare_forwards",
    "rank_device",
]

_LAZY = {
    "Comparison": "compare",
    "ForwardPathsDiffer": "compare",
    "assert_same_forward_paths": "compare",
    "compare_forwards": "compare",
    "rank_device": "rank",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
