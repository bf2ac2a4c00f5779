"""Autograd functions for sequence-parallel linears (cf. colossalai/shardformer/layer/_operation.py)."""
import torch
import torch.distributed as dist
import torch.nn.functional as F

from colossalai.quantization.fp8 import all_gather_fp8, reduce_scatter_fp8


def _ring_as_gather(func, input_to_gather=None, input_local=None, process_group=None, gather_dim=1):
    group_size = dist.get_world_size(process_group)
    cur_rank = dist.get_rank(process_group)
    send_tensors = [input_to_gather.contiguous()]
    recv_tensors = [torch.empty_like(t) for t in send_tensors]
    gather_results = [None] * group_size
    gather_results[cur_rank] = func(*send_tensors, **input_local)
    to_rank = (cur_rank + 1) % group_size
    from_rank = (cur_rank - 1) % group_size
    for i in range(group_size - 1):
        p2p = [dist.P2POp(dist.isend, send_tensors[0], to_rank, process_group),
               dist.P2POp(dist.irecv, recv_tensors[0], from_rank, process_group)]
        reqs = dist.batch_isend_irecv(p2p)
        for req in reqs:
            req.wait()
        send_tensors, recv_tensors = recv_tensors, send_tensors
        gather_results[(cur_rank - i - 1) % group_size] = func(*send_tensors, **input_local)
    return torch.cat(gather_results, dim=gather_dim).contiguous()


def _gather(input_, dim, process_group, fp8_communication=False):
    world_size = dist.get_world_size(process_group)
    if world_size == 1:
        return input_
    input_ = input_.contiguous()
    if fp8_communication:
        tensor_list = [torch.empty_like(input_) for _ in range(world_size)]
        all_gather_fp8(tensor_list, input_, fp8_format="e4m3", group=process_group)
    else:
        tensor_list = [torch.empty_like(input_) for _ in range(world_size)]
        dist.all_gather(tensor_list, input_, group=process_group)
    return torch.cat(tensor_list, dim=dim).contiguous()


class _LinearWithGatherForwardReduceScatterBackward(torch.autograd.Function):
    """Gather input from sequence parallel in forward and reduce-scatter gradient in backward."""

    @staticmethod
    def forward(ctx, input_, weight, bias, process_group, async_grad_reduce_scatter, dim, ring, grad_enabled):
        ctx.save_for_backward(input_, weight, bias)
        ctx.use_bias = bias is not None
        ctx.process_group = process_group
        ctx.async_grad_reduce_scatter = async_grad_reduce_scatter and grad_enabled
        ctx.dim = dim
        if ring is True and grad_enabled:
            input_to_gather = {"input": input_}
            input_local = {"weight": weight}
            if bias is not None:
                input_local["bias"] = bias
            output = _ring_as_gather(
                F.linear,
                input_to_gather=input_to_gather["input"],
                input_local=input_local,
                process_group=process_group,
                gather_dim=dim,
            )
        else:
            input_parallel = _gather(input_, dim, process_group)
            output = F.linear(input_parallel, weight, bias)
        return output


class _ReduceScatterForwardGatherBackward(torch.autograd.Function):
    """Reduce-scatter input from the model parallel region in forward, all-gather gradient in backward."""

    @staticmethod
    def forward(ctx, input_, process_group, dim, fp8_communication, grad_enabled):
        ctx.dim = dim
        ctx.process_group = process_group
        ctx.fp8_communication = fp8_communication
        world_size = dist.get_world_size(process_group)
        if world_size == 1:
            return input_
        assert input_.shape[dim] % world_size == 0
        input_list = [item.contiguous() for item in torch.chunk(input_, world_size, dim=dim)]
        output = torch.empty_like(input_list[0])
        if fp8_communication and grad_enabled:
            reduce_scatter_fp8(output, input_list, group=process_group, fp8_format="e5m2")
        else:
            dist.reduce_scatter(output, input_list, group=process_group)
        return output

    @staticmethod
    def backward(ctx, grad_output):
        return _gather(grad_output, ctx.dim, ctx.process_group, ctx.fp8_communication), None, None, None, None


def linear_gather_forward_reducescatter_backward(input_, weight, bias, process_group, async_grad_reduce_scatter, dim,
                                                 ring=False, grad_enabled=True):
    return _LinearWithGatherForwardReduceScatterBackward.apply(
        input_, weight, bias, process_group, async_grad_reduce_scatter, dim, ring, grad_enabled
    )


def reducescatter_forward_gather_backward(input_, process_group, dim, fp8_communication=False, grad_enabled=True):
    return _ReduceScatterForwardGatherBackward.apply(input_, process_group, dim, fp8_communication, grad_enabled)
