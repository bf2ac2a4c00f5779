# Adapted from huggingface/nanotron src/nanotron/parallel/tensor_parallel/functional.py (column_linear, row_linear).
from typing import Optional

import torch
import torch.distributed as dist
from torch.nn import functional as F

from nanotron.parallel.tensor_parallel.distributed_differentiable_primitives import (
    differentiable_all_reduce_sum,
    differentiable_identity,
    differentiable_reduce_scatter_sum,
)
from nanotron.parallel.tensor_parallel.enum import TensorParallelLinearMode
from nanotron.parallel.tensor_parallel.functional import (
    _ColumnLinearAsyncCommunication,
    _ColumnLinearNoAsyncCommunicationReduceScatterMode,
)


def column_linear(input, weight, bias, group: dist.ProcessGroup, tp_mode: TensorParallelLinearMode,
                  async_communication: bool, tp_recompute_allgather: bool = True):
    if async_communication:
        return _ColumnLinearAsyncCommunication.apply(input, weight, bias, group, tp_mode, tp_recompute_allgather)
    if tp_mode is TensorParallelLinearMode.ALL_REDUCE:
        input = differentiable_identity(input, group=group)
        return F.linear(input, weight, bias)
    return _ColumnLinearNoAsyncCommunicationReduceScatterMode.apply(input, weight, bias, group, tp_recompute_allgather)


def row_linear(input, weight, bias, group: dist.ProcessGroup, tp_mode: TensorParallelLinearMode,
               overlap: Optional[bool] = None):
    if overlap is None:
        overlap = torch.is_grad_enabled()
    out = F.linear(input, weight, bias)
    if overlap and tp_mode is TensorParallelLinearMode.ALL_REDUCE:
        chunks = out.chunk(2, dim=0)
        return torch.cat([differentiable_all_reduce_sum(c.contiguous(), group=group) for c in chunks], dim=0)
    if tp_mode is TensorParallelLinearMode.ALL_REDUCE:
        return differentiable_all_reduce_sum(out, group=group)
    return differentiable_reduce_scatter_sum(out, group=group)
