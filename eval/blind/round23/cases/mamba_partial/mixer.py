# adapted from state-spaces/mamba mamba_ssm/ops/selective_scan_interface.py
import functools

import torch
import torch.nn as nn
import torch.nn.functional as F
from einops import rearrange

from . import ops


class MambaMixer(nn.Module):
    def __init__(self, d_model, d_state=16, d_conv=4, expand=2, dt_rank=None, use_fast_path=True):
        super().__init__()
        self.d_inner = int(expand * d_model)
        self.d_state = d_state
        self.dt_rank = dt_rank or (d_model + 15) // 16
        self.in_proj = nn.Linear(d_model, self.d_inner * 2, bias=False)
        self.conv1d = nn.Conv1d(self.d_inner, self.d_inner, d_conv, groups=self.d_inner, padding=d_conv - 1)
        self.x_proj = nn.Linear(self.d_inner, self.dt_rank + d_state * 2, bias=False)
        self.dt_proj = nn.Linear(self.dt_rank, self.d_inner, bias=True)
        self.out_proj = nn.Linear(self.d_inner, d_model, bias=False)
        self.A_log = nn.Parameter(torch.zeros(self.d_inner, d_state))
        self.D = nn.Parameter(torch.ones(self.d_inner))
        self.use_fast_path = use_fast_path

    def _scan_fn(self):
        return functools.partial(ops.selective_scan_fn, fp32_accum=torch.is_grad_enabled())

    def forward(self, hidden_states):
        batch, seqlen, dim = hidden_states.shape
        xz = rearrange(self.in_proj(hidden_states), "b l d -> b d l")
        A = -torch.exp(self.A_log.float())
        if self.use_fast_path:
            # recompute conv/delta in backward only when a backward will run
            checkpoint_lvl = 1 if torch.is_grad_enabled() else 0
            return ops.mamba_inner_fn(
                xz, self.conv1d.weight, self.conv1d.bias, self.x_proj.weight, self.dt_proj.weight,
                self.out_proj.weight, self.out_proj.bias, A, None, None, self.D.float(),
                delta_bias=self.dt_proj.bias.float(), delta_softplus=True, checkpoint_lvl=checkpoint_lvl,
            )
        x, z = xz.chunk(2, dim=1)
        x = F.silu(self.conv1d(x)[..., :seqlen])
        x_dbl = self.x_proj(rearrange(x, "b d l -> (b l) d"))
        dt, B, C = torch.split(x_dbl, [self.dt_rank, self.d_state, self.d_state], dim=-1)
        dt = rearrange(self.dt_proj.weight @ dt.t(), "d (b l) -> b d l", l=seqlen)
        B = rearrange(B, "(b l) dstate -> b dstate l", l=seqlen).contiguous()
        C = rearrange(C, "(b l) dstate -> b dstate l", l=seqlen).contiguous()
        scan = self._scan_fn()
        y = scan(x, dt, A, B, C, self.D.float(), z=z, delta_bias=self.dt_proj.bias.float(), delta_softplus=True)
        return self.out_proj(rearrange(y, "b d l -> b l d"))
