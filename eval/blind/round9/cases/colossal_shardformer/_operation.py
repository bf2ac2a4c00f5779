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
        input_, weight, bias = ctx.saved_tensors
        grad_input = grad_output.matmul(weight)
        handle = None
        if ctx.async_grad_allreduce:
            handle = dist.all_reduce(grad_input, group=ctx.process_group, async_op=True)
        grad_weight = grad_output.reshape(-1, grad_output.shape[-1]).t().matmul(
            input_.reshape(-1, input_.shape[-1])
        )
        grad_bias = grad_output.sum(dim=tuple(range(grad_output.dim() - 1))) if ctx.use_bias else None
        if handle is not None:
            handle.wait()
        elif dist.get_world_size(ctx.process_group) > 1:
            dist.all_reduce(grad_input, group=ctx.process_group)
        return grad_input, grad_weight, grad_bias, None, None


def _ring_as_gather(func, input_to_gather, input_local, process_group, gather_dim=1):
    group_size = dist.get_world_size(process_group)
    cur_rank = dist.get_rank(process_group)
    recv_tensors = {}
    send_tensors = {}
    for k, v in input_to_gather.items():
        recv_tensors[k] = torch.empty_like(v)
        send_tensors[k] = v.clone()
    output_tensors = [None] * group_size
    for i in range(group_size):
        ops = []
        if i < group_size - 1:
            for k in send_tensors:
                ops.append(dist.P2POp(dist.isend, send_tensors[k], (cur_rank - 1) % group_size, process_group))
                ops.append(dist.P2POp(dist.irecv, recv_tensors[k], (cur_rank + 1) % group_size, process_group))
            reqs = dist.batch_isend_irecv(ops)
        output_tensors[(cur_rank + i) % group_size] = func(**send_tensors, **input_local)
        if i < group_size - 1:
            for req in reqs:
                req.wait()
            send_tensors, recv_tensors = recv_tensors, send_tensors
    return torch.cat(output_tensors, dim=gather_dim)


def _gather(input_, dim, process_group):
    world_size = dist.get_world_size(process_group)
    if world_size == 1:
        return input_
    tensor_list = [torch.empty_like(input_) for _ in range(world_size)]
    dist.all_gather(tensor_list, input_.contiguous(), group=process_group)
    return torch.cat(tensor_list, dim=dim).contiguous()


def linear_gather_forward(input_, weight, bias, process_group, dim=1, ring=False):
    if ring:
        return _ring_as_gather(
            lambda input_, weight, bias: F.linear(input_, weight, bias),
            input_to_gather={"input_": input_},
            input_local={"weight": weight, "bias": bias},
            process_group=process_group,
            gather_dim=dim,
        )
    return F.linear(_gather(input_, dim, process_group), weight, bias)


def linear_with_async_comm(input_, weight, bias, process_group, async_grad_allreduce):
    return LinearWithAsyncCommunication.apply(input_, weight, bias, process_group, async_grad_allreduce)


def reduce_forward(input_, process_group):
    if dist.get_world_size(process_group) == 1:
        return input_
    dist.all_reduce(input_, group=process_group)
    return input_
