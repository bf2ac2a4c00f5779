"""Run a module's forward in one grad mode (imports torch).

- ``grad``: one forward with grad enabled (no backward: the forward's path is what counts);
- ``no_grad``: one forward under ``torch.no_grad()``;
- ``checkpoint``: reentrant ``torch.utils.checkpoint`` (``use_reentrant=True``): a first
  forward under no_grad, then the recompute with grad during the backward;
- ``checkpoint_non_reentrant`` (``use_reentrant=False``): a first forward with grad, then
  the recompute during the backward (early stop off, so the recompute runs in full).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch.utils import checkpoint as ckpt

MODES = ("grad", "no_grad", "checkpoint", "checkpoint_non_reentrant")
DEFAULT_MODES = ("grad", "no_grad", "checkpoint")

#: the forwards each mode makes, in order
PHASES = {
    "grad": ["forward"],
    "no_grad": ["forward"],
    "checkpoint": ["first_forward", "recompute"],
    "checkpoint_non_reentrant": ["first_forward", "recompute"],
}


def check_modes(modes: Sequence[str]) -> tuple[str, ...]:
    unknown = [m for m in modes if m not in MODES]
    if unknown or not modes:
        raise ValueError(f"unknown modes {unknown}; choose from {', '.join(MODES)}" if unknown else "no modes given")
    return tuple(modes)


def fresh_inputs(inputs: Sequence[Any], requires_grad: bool) -> tuple[Any, ...]:
    """Copies of the tensors in ``inputs`` (floating ones requiring grad if asked)."""
    out = []
    for value in inputs:
        if isinstance(value, torch.Tensor):
            value = value.detach().clone()
            if requires_grad and value.is_floating_point():
                value.requires_grad_(True)
        out.append(value)
    return tuple(out)


def _outputs(result: Any) -> list[torch.Tensor]:
    if isinstance(result, torch.Tensor):
        return [result]
    if isinstance(result, (list, tuple)):
        return [t for item in result for t in _outputs(item)]
    if isinstance(result, dict):
        return [t for item in result.values() for t in _outputs(item)]
    return []


def _backward(result: Any) -> None:
    tensors = [t for t in _outputs(result) if t.requires_grad]
    if tensors:
        torch.autograd.backward(tensors, [torch.ones_like(t) for t in tensors])


def run(module: torch.nn.Module, inputs: Sequence[Any], mode: str) -> str | None:
    """Run ``module(*inputs)`` in ``mode``. Returns None, or why a checkpoint's backward
    failed (a recompute that leaves the first forward's path can fail it: a different
    output shape, say); the forwards made until then are still recorded."""
    if mode == "grad":
        with torch.enable_grad():
            module(*fresh_inputs(inputs, requires_grad=True))
        return None
    if mode == "no_grad":
        with torch.no_grad():
            module(*fresh_inputs(inputs, requires_grad=False))
        return None
    if mode in ("checkpoint", "checkpoint_non_reentrant"):
        args = fresh_inputs(inputs, requires_grad=True)
        with torch.enable_grad(), ckpt.set_checkpoint_early_stop(False):
            result = ckpt.checkpoint(module, *args, use_reentrant=mode == "checkpoint")
            try:
                _backward(result)
            except RuntimeError as exc:
                return f"the backward (with the recompute) failed: {exc}"
        return None
    raise ValueError(f"unknown mode {mode!r}; choose from {', '.join(MODES)}")
