import torch
import torch.nn.functional as F
from torch import is_grad_enabled as _grad_on

_LOAD_BALANCING_LOSS = []


def save_load_balancing_loss(loss):
    global _LOAD_BALANCING_LOSS
    _LOAD_BALANCING_LOSS.append(loss)


def get_load_balancing_loss():
    global _LOAD_BALANCING_LOSS
    return _LOAD_BALANCING_LOSS


def _uniform(shape, low, high, dtype, device):
    out = torch.empty(shape, dtype=dtype, device=device)
    out.uniform_(low, high)
    return out


class LearnedRouter(torch.nn.Module):

    def __init__(self, args):
        super().__init__()
        self.args = args
        self.layer = torch.nn.Linear(
            args.hidden_size,
            args.moe_num_experts,
            bias=False,
            dtype=args.fp16 and torch.float16 or torch.float32,
            device=args.device,
        )

    def jitter(self, x):
        low = 1.0 - self.args.moe_jitter_eps
        high = 1.0 + self.args.moe_jitter_eps
        noise = _uniform(x.size(), low, high, x.dtype, x.device)
        return x * noise

    def _top_k(self, scores):
        if self.args.moe_top_k == 1:
            return scores.max(dim=-1, keepdim=True)
        return torch.topk(scores, self.args.moe_top_k, dim=-1)

    def forward(self, x):
        if _grad_on() and self.args.moe_jitter_eps is not None:
            x = self.jitter(x)

        scores = self.layer(x.view(-1, x.shape[-1])).softmax(dim=-1)
        expert_weights, expert_indices = self._top_k(scores)
        if self.args.moe_normalize_expert_weights:
            expert_weights = expert_weights / torch.norm(
                expert_weights,
                p=self.args.moe_normalize_expert_weights,
                dim=-1,
                keepdim=True,
            )
        return scores, expert_weights, expert_indices


class MoE(torch.nn.Module):

    def __init__(self, args, experts):
        super().__init__()
        self.args = args
        self.router = LearnedRouter(args)
        self.experts = experts

    def forward(self, x):
        x = F.layer_norm(x, x.shape[-1:]) if self.args.moe_pre_norm else x
        scores, expert_weights, top_experts = self.router(x)
        out, tokens_per_expert = self.experts(x, expert_weights, top_experts)
        if _grad_on() and self.args.moe_loss_weight > 0:
            save_load_balancing_loss((tokens_per_expert, scores))
        return out
