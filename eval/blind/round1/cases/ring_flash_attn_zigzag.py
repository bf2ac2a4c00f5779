"""Ring flash attention over a context-parallel group (modelled on ring_flash_attn, as used by OpenRLHF)."""
import torch
import torch.distributed as dist
from torch import is_grad_enabled as _grad_enabled
from flash_attn.flash_attn_interface import _flash_attn_backward, _flash_attn_forward

from .utils import RingComm, update_out_and_lse


def ring_flash_attn_forward(
    process_group,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    softmax_scale,
    dropout_p=0,
    causal=True,
    window_size=(-1, -1),
    alibi_slopes=None,
    deterministic=False,
    grad_enabled=False,
):
    comm = RingComm(process_group)
    overlap_comm = grad_enabled and comm.world_size > 1

    out = None
    lse = None
    next_k, next_v = None, None

    for step in range(comm.world_size):
        last_step = step + 1 == comm.world_size
        if overlap_comm and not last_step:
            next_k = comm.send_recv(k)
            next_v = comm.send_recv(v)
            comm.commit()

        if not causal or step <= comm.rank:
            block_out, block_lse, _, _ = _flash_attn_forward(
                q, k, v, dropout_p, softmax_scale,
                causal=causal and step == 0,
                window_size=window_size,
                alibi_slopes=alibi_slopes,
                return_softmax=True and dropout_p > 0,
            )
            out, lse = update_out_and_lse(out, lse, block_out, block_lse)

        if not last_step:
            if not overlap_comm:
                next_k = comm.send_recv(k)
                next_v = comm.send_recv(v)
                comm.commit()
            comm.wait()
            k, v = next_k, next_v

    out = out.to(q.dtype)
    lse = lse.squeeze(dim=-1).transpose(1, 2)
    return out, lse


class RingFlashAttnFunc(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, dropout_p, softmax_scale, causal, window_size, alibi_slopes,
                deterministic, return_softmax, group, grad_enabled):
        if softmax_scale is None:
            softmax_scale = q.shape[-1] ** (-0.5)
        k = k.contiguous()
        v = v.contiguous()
        out, softmax_lse = ring_flash_attn_forward(
            group, q, k, v, softmax_scale=softmax_scale, dropout_p=dropout_p, causal=causal,
            window_size=window_size, alibi_slopes=alibi_slopes, deterministic=False,
            grad_enabled=grad_enabled,
        )
        ctx.save_for_backward(q, k, v, out, softmax_lse)
        ctx.dropout_p = dropout_p
        ctx.softmax_scale = softmax_scale
        ctx.causal = causal
        ctx.window_size = window_size
        ctx.alibi_slopes = alibi_slopes
        ctx.deterministic = deterministic
        ctx.group = group
        return out if not return_softmax else (out, softmax_lse, None)

    @staticmethod
    def backward(ctx, dout, *args):
        raise NotImplementedError  # see ring_flash_attn_backward


def ring_flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1),
                         alibi_slopes=None, deterministic=False, return_attn_probs=False, group=None):
    grad_enabled = _grad_enabled()
    dropout_p = dropout_p if grad_enabled else 0.0
    if grad_enabled and any(t.requires_grad for t in (q, k, v)):
        return RingFlashAttnFunc.apply(q, k, v, dropout_p, softmax_scale, causal, window_size, alibi_slopes,
                                       deterministic, return_attn_probs, group, grad_enabled)
    if softmax_scale is None:
        softmax_scale = q.shape[-1] ** (-0.5)
    out, softmax_lse = ring_flash_attn_forward(group, q, k.contiguous(), v.contiguous(), softmax_scale, dropout_p,
                                               causal, window_size, alibi_slopes, deterministic, grad_enabled)
    return out if not return_attn_probs else (out, softmax_lse, None)
