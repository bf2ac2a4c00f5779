# adapted from NVIDIA/Megatron-LM megatron/core/tensor_parallel/mappings.py
import torch

from megatron.core.parallel_state import get_global_memory_buffer

dist_all_gather_func = torch.distributed.all_gather_into_tensor
dist_reduce_scatter_func = torch.distributed.reduce_scatter_tensor


def _reduce(input_, group):
    """All-reduce the input tensor across model parallel group."""
    assert group is not None, "group should not be None"

    # Bypass the function if we are using only 1 GPU.
    if group.size() == 1:
        return input_

    # All-reduce.
    torch.distributed.all_reduce(input_.contiguous(), group=group)

    return input_


def _gather_along_first_dim(input_, group, output_split_sizes=None, use_global_buffer=False, async_op=False):
    """Gather tensors and concatenate along the first dimension."""
    assert group is not None, "group should not be None"
    world_size = group.size()
    # Bypass the function if we are using only 1 GPU.
    if world_size == 1:
        return (input_, None) if async_op else input_

    dim_size = list(input_.size())
    dim_size[0] = dim_size[0] * world_size
    if use_global_buffer:
        output = get_global_memory_buffer().get_tensor(dim_size, input_.dtype, "mpu")
    else:
        output = torch.empty(dim_size, dtype=input_.dtype, device=torch.cuda.current_device())
    handle = dist_all_gather_func(output, input_.contiguous(), group=group, async_op=async_op)
    return (output, handle) if async_op else output


def _reduce_scatter_along_first_dim(input_, group, input_split_sizes=None, use_global_buffer=False):
    """Reduce-scatter the input tensor across model parallel group."""
    world_size = group.size()
    if world_size == 1:
        return input_
    dim_size = list(input_.size())
    assert dim_size[0] % world_size == 0, "First dimension of the tensor should be divisible by tensor parallel size"
    dim_size[0] = dim_size[0] // world_size
    output = torch.empty(dim_size, dtype=input_.dtype, device=torch.cuda.current_device())
    dist_reduce_scatter_func(output, input_.contiguous(), group=group)
    return output


class _CopyToModelParallelRegion(torch.autograd.Function):
    """Pass the input to the model parallel region."""

    @staticmethod
    def forward(ctx, input_, group):
        ctx.group = group
        return input_

    @staticmethod
    def backward(ctx, grad_output):
        return _reduce(grad_output, ctx.group), None


class _ReduceFromModelParallelRegion(torch.autograd.Function):
    """All-reduce the input from the model parallel region."""

    @staticmethod
    def forward(ctx, input_, group):
        return _reduce(input_, group)

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output, None


class _GatherFromSequenceParallelRegion(torch.autograd.Function):
    """Gather the input from sequence parallel region and concatinate."""

    @staticmethod
    def forward(ctx, input_, group, tensor_parallel_output_grad=True, output_split_sizes=None, use_global_buffer=False):
        ctx.tensor_parallel_output_grad = tensor_parallel_output_grad
        ctx.group = group
        ctx.output_split_sizes = output_split_sizes
        ctx.use_global_buffer = use_global_buffer
        return _gather_along_first_dim(input_, group, output_split_sizes, use_global_buffer)

    @staticmethod
    def backward(ctx, grad_output):
        if ctx.tensor_parallel_output_grad:
            return (
                _reduce_scatter_along_first_dim(grad_output, ctx.group, ctx.output_split_sizes, ctx.use_global_buffer),
                None, None, None, None,
            )
        raise NotImplementedError


def copy_to_tensor_model_parallel_region(input_, group=None):
    """Wrapper for autograd function: forward: copy, backward allreduce"""
    return _CopyToModelParallelRegion.apply(input_, group)


def reduce_from_tensor_model_parallel_region(input_, group=None):
    """Wrapper for autograd function: forward: all reduce, backward copy"""
    return _ReduceFromModelParallelRegion.apply(input_, group)


def gather_from_sequence_parallel_region(
    input_, tensor_parallel_output_grad=True, group=None, output_split_sizes=None, use_global_buffer=False
):
    """Wrapper for autograd function: forward: AG, backward: RS <first dim>"""
    return _GatherFromSequenceParallelRegion.apply(
        input_, group, tensor_parallel_output_grad, output_split_sizes, use_global_buffer
    )


def make_output_reducer(group, overlap_requested: bool):
    """Return the function that reduces a row-parallel partial output for this call."""
    grad_on = torch.is_grad_enabled()

    def _reduce_output(output_parallel):
        if overlap_requested and grad_on and group.size() > 1:
            handle = torch.distributed.all_reduce(output_parallel, group=group, async_op=True)
            return output_parallel, handle
        return reduce_from_tensor_model_parallel_region(output_parallel, group=group), None

    return _reduce_output
