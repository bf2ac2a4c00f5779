from dataclasses import dataclass

import torch
import torch.nn as nn

from .experts import ParallelExperts
from .router import MoELinearRouter


@dataclass
class MoEForwardState:
    is_train: bool
    layer_idx: int


class MoEBase(nn.Module):

    def __init__(self, layer_idx, router: MoELinearRouter, experts: ParallelExperts):
        super().__init__()
        self.layer_idx = layer_idx
        self.router = router
        self.experts = experts

    def forward(self, x):
        state = MoEForwardState(is_train=torch.is_grad_enabled(), layer_idx=self.layer_idx)
        flat = x.view(-1, x.shape[-1])
        weights, indices, counts = self.router(flat, state)
        order = indices.flatten().argsort()
        send = counts.long().tolist()
        out = self.experts(flat[order // indices.shape[-1]], send, send, state)
        out = out.new_zeros(out.shape).index_copy_(0, order, out) * weights.flatten()[:, None]
        return out.view(*x.shape[:-1], -1, x.shape[-1]).sum(dim=-2)
