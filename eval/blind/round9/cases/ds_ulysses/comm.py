from typing import Optional

import torch
import torch.distributed as dist


def post_all2all(scatter_idx, batch_dim_idx, seq_world_size, bs, seq_len, num_head, head_dim):
    def post_func(output):
        if batch_dim_idx == 0:
            if scatter_idx < 2:
                output = output.permute(1, 2, 0, 3, 4).contiguous()
                return output.reshape(bs, seq_len // seq_world_size, seq_world_size * num_head, head_dim).contiguous()
            output = output.permute(1, 0, 2, 3, 4).contiguous()
            return output.reshape(bs, seq_world_size * seq_len, num_head // seq_world_size, head_dim).contiguous()
        if scatter_idx < 2:
            output = output.permute(1, 2, 0, 3, 4).contiguous()
            return output.reshape(seq_len // seq_world_size, bs, seq_world_size * num_head, head_dim).contiguous()
        return output.reshape(seq_len * seq_world_size, bs, num_head // seq_world_size, head_dim).contiguous()

    return post_func


def single_all_to_all(input, scatter_idx, gather_idx, batch_dim_idx, group,
                      overlap: bool = False, grad_enabled: bool = False,
                      stream: Optional[torch.cuda.Stream] = None, handles=None, key=None):
    seq_world_size = dist.get_world_size(group)
    if batch_dim_idx == 0:
        bs, global_seq_len, num_local_head, head_dim = input.shape
    else:
        global_seq_len, bs, num_local_head, head_dim = input.shape
    if scatter_idx < 2:
        input_t = input.reshape([bs, seq_world_size, global_seq_len // seq_world_size, num_local_head, head_dim])
        input_t = input_t.permute(1, 0, 2, 3, 4).contiguous()
        seq_len = global_seq_len
        num_head = num_local_head
    else:
        input_t = input.reshape([bs, global_seq_len, seq_world_size, num_local_head // seq_world_size, head_dim])
        input_t = input_t.permute(2, 0, 1, 3, 4).contiguous()
        seq_len = global_seq_len
        num_head = num_local_head
    post_fn = post_all2all(scatter_idx, batch_dim_idx, seq_world_size, bs, seq_len, num_head, head_dim)
    output = torch.empty_like(input_t)

    if overlap and grad_enabled and stream is not None:
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            work = dist.all_to_all_single(output, input_t, group=group, async_op=True)
        handles[key] = (work, post_fn, output)
        return output
    dist.all_to_all_single(output, input_t, group=group)
    return post_fn(output)


class _SeqAllToAll(torch.autograd.Function):
    @staticmethod
    def forward(ctx, group, input, scatter_idx, gather_idx, batch_dim_idx, overlap=False,
                grad_enabled=False, stream=None, handles=None, key=None):
        ctx.group = group
        ctx.scatter_idx = scatter_idx
        ctx.gather_idx = gather_idx
        ctx.batch_dim_idx = batch_dim_idx
        return single_all_to_all(input, scatter_idx, gather_idx, batch_dim_idx, group,
                                 overlap=overlap, grad_enabled=grad_enabled, stream=stream,
                                 handles=handles, key=key)

    @staticmethod
    def backward(ctx, *grad_output):
        return (None,
                _SeqAllToAll.apply(ctx.group, *grad_output, ctx.gather_idx, ctx.scatter_idx, ctx.batch_dim_idx),
                None, None, None, None, None, None, None, None)
