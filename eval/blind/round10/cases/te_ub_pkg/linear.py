# Adapted from NVIDIA/TransformerEngine transformer_engine/pytorch/module/linear.py (_Linear.forward)
import torch
import torch.distributed as dist

from .config import make_fwd_config


class _Linear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, inp, weight, tp_group, cfg):
        out = torch.matmul(inp, weight.t())
        if cfg.ub_overlap_rs_fprop and cfg.is_grad_enabled:
            out = _ub_reduce_scatter_overlap(out, tp_group)
        else:
            world = dist.get_world_size(tp_group)
            shard = torch.empty((out.shape[0] // world,) + out.shape[1:], dtype=out.dtype, device=out.device)
            dist.reduce_scatter_tensor(shard, out, group=tp_group)
            out = shard
        if cfg.is_grad_enabled:
            ctx.save_for_backward(inp, weight)
            ctx.tp_group = tp_group
        return out

    @staticmethod
    def backward(ctx, grad):
        inp, weight = ctx.saved_tensors
        return grad @ weight, grad.t() @ inp, None, None


def _ub_reduce_scatter_overlap(out, group):
    world = dist.get_world_size(group)
    shard = torch.empty((out.shape[0] // world,) + out.shape[1:], dtype=out.dtype, device=out.device)
    work = dist.reduce_scatter_tensor(shard, out, group=group, async_op=True)
    work.wait()
    return shard


class Linear(torch.nn.Module):
    def __init__(self, in_f, out_f, tp_group=None):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.empty(out_f, in_f))
        self.tp_group = tp_group
        self.ub_overlap_rs = True
        self.ub_overlap_ag = False

    def forward(self, x):
        cfg = make_fwd_config(self)
        return _Linear.apply(x, self.weight, self.tp_group, cfg)
