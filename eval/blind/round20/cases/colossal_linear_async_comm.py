# adapted from hpcaitech/ColossalAI colossalai/shardformer/layer/_operation.py
import torch
import torch.distributed as dist
import torch.nn.functional as F

from colossalai.quantization.fp8 import all_gather_fp8, all_reduce_fp8


class LinearWithAsyncCommunication(torch.autograd.Function):
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
        if bias is not None:
            output = F.linear(input_, weight, bias)
        else:
            output = F.linear(input_, weight)
        return output

    @staticmethod
    def backward(ctx, grad_output):
        input, weight, bias = ctx.saved_tensors
        grad_input = grad_output.matmul(weight)
        grad_output = grad_output.contiguous()
        total_input = input.contiguous()
        if len(grad_output.shape) > 2:
            grad_output = grad_output.view(-1, grad_output.shape[-1])
            total_input = total_input.view(-1, total_input.shape[-1])
        if ctx.async_grad_allreduce:
            if ctx.fp8_communication:
                all_reduce_fp8(grad_input, group=ctx.process_group)
            else:
                handle = dist.all_reduce(grad_input, group=ctx.process_group, async_op=True)
        grad_weight = grad_output.t().matmul(total_input)
        grad_bias = grad_output.sum(dim=0) if ctx.use_bias else None
        if ctx.async_grad_allreduce and not ctx.fp8_communication:
            handle.wait()
        return grad_input, grad_weight, grad_bias, None, None, None, None


def linear_with_async_comm(input_, weight, bias, process_group, async_grad_allreduce, fp8_communication=False,
                           use_zbv=False):
    match torch.is_grad_enabled():
        case True:
            return LinearWithAsyncCommunication.apply(
                input_, weight, bias, process_group, async_grad_allreduce, fp8_communication, use_zbv
            )
        case _:
            return F.linear(input_, weight, bias)


def _gather(input_, dim=-1, process_group=None, fp8_communication=False, fp8_format="e4m3"):
    world_size = dist.get_world_size(process_group)
    if world_size == 1:
        return input_
    input_ = input_.contiguous()
    tensor_list = [torch.empty_like(input_) for _ in range(world_size)]
    if fp8_communication and torch.is_grad_enabled():
        all_gather_fp8(tensor_list, input_, fp8_format=fp8_format, group=process_group)
    else:
        dist.all_gather(tensor_list, input_, group=process_group)
    output = torch.cat(tensor_list, dim=dim).contiguous()
    return output


class _GatherForwardSplitBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input_, dim, process_group, fp8_communication=False):
        ctx.mode = process_group
        ctx.dim = dim
        ctx.fp8_communication = fp8_communication
        return _gather(input_, dim, process_group, fp8_communication=fp8_communication, fp8_format="e4m3")
