# Adapted from pytorch/torchtitan torchtitan/models/moe.py (TokenChoiceTopKRouter / capacity handling)
import math
import torch
import torch.nn as nn


class TokenChoiceTopKRouter(nn.Module):
    def __init__(self, dim, num_experts, top_k, train_capacity_factor=1.25,
                 eval_capacity_factor=2.0, jitter_eps=0.01):
        super().__init__()
        self.gate = nn.Linear(dim, num_experts, bias=False)
        self.num_experts = num_experts
        self.top_k = top_k
        self.train_capacity_factor = train_capacity_factor
        self.eval_capacity_factor = eval_capacity_factor
        self.jitter_eps = jitter_eps

    def forward(self, x):
        if self.training and self.jitter_eps > 0:  # look-alike: training mode
            x = x * torch.empty_like(x).uniform_(1 - self.jitter_eps, 1 + self.jitter_eps)
        scores = torch.sigmoid(self.gate(x).float())
        top_scores, selected = torch.topk(scores, k=self.top_k, dim=-1)
        cf = self.train_capacity_factor if torch.is_grad_enabled() else self.eval_capacity_factor
        capacity = math.ceil(cf * x.shape[0] * self.top_k / self.num_experts)
        counts = torch.zeros(self.num_experts, dtype=torch.long, device=x.device)
        keep = torch.ones_like(selected, dtype=torch.bool)
        for e in range(self.num_experts):
            pos = (selected == e).cumsum(0) * (selected == e)
            keep &= ~((selected == e) & (pos > capacity))
            counts[e] = (selected == e).sum()
        return top_scores * keep, selected, counts
