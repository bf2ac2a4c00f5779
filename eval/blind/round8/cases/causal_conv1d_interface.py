import torch
import torch.nn as nn
import torch.nn.functional as F

import causal_conv1d_cuda


class CausalConv1dFn(torch.autograd.Function):

    @staticmethod
    def forward(ctx, x, weight, bias=None, seq_idx=None, initial_states=None,
                return_final_states=False, activation=None, needs_grad=True):
        if activation not in [None, "silu", "swish"]:
            raise NotImplementedError("activation must be None, silu, or swish")
        if x.stride(2) != 1 and x.stride(1) != 1:
            x = x.contiguous()
        bias = bias.contiguous() if bias is not None else None
        final_states = None
        if return_final_states:
            final_states = torch.empty(x.shape[0], x.shape[1], weight.shape[1] - 1,
                                       device=x.device, dtype=x.dtype)
        ctx.activation = activation in ["silu", "swish"]
        out = causal_conv1d_cuda.causal_conv1d_fwd(
            x, weight, bias, seq_idx, initial_states, final_states, ctx.activation
        )
        if needs_grad:
            ctx.save_for_backward(x, weight, bias, seq_idx, initial_states)
        ctx.return_final_states = return_final_states
        return out if not return_final_states else (out, final_states)

    @staticmethod
    def backward(ctx, dout, *args):
        raise NotImplementedError


def causal_conv1d_fn(x, weight, bias=None, seq_idx=None, initial_states=None,
                     return_final_states=False, activation=None):
    return CausalConv1dFn.apply(x, weight, bias, seq_idx, initial_states,
                                return_final_states, activation, torch.is_grad_enabled())


def causal_conv1d_ref(x, weight, bias=None, activation=None):
    dtype_in = x.dtype
    seqlen = x.shape[-1]
    dim, width = weight.shape
    out = F.conv1d(x.to(weight.dtype), weight.unsqueeze(1), bias, padding=width - 1, groups=dim)
    out = out[..., :seqlen]
    return (out if activation is None else F.silu(out)).to(dtype=dtype_in)


class ShortConvMixer(nn.Module):

    def __init__(self, hidden_size, conv_kernel=4, use_kernels=True):
        super().__init__()
        self.conv1d = nn.Conv1d(hidden_size, hidden_size, conv_kernel, groups=hidden_size,
                                padding=conv_kernel - 1)
        self.use_kernels = use_kernels

    def forward(self, hidden_states):
        hidden_states = hidden_states.transpose(1, 2)
        weight = self.conv1d.weight.view(self.conv1d.weight.size(0), -1)
        kernel_path = self.use_kernels and hidden_states.is_cuda
        if kernel_path and torch.is_grad_enabled():
            out = causal_conv1d_fn(hidden_states, weight, self.conv1d.bias, activation="silu")
        else:
            out = causal_conv1d_ref(hidden_states, weight, self.conv1d.bias, activation="silu")
        return out.transpose(1, 2)
