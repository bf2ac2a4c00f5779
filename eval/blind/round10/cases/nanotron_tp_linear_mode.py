# Adapted from huggingface/nanotron src/nanotron/parallel/tensor_parallel/functional.py
# (column_linear / row_linear, TensorParallelLinearMode) and distributed_differentiable_primitives.py
from enum import Enum
import torch
import torch.distributed as dist


class TensorParallelLinearMode(Enum):
    ALL_REDUCE = "all_reduce"
    REDUCE_SCATTER = "reduce_scatter"


class DifferentiableAllReduceSum(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, group):
        dist.all_reduce(tensor, group=group)
        return tensor

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output, None


def differentiable_all_reduce_sum(tensor, group):
    if torch.is_grad_enabled():
        return DifferentiableAllReduceSum.apply(tensor, group)
    dist.all_reduce(tensor, group=group)
    return tensor


def row_linear(input_, weight, bias, group):
    match torch.is_grad_enabled():
        case True:
            tp_mode = TensorParallelLinearMode.REDUCE_SCATTER
        case _:
            tp_mode = TensorParallelLinearMode.ALL_REDUCE
    out = torch.nn.functional.linear(input_, weight)
    if tp_mode is TensorParallelLinearMode.ALL_REDUCE:
        out = differentiable_all_reduce_sum(out, group)
    else:
        world = dist.get_world_size(group)
        shard = torch.empty((out.shape[0] // world,) + out.shape[1:], dtype=out.dtype, device=out.device)
        dist.reduce_scatter_tensor(shard, out, group=group)
        out = shard
    return out + bias if bias is not None else out
