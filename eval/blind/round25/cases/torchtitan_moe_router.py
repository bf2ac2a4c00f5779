# adapted from pytorch/torchtitan torchtitan/models/moe/moe.py
import torch
import torch.nn.functional as F
from torch import nn


class TokenChoiceTopKRouter(nn.Module):
    def forward(self, x: torch.Tensor, expert_bias: torch.Tensor | None = None):
        scores = self.gate(x)
        if torch.is_grad_enabled() and self.jitter_eps > 0:
            scores = scores * torch.empty_like(scores).uniform_(1 - self.jitter_eps, 1 + self.jitter_eps)
        if self.score_func == "sigmoid":
            scores = torch.sigmoid(scores.to(torch.float32))
        else:
            scores = F.softmax(scores.to(torch.float32), dim=1)
        biased = scores + expert_bias if expert_bias is not None else scores
        _, selected_experts_indices = torch.topk(biased, k=self.top_k, dim=1)
        top_scores = scores.gather(dim=1, index=selected_experts_indices)
        num_tokens_per_expert = torch.histc(selected_experts_indices.view(-1), bins=self.num_experts,
                                            min=0, max=self.num_experts)
        return top_scores, selected_experts_indices, num_tokens_per_expert


class MoE(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        bs, slen, dim = x.shape
        x = x.view(-1, dim)
        top_scores, selected_experts_indices, num_tokens_per_expert = self.router(x, self.expert_bias)
        with torch.no_grad():
            if torch.is_grad_enabled():
                num_tokens_per_expert = num_tokens_per_expert.clone()
        if self.load_balance_coeff is not None and torch.is_grad_enabled():
            self.tokens_per_expert.add_(num_tokens_per_expert)
        out = self.experts(x, num_tokens_per_expert)
        return out.reshape(bs, slen, dim)

    def update_expert_bias(self):
        # optimizer pre-step hook: the next forward's router reads expert_bias
        with torch.no_grad():
            delta = self.tokens_per_expert.mean() - self.tokens_per_expert
            self.expert_bias.add_(self.load_balance_coeff * torch.sign(delta))
            self.tokens_per_expert.zero_()
