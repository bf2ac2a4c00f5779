# adapted from hpcaitech/ColossalAI colossalai/shardformer/layer/_operation.py
import torch
import torch.distributed as dist
import torch.nn.functional as F

from colossalai.quantization.fp8 import all_reduce_fp8


def _reduce(input_, group, fp8_communication=False, fp8_format="e5m2"):
    # skip if only one rank involved
    if dist.get_world_size(group) == 1:
        return input_
    else:
        if fp8_communication:
            all_reduce_fp8(input_, group=group, fp8_format=fp8_format)
        else:
            dist.all_reduce(input_, group=group)
        return input_


class MatmulWithAsyncCommunication(torch.autograd.Function):
    """
    Linear layer execution with asynchronous communication in backprop.
    """

    @staticmethod
    def forward(ctx, input_, weight, bias, process_group, async_grad_allreduce, fp8_communication=False, use_zbv=False):
        ctx.save_for_backward(input_, weight, bias)
        ctx.use_bias = bias is not None
        ctx.process_group = process_group
        ctx.async_grad_allreduce = async_grad_allreduce
        ctx.fp8_communication = fp8_communication
        ctx.use_zbv = use_zbv

        output = torch.matmul(input_, weight)

        if bias is not None:
            output = output + bias

        return output

    @staticmethod
    def backward(ctx, grad_output):
        raise NotImplementedError  # upstream backward: async all-reduce of grad_input


def _matmul_no_autograd(input_, weight, bias, process_group, async_grad_allreduce, fp8_communication=False, use_zbv=False):
    output = torch.matmul(input_, weight)
    if bias is not None:
        output = output + bias
    return output


def matmul_with_async_comm(input_, weight, bias, process_group, async_grad_allreduce, fp8_communication=False, use_zbv=False):
    # skip building the autograd node when nobody will call backward
    fn = MatmulWithAsyncCommunication.apply if torch.is_grad_enabled() else _matmul_no_autograd
    return fn(input_, weight, bias, process_group, async_grad_allreduce, fp8_communication, use_zbv)


class _ReduceForward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input_, process_group, fp8_communication=False):
        ctx.fp8_communication = fp8_communication
        return _reduce(input_, process_group, fp8_communication=fp8_communication, fp8_format="e4m3")

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output, None, None


def linear_with_async_comm(input_, weight, bias, process_group, async_grad_allreduce, fp8_communication=False, use_zbv=False):
    grad_mode = torch.is_grad_enabled()
    output = matmul_with_async_comm(
        input_, weight, bias, process_group,
        async_grad_allreduce and grad_mode,
        fp8_communication,
        use_zbv,
    )
    return output


def reduce_forward(input_, process_group, fp8_communication=False):
    grad_mode = torch.is_grad_enabled()
    return _ReduceForward.apply(input_, process_group, fp8_communication and grad_mode)
