import torch
import torch.distributed as dist


def single_all_to_all(input, scatter_idx, gather_idx, batch_dim_idx, group, async_op=False, handle=None, type=None):
    seq_world_size = dist.get_world_size(group)
    inp_shape = list(input.shape)
    inp_shape[scatter_idx] = inp_shape[scatter_idx] // seq_world_size
    input_t = input.reshape([seq_world_size, -1] + inp_shape[scatter_idx:]).contiguous()
    output = torch.empty_like(input_t)
    work = dist.all_to_all_single(output, input_t, group=group, async_op=async_op)
    if async_op:
        handle[type] = work
        handle[type + "_grad"] = output
        handle[type + "_grad_shape"] = input_t.shape
        return output.view(input_t.shape)
    return output.reshape(inp_shape[:gather_idx] + [-1] + inp_shape[gather_idx + 1:])


class _SeqAllToAll(torch.autograd.Function):
    @staticmethod
    def forward(ctx, group, input, scatter_idx, gather_idx, batch_dim_idx, stream=None, handle=None,
                type=None, is_fwd=True, grad_mode=True):
        ctx.group = group
        ctx.scatter_idx = scatter_idx
        ctx.gather_idx = gather_idx
        ctx.batch_dim_idx = batch_dim_idx
        if grad_mode:
            ctx.stream = stream
            ctx.handle = handle
            ctx.type = type
        overlap = stream is not None and grad_mode and is_fwd and type in ("q", "k")
        if overlap:
            res = single_all_to_all(input, scatter_idx, gather_idx, batch_dim_idx, group, True, handle, "fwd_" + type)
        else:
            res = single_all_to_all(input, scatter_idx, gather_idx, batch_dim_idx, group, False)
        return res

    @staticmethod
    def backward(ctx, *grad_output):
        return (None,
                _SeqAllToAll.apply(ctx.group, *grad_output, ctx.gather_idx, ctx.scatter_idx, ctx.batch_dim_idx,
                                   None, None, None, False),
                None, None, None, None, None, None, None, None)
