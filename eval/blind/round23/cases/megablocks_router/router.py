# adapted from databricks/megablocks megablocks/layers/moe.py
from typing import NamedTuple

import torch

from megablocks.layers import common
from megablocks.layers.arguments import Arguments


class RouterOutput(NamedTuple):
    scores: torch.Tensor
    expert_weights: torch.Tensor
    top_experts: torch.Tensor
    is_train_step: bool


class LearnedRouter(torch.nn.Module):
    def __init__(self, args: Arguments):
        super().__init__()
        self.args = args
        self.layer = torch.nn.Linear(
            args.hidden_size, args.moe_num_experts, bias=False,
            dtype=common.dtype(args), device=args.device)

    def jitter(self, x):
        low = 1.0 - self.args.moe_jitter_eps
        high = 1.0 + self.args.moe_jitter_eps
        noise = torch.rand(x.size(), dtype=x.dtype, device=x.device)
        return low + noise * (high - low)

    def _top_k(self, scores):
        if self.args.moe_top_k == 1:
            return scores.max(dim=-1, keepdim=True)
        return torch.topk(scores, self.args.moe_top_k, dim=-1)

    def forward(self, x, noisy_input=None):
        x_in = x if noisy_input is None else noisy_input
        scores = self.layer(x_in.view(-1, x_in.shape[-1])).softmax(dim=-1)
        expert_weights, expert_indices = self._top_k(scores)
        return RouterOutput(scores, expert_weights, expert_indices, torch.is_grad_enabled())
