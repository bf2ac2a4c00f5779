# adapted from hpcaitech/ColossalAI colossalai/shardformer/layer/_operation.py
import torch
import torch.distributed as dist
import torch.nn.functional as F

from colossalai.quantization.fp8 import all_reduce_fp8


def _reduce(input_, process_group, fp8_communication=False, fp8_format="e5m2"):
    if dist.get_world_size(process_group) == 1:
        return input_
    if fp8_communication:
        all_reduce_fp8(input_, group=process_group, fp8_format=fp8_format)
    else:
        dist.all_reduce(input_, group=process_group)
    return input_


class _ReduceForward(torch.autograd.Function):
    """All-reduce the input from the model parallel region."""

    @staticmethod
    def forward(ctx, input_, process_group, grad_enabled, fp8_communication=False):
        # fp8 all-reduce is only validated for training steps
        return _reduce(input_, process_group, fp8_communication=fp8_communication and grad_enabled)

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output, None, None, None


class LinearWithAsyncCommunication(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input_, weight, bias, process_group, async_grad_allreduce, fp8_communication=False, use_zbv=False):
        ctx.save_for_backward(input_, weight, bias)
        ctx.use_bias = bias is not None
        ctx.process_group = process_group
        ctx.async_grad_allreduce = async_grad_allreduce
        ctx.fp8_communication = fp8_communication
        ctx.use_zbv = use_zbv
        if bias is not None:
            output = F.linear(input_, weight, bias)
        else:
            output = F.linear(input_, weight)
        return output


def linear_with_async_comm(input_, weight, bias, process_group, async_grad_allreduce, fp8_communication=False, use_zbv=False):
    return LinearWithAsyncCommunication.apply(
        input_, weight, bias, process_group,
        async_grad_allreduce and torch.is_grad_enabled(),
        fp8_communication, use_zbv,
    )


def reduce_forward(input_, process_group, fp8_communication=False):
    return _ReduceForward.apply(input_, process_group, torch.is_grad_enabled(), fp8_communication)
