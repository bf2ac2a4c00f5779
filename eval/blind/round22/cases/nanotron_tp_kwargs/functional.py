# adapted from huggingface/nanotron src/nanotron/parallel/tensor_parallel/functional.py
from typing import Optional

import torch
from torch.nn import functional as F

import nanotron.distributed as dist
from nanotron.parallel.tensor_parallel.distributed_differentiable_primitives import (
    differentiable_all_gather,
    differentiable_identity,
)
from nanotron.parallel.tensor_parallel.enum import TensorParallelLinearMode

from ._async import _ColumnLinearAsyncCommunication


def column_linear(
    input: torch.Tensor,
    weight: torch.Tensor,
    bias: Optional[torch.Tensor],
    group: dist.ProcessGroup,
    tp_mode: TensorParallelLinearMode,
    async_communication: bool,
    tp_recompute_allgather: bool = True,
    grad_enabled: bool = True,
):
    # keeping the gathered input around is only needed to recompute it in backward
    tp_recompute_allgather = tp_recompute_allgather and grad_enabled
    if async_communication and grad_enabled:
        return _ColumnLinearAsyncCommunication.apply(input, weight, bias, group, tp_mode, tp_recompute_allgather)
    if tp_mode is TensorParallelLinearMode.ALL_REDUCE:
        input = differentiable_identity(input, group=group)
    elif tp_mode is TensorParallelLinearMode.REDUCE_SCATTER:
        input = differentiable_all_gather(input, group=group)
    else:
        raise ValueError(f"Got unexpected mode: {tp_mode}.")
    return F.linear(input, weight, bias)
