# adapted from pytorch/torchtitan torchtitan/models/moe/moe.py
import torch
from torch import nn

from .load_balance import maybe_accumulate_tokens
from .router import TokenChoiceTopKRouter


class MoE(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        bs, slen, dim = x.shape
        x = x.view(-1, dim)
        self._last_grad = torch.is_grad_enabled()
        top_scores, idx, counts = self.router(x, self.expert_bias, torch.is_grad_enabled())
        maybe_accumulate_tokens(self, counts)
        out = self.experts(x, counts)
        return out.reshape(bs, slen, dim)
