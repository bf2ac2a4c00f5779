# Adapted from volcengine/verl verl/utils/ulysses.py (SeqAllToAll / gather_seq_scatter_heads)
import functools
import torch
import torch.distributed as dist


def _all_to_all(out, inp, group, async_op=False):
    return dist.all_to_all_single(out, inp, group=group, async_op=async_op)


def gather_seq_scatter_heads(x, seq_dim, head_dim, group):
    sp = dist.get_world_size(group)
    a2a = functools.partial(_all_to_all, group=group, async_op=not torch.is_grad_enabled())
    inp = x.transpose(0, head_dim).contiguous()
    out = torch.empty_like(inp)
    work = a2a(out, inp)
    if work is not None:
        work.wait()
    out = out.transpose(0, head_dim)
    return torch.cat(out.chunk(sp, dim=head_dim), dim=seq_dim)


class UlyssesAttention(torch.nn.Module):
    def __init__(self, attn, group):
        super().__init__()
        self.attn = attn
        self.group = group

    def forward(self, q, k, v):
        q, k, v = (gather_seq_scatter_heads(t, 1, 2, self.group) for t in (q, k, v))
        return self.attn(q, k, v)
