"""Communication primitives for tensor parallelism (cf. megatron/core/tensor_parallel/mappings.py)."""
import os

import torch
import torch.distributed as dist

from .utils import get_global_memory_buffer

_ALLREDUCE_FP32_ACCUM = os.getenv("MCORE_TP_ALLREDUCE_FP32", "1") == "1"


def gather_along_first_dim(input_, group, use_global_buffer=False):
    world_size = group.size()
    if world_size == 1:
        return input_
    dim_size = list(input_.size())
    dim_size[0] = dim_size[0] * world_size
    if use_global_buffer:
        output = get_global_memory_buffer().get_tensor(dim_size, input_.dtype, "mpu")
    else:
        output = torch.empty(dim_size, dtype=input_.dtype, device=torch.cuda.current_device())
    dist.all_gather_into_tensor(output, input_.contiguous(), group=group)
    return output


def pipelined_all_gather_matmul(input_, weight, group, num_chunks=None):
    """Ring-exchange the sequence shards and run one partial GEMM per received shard."""
    world_size = group.size()
    rank = group.rank()
    send_buf = input_.contiguous()
    recv_buf = torch.empty_like(send_buf)
    outputs = [None] * world_size
    for step in range(world_size):
        src = (rank - step) % world_size
        reqs = []
        if step < world_size - 1:
            ops = [dist.P2POp(dist.isend, send_buf, (rank + 1) % world_size, group),
                   dist.P2POp(dist.irecv, recv_buf, (rank - 1) % world_size, group)]
            reqs = dist.batch_isend_irecv(ops)
        outputs[src] = torch.matmul(send_buf, weight.t())
        for req in reqs:
            req.wait()
        send_buf, recv_buf = recv_buf, send_buf
    return torch.cat(outputs, dim=0)


def _reduce(input_, group, grad_recording):
    if group.size() == 1:
        return input_
    if input_.dtype == torch.bfloat16 and _ALLREDUCE_FP32_ACCUM and grad_recording:
        acc = input_.float()
        dist.all_reduce(acc, group=group)
        return acc.to(input_.dtype)
    dist.all_reduce(input_.contiguous(), group=group)
    return input_


class _ReduceFromModelParallelRegion(torch.autograd.Function):
    """All-reduce the input from the model parallel region."""

    @staticmethod
    def forward(ctx, input_, group, grad_recording):
        return _reduce(input_, group, grad_recording)

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output, None, None


def reduce_from_tensor_model_parallel_region(input_, group, grad_recording=True):
    if grad_recording:
        return _ReduceFromModelParallelRegion.apply(input_, group, grad_recording)
    return _reduce(input_, group, grad_recording)
