# adapted from huggingface/nanotron src/nanotron/parallel/tensor_parallel/functional.py
import torch
from torch.nn import functional as F

import nanotron.distributed as dist
from nanotron.parallel.tensor_parallel.distributed_differentiable_primitives import (
    differentiable_all_gather,
    differentiable_identity,
)
from nanotron.parallel.tensor_parallel.enum import TensorParallelLinearMode


class _ColumnLinearAsyncCommunication(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, weight, bias, group, tp_mode, tp_recompute_allgather):
        tensor = tensor.contiguous()
        sharded_batch_size, *intermediate_size, hidden_size = tensor.shape
        gathered_tensor = torch.empty(sharded_batch_size * group.size(), *intermediate_size, hidden_size,
                                      device=tensor.device, dtype=tensor.dtype)
        handle = dist.all_gather_into_tensor(gathered_tensor, tensor, group=group, async_op=True)
        handle.wait()
        ctx.save_for_backward(tensor, weight)
        return F.linear(gathered_tensor, weight, bias)

    @staticmethod
    def backward(ctx, grad_output):
        raise NotImplementedError


def column_linear(input, weight, bias, group, tp_mode, async_communication: bool, tp_recompute_allgather=True):
    if async_communication:
        return _ColumnLinearAsyncCommunication.apply(input, weight, bias, group, tp_mode, tp_recompute_allgather)
    if tp_mode is TensorParallelLinearMode.ALL_REDUCE:
        input = differentiable_identity(input, group=group)
    else:
        input = differentiable_all_gather(input, group=group)
    return F.linear(input, weight, bias)
