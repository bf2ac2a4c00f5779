# adapted from pytorch/torchtitan torchtitan/models/moe/moe.py
import torch
import torch.nn.functional as F
from torch import nn


class TokenChoiceTopKRouter(nn.Module):
    def forward(self, x, expert_bias=None, *flags):
        (grad_mode,) = flags or (False,)
        scores = self.gate(x)
        scores = scores + self.routing_noise(scores) if grad_mode else scores
        scores = torch.sigmoid(scores.to(torch.float32))
        biased = scores + expert_bias if expert_bias is not None else scores
        _, idx = torch.topk(biased, k=self.top_k, dim=1)
        counts = torch.histc(idx.view(-1), bins=self.num_experts, min=0, max=self.num_experts)
        return scores.gather(dim=1, index=idx), idx, counts
