# adapted from huggingface/nanotron src/nanotron/parallel/tensor_parallel/functional.py
import torch
from torch.nn import functional as F

import nanotron.distributed as dist
from nanotron.parallel.tensor_parallel.distributed_differentiable_primitives import (
    differentiable_all_gather,
    differentiable_identity,
)
from nanotron.parallel.tensor_parallel.enum import TensorParallelLinearMode


class _ShardedCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, sharded_logits, target, group):
        logits_max = torch.max(sharded_logits, dim=-1)[0]
        dist.all_reduce(logits_max, op=dist.ReduceOp.MAX, group=group)
        sharded_logits = sharded_logits - logits_max.unsqueeze(dim=-1)
        exp_logits = torch.exp(sharded_logits)
        sum_exp_logits = exp_logits.sum(dim=-1)
        dist.all_reduce(sum_exp_logits, op=dist.ReduceOp.SUM, group=group)
        loss = torch.log(sum_exp_logits)
        if ctx is not None:
            ctx.save_for_backward(exp_logits)
        return loss.view_as(target)

    @staticmethod
    def backward(ctx, grad_output):
        raise NotImplementedError


def sharded_cross_entropy(sharded_logits, target, group, dtype=None):
    """Helper function for the cross entropy."""
    if dtype is not None:
        sharded_logits = sharded_logits.to(dtype=dtype)
    if torch.is_grad_enabled():
        return _ShardedCrossEntropy.apply(sharded_logits, target, group)
    return _ShardedCrossEntropy.forward(None, sharded_logits, target, group)


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
    async_communication = async_communication and torch.is_grad_enabled()
    if async_communication:
        return _ColumnLinearAsyncCommunication.apply(input, weight, bias, group, tp_mode, tp_recompute_allgather)

    if tp_mode is TensorParallelLinearMode.ALL_REDUCE:
        input = differentiable_identity(input, group=group)
    elif tp_mode is TensorParallelLinearMode.REDUCE_SCATTER:
        input = differentiable_all_gather(input, group=group)
    return F.linear(input, weight, bias)
