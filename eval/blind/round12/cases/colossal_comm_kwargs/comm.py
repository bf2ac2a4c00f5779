# adapted from hpcaitech/ColossalAI colossalai/shardformer/layer/_operation.py
import torch
import torch.distributed as dist

from colossalai.quantization.fp8 import all_gather_fp8


def _gather(input_, dim=-1, process_group=None, fp8_communication=False, async_op=False):
    world_size = dist.get_world_size(process_group)
    if world_size == 1:
        return input_
    input_ = input_.contiguous()
    tensor_list = [torch.empty_like(input_) for _ in range(world_size)]
    if fp8_communication:
        all_gather_fp8(tensor_list, input_, fp8_format="e4m3", group=process_group)
    else:
        work = dist.all_gather(tensor_list, input_, group=process_group, async_op=async_op)
        if work is not None:
            work.wait()
    return torch.cat(tensor_list, dim=dim).contiguous()


class _GatherForwardSplitBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input_, dim, process_group, fp8_communication=False, async_op=False):
        ctx.process_group = process_group
        ctx.dim = dim
        return _gather(input_, dim, process_group, fp8_communication=fp8_communication, async_op=async_op)

    @staticmethod
    def backward(ctx, grad_output):
        rank = dist.get_rank(ctx.process_group)
        world_size = dist.get_world_size(ctx.process_group)
        grad = torch.chunk(grad_output, world_size, dim=ctx.dim)[rank].contiguous()
        return grad, None, None, None, None


def gather_forward_split_backward(input_, dim, process_group, fp8_communication=False, async_op=False):
    return _GatherForwardSplitBackward.apply(input_, dim, process_group, fp8_communication, async_op)
