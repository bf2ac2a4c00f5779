# mypy: allow-untyped-defs
"""Forward-input casting for the mixed-precision policy (cf. _fsdp_api.MixedPrecisionPolicy)."""
from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple

import torch
from torch.distributed.utils import _apply_to_tensors, _to_kwargs


@dataclass(frozen=True)
class MixedPrecisionPolicy:
    param_dtype: Optional[torch.dtype] = None
    reduce_dtype: Optional[torch.dtype] = None
    output_dtype: Optional[torch.dtype] = None
    cast_forward_inputs: bool = True


def _cast_fp_tensor(dtype: torch.dtype, x: torch.Tensor) -> torch.Tensor:
    if not isinstance(x, torch.Tensor) or not torch.is_floating_point(x) or x.dtype == dtype:
        return x
    return x.to(dtype)


def cast_forward_inputs(
    policy: MixedPrecisionPolicy, state_ctx, args: Tuple[Any, ...], kwargs: Dict[str, Any]
) -> Tuple[Tuple[Any, ...], Dict[str, Any]]:
    if policy.cast_forward_inputs and policy.param_dtype is not None and state_ctx.grad_enabled:
        cast_fn = lambda t: _cast_fp_tensor(policy.param_dtype, t)  # noqa: E731
        args = _apply_to_tensors(cast_fn, args)
        kwargs = _apply_to_tensors(cast_fn, kwargs)
    return args, kwargs
