# adapted from state-spaces/mamba mamba_ssm/modules/mamba_simple.py
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from einops import rearrange

from mamba_ssm.ops.selective_scan_interface import selective_scan_fn, mamba_inner_fn

try:
    from causal_conv1d import causal_conv1d_fn, causal_conv1d_update
except ImportError:
    causal_conv1d_fn, causal_conv1d_update = None, None

try:
    from mamba_ssm.ops.triton.selective_state_update import selective_state_update
except ImportError:
    selective_state_update = None


class Mamba(nn.Module):
    def __init__(self, d_model, d_state=16, d_conv=4, expand=2, use_fast_path=True, layer_idx=None):
        super().__init__()
        self.d_model = d_model
        self.d_state = d_state
        self.d_conv = d_conv
        self.d_inner = int(expand * d_model)
        self.dt_rank = math.ceil(self.d_model / 16)
        self.use_fast_path = use_fast_path
        self.layer_idx = layer_idx
        self.activation = "silu"
        self.act = nn.SiLU()

    @property
    def _fused_inner(self):
        return self.use_fast_path and causal_conv1d_fn is not None and torch.is_grad_enabled()

    def forward(self, hidden_states, inference_params=None):
        batch, seqlen, dim = hidden_states.shape
        xz = rearrange(
            self.in_proj.weight @ rearrange(hidden_states, "b l d -> d (b l)"),
            "d (b l) -> b d l",
            l=seqlen,
        )
        A = -torch.exp(self.A_log.float())
        if self._fused_inner and inference_params is None:
            out = mamba_inner_fn(
                xz, self.conv1d.weight, self.conv1d.bias, self.x_proj.weight,
                self.dt_proj.weight, self.out_proj.weight, self.out_proj.bias,
                A, None, None, self.D.float(),
                delta_bias=self.dt_proj.bias.float(), delta_softplus=True,
            )
        else:
            x, z = xz.chunk(2, dim=1)
            x = self.act(self.conv1d(x)[..., :seqlen])
            x_dbl = self.x_proj(rearrange(x, "b d l -> (b l) d"))
            dt, B, C = torch.split(x_dbl, [self.dt_rank, self.d_state, self.d_state], dim=-1)
            dt = rearrange(self.dt_proj.weight @ dt.t(), "d (b l) -> b d l", l=seqlen)
            B = rearrange(B, "(b l) dstate -> b dstate l", l=seqlen).contiguous()
            C = rearrange(C, "(b l) dstate -> b dstate l", l=seqlen).contiguous()
            y = selective_scan_fn(x, dt, A, B, C, self.D.float(), z=z,
                                  delta_bias=self.dt_proj.bias.float(), delta_softplus=True)
            out = self.out_proj(rearrange(y, "b d l -> b l d"))
        return out

    def step(self, hidden_states, conv_state, ssm_state):
        assert not torch.is_grad_enabled(), "step() only supports decoding without autograd"
        dtype = hidden_states.dtype
        xz = self.in_proj(hidden_states.squeeze(1))
        x, z = xz.chunk(2, dim=-1)
        x = causal_conv1d_update(x, conv_state, rearrange(self.conv1d.weight, "d 1 w -> d w"),
                                 self.conv1d.bias, self.activation)
        x_db = self.x_proj(x)
        dt, B, C = torch.split(x_db, [self.dt_rank, self.d_state, self.d_state], dim=-1)
        dt = F.linear(dt, self.dt_proj.weight)
        A = -torch.exp(self.A_log.float())
        if (in_inference := torch.is_inference_mode_enabled()) or selective_state_update is None:
            dt = F.softplus(dt + self.dt_proj.bias.to(dtype=dt.dtype))
            dA = torch.exp(torch.einsum("bd,dn->bdn", dt, A))
            dB = torch.einsum("bd,bn->bdn", dt, B)
            ssm_state.copy_(ssm_state * dA + rearrange(x, "b d -> b d 1") * dB)
            y = torch.einsum("bdn,bn->bd", ssm_state.to(dtype), C)
            y = y + self.D.to(dtype) * x
            y = y * self.act(z)
        else:
            y = selective_state_update(
                ssm_state, x, dt, A, B, C, self.D, z=z, dt_bias=self.dt_proj.bias, dt_softplus=True
            )
        out = self.out_proj(y)
        return out.unsqueeze(1), conv_state, ssm_state
