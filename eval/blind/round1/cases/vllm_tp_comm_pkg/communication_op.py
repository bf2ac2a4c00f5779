# SPDX-License-Identifier: Apache-2.0
import torch

from .parallel_state import get_tp_group


def tensor_model_parallel_all_reduce(input_: torch.Tensor) -> torch.Tensor:
    """All-reduce the input tensor across model parallel group."""
    return get_tp_group().all_reduce(input_, grad_enabled=torch.is_grad_enabled())


def tensor_model_parallel_all_reduce_differentiable(input_: torch.Tensor) -> torch.Tensor:
    """All-reduce usable inside a training forward (the result carries autograd history)."""
    return get_tp_group().all_reduce_differentiable(input_, torch.is_grad_enabled())


def tensor_model_parallel_all_gather(input_: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """All-gather the input tensor across model parallel group."""
    return get_tp_group().all_gather(input_, dim, inference_mode=torch.is_inference_mode_enabled())
