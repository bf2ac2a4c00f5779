import torch
import torch.distributed as dist
import torch.nn.functional as F


def _gather(input_, dim, process_group):
    world_size = dist.get_world_size(process_group)
    if world_size == 1:
        return input_
    tensor_list = [torch.empty_like(input_) for _ in range(world_size)]
    dist.all_gather(tensor_list, input_.contiguous(), group=process_group)
    return torch.cat(tensor_list, dim=dim).contiguous()


def linear_with_async_comm(input_, weight, bias, process_group, async_grad_allreduce):
    return F.linear(input_, weight, bias)


def linear_gather_forward_reducescatter_backward(input_, weight, bias, process_group, async_grad_reduce_scatter,
                                                 dim, ring=False):
    if ring:
        world_size = dist.get_world_size(process_group)
        rank = dist.get_rank(process_group)
        chunks = [torch.empty_like(input_) for _ in range(world_size)]
        chunks[rank] = input_
        send_buf = input_.contiguous()
        outs = [None] * world_size
        for step in range(world_size):
            src = (rank - step) % world_size
            outs[src] = F.linear(chunks[src] if step else send_buf, weight, bias)
            if step + 1 < world_size:
                recv_buf = torch.empty_like(send_buf)
                reqs = dist.batch_isend_irecv([
                    dist.P2POp(dist.isend, send_buf, (rank + 1) % world_size, process_group),
                    dist.P2POp(dist.irecv, recv_buf, (rank - 1) % world_size, process_group),
                ])
                for r in reqs:
                    r.wait()
                chunks[(rank - step - 1) % world_size] = recv_buf
                send_buf = recv_buf
        return torch.cat(outs, dim=dim)
    return F.linear(_gather(input_, dim, process_group), weight, bias)
