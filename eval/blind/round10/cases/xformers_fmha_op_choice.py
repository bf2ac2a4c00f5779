# Adapted from facebookresearch/xformers xformers/ops/fmha/__init__.py
# (memory_efficient_attention / _memory_efficient_attention dispatch)
import torch

g = torch.is_grad_enabled


def _cutlass_fw(q, k, v, scale):
    return torch.softmax((q @ k.transpose(-1, -2)).float() * scale, -1).to(q.dtype) @ v


def _flash_fw(q, k, v, scale):
    return torch.softmax((q @ k.transpose(-1, -2)) * scale, -1) @ v


class _fMHA(torch.autograd.Function):
    @staticmethod
    def forward(ctx, op, q, k, v, scale):
        out = op(q, k, v, scale)
        ctx.save_for_backward(q, k, v, out)
        return out

    @staticmethod
    def backward(ctx, grad):
        return (None,) + tuple(torch.zeros_like(t) for t in ctx.saved_tensors[:3]) + (None,)


def _memory_efficient_attention_forward(op, q, k, v, scale):
    return op(q, k, v, scale)


def memory_efficient_attention(query, key, value, scale=None):
    scale = scale if scale is not None else query.shape[-1] ** -0.5
    op = _flash_fw if g() else _cutlass_fw
    if g():
        return _fMHA.apply(op, query, key, value, scale)
    return _memory_efficient_attention_forward(op, query, key, value, scale)
