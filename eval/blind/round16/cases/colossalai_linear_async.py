# adapted from hpcaitech/ColossalAI colossalai/shardformer/layer/_operation.py
import torch
import torch.distributed as dist
import torch.nn.functional as F

from colossalai.quantization.fp8 import all_gather_fp8


class LinearWithAsyncCommunication(torch.autograd.Function):
    """Linear layer execution with asynchronous communication in backprop."""

    @staticmethod
    def forward(ctx, input_, weight, bias, process_group, async_grad_allreduce, fp8_communication=False, use_zbv=False):
        ctx.save_for_backward(input_, weight, bias)
        ctx.use_bias = bias is not None
        ctx.process_group = process_group
        ctx.async_grad_allreduce = async_grad_allreduce
        ctx.fp8_communication = fp8_communication
        ctx.use_zbv = use_zbv
        if bias is not None:
            return F.linear(input_, weight, bias)
        return F.linear(input_, weight)

    @staticmethod
    def backward(ctx, grad_output):
        input, weight, bias = ctx.saved_tensors
        grad_input = grad_output.matmul(weight)
        if ctx.async_grad_allreduce:
            handle = dist.all_reduce(grad_input, group=ctx.process_group, async_op=True)
        grad_weight = grad_output.reshape(-1, grad_output.shape[-1]).t().matmul(input.reshape(-1, input.shape[-1]))
        grad_bias = grad_output.sum(dim=0) if ctx.use_bias else None
        if ctx.async_grad_allreduce:
            handle.wait()
        return grad_input, grad_weight, grad_bias, None, None, None, None


class _GatherForwardSplitBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input_, dim, process_group, fp8_communication=False):
        ctx.process_group = process_group
        ctx.dim = dim
        world_size = dist.get_world_size(process_group)
        if fp8_communication:
            return all_gather_fp8(input_, dim, process_group)
        tensor_list = [torch.empty_like(input_) for _ in range(world_size)]
        dist.all_gather(tensor_list, input_.contiguous(), group=process_group)
        return torch.cat(tensor_list, dim=dim).contiguous()


class Linear1D_Col(torch.nn.Module):
    def __init__(self, weight, bias, process_group, gather_output=False, fp8_communication=False):
        super().__init__()
        self.weight = weight
        self.bias = bias
        self.process_group = process_group
        self.gather_output = gather_output
        self.fp8_communication = fp8_communication

    def forward(self, input_: torch.Tensor) -> torch.Tensor:
        # the grad all-reduce is only issued in backward
        overlap_grad_ar = torch.is_grad_enabled() and dist.get_world_size(self.process_group) > 1
        fp8_comm = self.fp8_communication and torch.is_grad_enabled()
        output_parallel = LinearWithAsyncCommunication.apply(
            input_, self.weight, self.bias, self.process_group, overlap_grad_ar, fp8_comm
        )
        if self.gather_output:
            return _GatherForwardSplitBackward.apply(output_parallel, -1, self.process_group, fp8_comm)
        return output_parallel
