from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Float8LinearConfig:
    enable_fsdp_float8_all_gather: bool = False
    force_recompute_fp8_weight_in_bwd: bool = False
    pad_inner_dim: bool = False
    emulate: bool = False
    target_dtype: torch.dtype = torch.float8_e4m3fn


def _backward_will_run() -> bool:
    return torch.is_grad_enabled()


def tensor_to_scale(x: torch.Tensor, float8_dtype: torch.dtype) -> torch.Tensor:
    amax = torch.max(torch.abs(x)).to(torch.float64)
    return (torch.finfo(float8_dtype).max / torch.clamp(amax, min=1e-12)).to(torch.float32)
