# adapted from hpcaitech/ColossalAI colossalai/shardformer/layer/_operation.py
import torch
import torch.distributed as dist
import torch.nn.functional as F


class LinearWithAsyncCommunication(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input_, weight, bias, process_group, async_grad_allreduce):
        ctx.save_for_backward(input_, weight, bias)
        ctx.use_bias = bias is not None
        ctx.process_group = process_group
        ctx.async_grad_allreduce = async_grad_allreduce
        return F.linear(input_, weight, bias)

    @staticmethod
    def backward(ctx, grad_output):
        input, weight, bias = ctx.saved_tensors
        grad_input = grad_output.matmul(weight)
        handle = None
        if ctx.async_grad_allreduce:
            handle = dist.all_reduce(grad_input, group=ctx.process_group, async_op=True)
        grad_output = grad_output.reshape(-1, grad_output.shape[-1])
        grad_weight = grad_output.t().matmul(input.reshape(-1, input.shape[-1]))
        grad_bias = grad_output.sum(dim=0) if ctx.use_bias else None
        if handle is not None:
            handle.wait()
        return grad_input, grad_weight, grad_bias, None, None
