# adapted from NVIDIA/TransformerEngine transformer_engine/pytorch/module/_common.py
"""Internal function used by multiple modules."""

from typing import Any, Callable, List, Optional, Tuple
from dataclasses import dataclass

import torch

from .. import cpp_extensions as tex
from ..utils import get_default_init_method


def _get_normalization_func(normalization: str, forward: bool):
    fwd_normalization_funcs = {
        "LayerNorm": tex.layernorm_fwd,
        "RMSNorm": tex.rmsnorm_fwd,
    }
    bwd_normalization_funcs = {
        "LayerNorm": tex.layernorm_bwd,
        "RMSNorm": tex.rmsnorm_bwd,
    }

    if forward:
        return fwd_normalization_funcs[normalization]
    return bwd_normalization_funcs[normalization]


def _grad_mode_for_comm() -> bool:
    return torch.is_grad_enabled()


def ub_overlap_permitted() -> bool:
    """Whether Userbuffers communication overlap may be used by the current forward."""
    return _grad_mode_for_comm()


class _NoopCatFunc(torch.autograd.Function):
    """Concatenate tensors, doing a no-op if possible"""

    @staticmethod
    def forward(ctx: Any, dim: int, *tensors: Tuple[torch.Tensor, ...]) -> torch.Tensor:
        if not tensors:
            raise ValueError("Attempted to concatenate 0 tensors")
        num_dims = tensors[0].dim()
        dim %= num_dims
        out_shape = list(tensors[0].size())
        split_ranges = [(0, tensors[0].size(dim))]
        for tensor in tensors[1:]:
            split_start = out_shape[dim]
            split_end = split_start + tensor.size(dim)
            out_shape[dim] = split_end
            split_ranges.append((split_start, split_end))
        ctx.dim = dim
        ctx.split_ranges = split_ranges
        return torch.cat(tensors, dim=dim)

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor) -> Tuple[Optional[torch.Tensor], ...]:
        grad_inputs = []
        for split_start, split_end in ctx.split_ranges:
            slices = [slice(None)] * grad_output.dim()
            slices[ctx.dim] = slice(split_start, split_end)
            grad_inputs.append(grad_output[tuple(slices)])
        return None, *grad_inputs


def noop_cat(tensors: List[torch.Tensor], dim: int = 0) -> torch.Tensor:
    """Concatenate tensors, doing a no-op if possible"""
    if not tensors:
        raise ValueError("Attempted to concatenate 0 tensors")
    if len(tensors) == 1:
        return tensors[0]
    return _NoopCatFunc.apply(dim, *tensors)


@dataclass
class _ParameterInitMeta:
    """
    Stores essential metadata needed to support deferred parameter initialization.
    """

    init_fn: Optional[Callable] = get_default_init_method()
    get_rng_state_tracker: Optional[Callable] = None
    fp8_meta_index: Optional[int] = None

    def __post_init__(self):
        if self.init_fn is None:
            self.init_fn = get_default_init_method()
