import torch
import torch.distributed as dist


def _gather_along_first_dim(input_, group, async_op=False):
    world_size = dist.get_world_size(group)
    if world_size == 1:
        return input_, None
    dim_size = list(input_.size())
    dim_size[0] = dim_size[0] * world_size
    output = torch.empty(dim_size, dtype=input_.dtype, device=torch.cuda.current_device())
    handle = dist.all_gather_into_tensor(output, input_.contiguous(), group=group, async_op=async_op)
    return output, handle


def _reduce_scatter_along_first_dim(input_, group):
    world_size = dist.get_world_size(group)
    if world_size == 1:
        return input_
    dim_size = list(input_.size())
    dim_size[0] = dim_size[0] // world_size
    output = torch.empty(dim_size, dtype=input_.dtype, device=torch.cuda.current_device())
    dist.reduce_scatter_tensor(output, input_.contiguous(), group=group)
    return output


class _GatherFromSequenceParallelRegion(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input_, group, tensor_parallel_output_grad=True):
        ctx.group = group
        ctx.tensor_parallel_output_grad = tensor_parallel_output_grad
        output, _ = _gather_along_first_dim(input_, group)
        return output

    @staticmethod
    def backward(ctx, grad_output):
        if ctx.tensor_parallel_output_grad:
            return _reduce_scatter_along_first_dim(grad_output, ctx.group), None, None
        return grad_output.chunk(dist.get_world_size(ctx.group))[dist.get_rank(ctx.group)], None, None


class _ReduceScatterToSequenceParallelRegion(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input_, group, num_chunks=1):
        ctx.group = group
        if num_chunks <= 1:
            return _reduce_scatter_along_first_dim(input_, group)
        chunks = input_.chunk(num_chunks, dim=-1)
        return torch.cat([_reduce_scatter_along_first_dim(c, group) for c in chunks], dim=-1)

    @staticmethod
    def backward(ctx, grad_output):
        output, _ = _gather_along_first_dim(grad_output, ctx.group)
        return output, None, None


class _CopyToModelParallelRegion(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input_, group):
        ctx.group = group
        return input_

    @staticmethod
    def backward(ctx, grad_output):
        dist.all_reduce(grad_output, group=ctx.group)
        return grad_output, None


def gather_from_sequence_parallel_region(input_, group, tensor_parallel_output_grad=True):
    return _GatherFromSequenceParallelRegion.apply(input_, group, tensor_parallel_output_grad)


def reduce_scatter_to_sequence_parallel_region(input_, group, num_chunks=1):
    return _ReduceScatterToSequenceParallelRegion.apply(input_, group, num_chunks)


def copy_to_tensor_model_parallel_region(input_, group):
    return _CopyToModelParallelRegion.apply(input_, group)
