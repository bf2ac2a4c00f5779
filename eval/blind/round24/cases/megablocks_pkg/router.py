# adapted from databricks/megablocks megablocks/layers/moe.py
import torch


class RoutingPolicy:
    """Snapshot of how the current step routes tokens."""

    def __init__(self, top_k: int):
        self.top_k = top_k
        self.grad = torch.is_grad_enabled()


def policy_for_step(args) -> RoutingPolicy:
    return RoutingPolicy(args.moe_top_k)


class LearnedRouter(torch.nn.Module):
    def __init__(self, args):
        super().__init__()
        self.args = args
        self.layer = torch.nn.Linear(args.hidden_size, args.moe_num_experts, bias=False)

    def jitter(self, x):
        low = 1.0 - self.args.moe_jitter_eps
        high = 1.0 + self.args.moe_jitter_eps
        noise = torch.rand(x.size(), dtype=x.dtype, device=x.device)
        return low + noise * (high - low)

    def forward(self, x, top_k):
        scores = self.layer(x.view(-1, x.shape[-1])).softmax(dim=-1)
        expert_weights, expert_indices = torch.topk(scores, top_k, dim=-1)
        return scores, expert_weights, expert_indices
