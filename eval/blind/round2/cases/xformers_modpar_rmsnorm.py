# Modelled on xformers xformers/ops/modpar_layers.py, seqpar.py and rmsnorm.py
from typing import List, Optional

import torch
from torch import is_grad_enabled as grad_mode_on

from xformers.ops.differentiable_collectives import (
    copy_to_model_parallel_region,
    reduce_from_model_parallel_region,
)
from xformers.ops.seqpar import sequence_parallel_leading_matmul, sequence_parallel_trailing_matmul
from xformers.ops._triton.rmsnorm_kernels import _rms_norm_add_forward, _rms_norm_forward


class ColumnParallelLinear(torch.nn.Module):
    def __init__(self, in_features: int, out_features: List[int], *, process_group, sequence_parallel: bool = False,
                 fuse_sequence_parallel: bool = True) -> None:
        super().__init__()
        self.in_features = in_features
        self.sequence_parallel = sequence_parallel
        self.fuse_sequence_parallel = fuse_sequence_parallel
        self.process_group = process_group
        mp_size = process_group.size()
        self.my_out_features = [dim // mp_size for dim in out_features]
        self.weights = torch.nn.ParameterList(
            [torch.nn.Parameter(torch.empty((dim, in_features))) for dim in self.my_out_features]
        )

    def forward(self, input_: torch.Tensor) -> List[torch.Tensor]:
        if self.sequence_parallel:
            outputs = sequence_parallel_leading_matmul(
                input_,
                [w.t() for w in self.weights],
                fuse=self.fuse_sequence_parallel and torch.is_grad_enabled(),
                process_group=self.process_group,
            )
        else:
            if grad_mode_on():
                input_ = copy_to_model_parallel_region(input_, self.process_group)
            outputs = [torch.matmul(input_, w.t()) for w in self.weights]
        return outputs


class RowParallelLinear(torch.nn.Module):
    def __init__(self, in_features: int, out_features: int, *, process_group, sequence_parallel: bool = False,
                 fuse_sequence_parallel: bool = True):
        super().__init__()
        self.out_features = out_features
        self.sequence_parallel = sequence_parallel
        self.fuse_sequence_parallel = fuse_sequence_parallel
        self.process_group = process_group
        self.my_in_features = in_features // process_group.size()
        self.weight = torch.nn.Parameter(torch.empty((out_features, self.my_in_features)))

    def forward(self, input_: torch.Tensor) -> torch.Tensor:
        if self.sequence_parallel:
            fuse = getattr(self, "fuse_sequence_parallel", True) and grad_mode_on()
            output = sequence_parallel_trailing_matmul(
                input_,
                self.weight.t(),
                fuse=fuse,
                process_group=self.process_group,
            )
        else:
            output = torch.matmul(input_, self.weight.t())
            output = reduce_from_model_parallel_region(output, self.process_group)
        return output


def rms_norm(x: torch.Tensor, weight: Optional[torch.Tensor], eps: float = 1e-6):
    """Triton RMSNorm forward only; there is no backward kernel."""
    if torch.is_grad_enabled() and (x.requires_grad or (weight is not None and weight.requires_grad)):
        raise ValueError("Gradients not supported.")
    return _rms_norm_forward(x, weight, eps)


def rms_norm_add(x: torch.Tensor, y: torch.Tensor, weight: Optional[torch.Tensor], eps: float = 1e-6):
    """x += y; return rms_norm(x). Triton, forward only."""
    if torch.is_grad_enabled() and (x.requires_grad or y.requires_grad or (weight is not None and weight.requires_grad)):
        raise ValueError("Gradients not supported.")
    return _rms_norm_add_forward(x, y, weight, eps)


class RMSNorm(torch.nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = torch.nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not grad_mode_on() and x.is_cuda:
            # inference: fused Triton kernel (forward only)
            return rms_norm(x, self.weight, self.eps)
        return torch.nn.functional.rms_norm(x, (x.shape[-1],), self.weight, self.eps)
