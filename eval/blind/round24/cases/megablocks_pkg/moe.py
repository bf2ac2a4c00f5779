# adapted from databricks/megablocks megablocks/layers/moe.py
import torch

from . import router
from .router import policy_for_step

_LOAD_BALANCING_LOSS = []


def save_load_balancing_loss(loss):
    _LOAD_BALANCING_LOSS.append(loss)


def get_load_balancing_loss():
    return _LOAD_BALANCING_LOSS


class MoE(torch.nn.Module):
    def __init__(self, args):
        super(MoE, self).__init__()
        self.args = args
        self.router = router.LearnedRouter(args)

    def forward(self, x):
        sl, bs, hs = x.size()
        policy = policy_for_step(self.args)
        if policy.grad and self.args.moe_jitter_eps is not None:
            x = x * self.router.jitter(x)
        scores, expert_weights, top_experts = self.router(x, policy.top_k)

        forward_fn = self.parallel_forward_once if policy.grad and self.args.moe_expert_model_parallelism else self.forward_once
        x, tokens_per_expert = forward_fn(x, top_experts)
        x = x * expert_weights.view(-1, 1)
        if policy.grad:
            save_load_balancing_loss((tokens_per_expert, scores))
        return x.view(sl, bs, hs), self.bias
