# Adapted from NVIDIA/Megatron-LM megatron/core/transformer/moe/router.py (TopKRouter.routing)
import torch

from .state import grad_mode_scope, grad_on
from .dispatcher import dispatch_tokens


class TopKRouter(torch.nn.Module):
    def __init__(self, hidden, num_experts, topk, ep_group=None):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.empty(num_experts, hidden))
        self.topk = topk
        self.ep_group = ep_group

    def routing(self, logits):
        scores = torch.softmax(logits.float(), dim=-1)
        probs, idx = torch.topk(scores, k=self.topk, dim=-1, sorted=grad_on())
        return probs.type_as(logits), idx

    def forward(self, hidden):
        with grad_mode_scope():
            logits = torch.nn.functional.linear(hidden, self.weight)
            probs, idx = self.routing(logits)
            return dispatch_tokens(hidden, probs, idx, self.ep_group)
