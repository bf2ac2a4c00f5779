import torch
import torch.nn as nn


class MoELinearRouter(nn.Module):

    def __init__(self, d_model, num_experts, top_k=1, jitter_eps=None, lb_loss_weight=None):
        super().__init__()
        self.num_experts = num_experts
        self.top_k = top_k
        self.jitter_eps = jitter_eps
        self.lb_loss_weight = lb_loss_weight
        self.weight = nn.Parameter(torch.empty(num_experts * d_model))
        self._batch_lb_losses = []

    def forward(self, x, state):
        if state.is_train and self.jitter_eps is not None:
            x = x * torch.empty_like(x).uniform_(1.0 - self.jitter_eps, 1.0 + self.jitter_eps)
        logits = torch.nn.functional.linear(x, self.weight.view(self.num_experts, -1))
        scores = logits.softmax(dim=-1)
        expert_weights, expert_indices = torch.topk(scores, self.top_k, dim=-1)
        batch_size_per_expert = torch.histc(expert_indices.flatten().float(), bins=self.num_experts,
                                            min=0, max=self.num_experts - 1)
        if state.is_train and self.lb_loss_weight is not None:
            self._batch_lb_losses.append((scores, batch_size_per_expert))
        return expert_weights, expert_indices, batch_size_per_expert
