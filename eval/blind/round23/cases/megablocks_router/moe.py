# adapted from databricks/megablocks megablocks/layers/moe.py
import numpy as np
import torch

import megablocks.ops as ops
from megablocks.layers import mlp, mpu
from megablocks.layers.arguments import Arguments

from .router import LearnedRouter

_LOAD_BALANCING_LOSS = []


def save_load_balancing_loss(loss):
    global _LOAD_BALANCING_LOSS
    _LOAD_BALANCING_LOSS.append(loss)


class MoE(torch.nn.Module):
    def __init__(self, args: Arguments):
        super(MoE, self).__init__()
        self.args = args
        world_size = mpu.get_expert_parallel_world_size(args)
        self.num_experts = args.moe_num_experts
        self.num_experts_per_rank = self.num_experts // world_size
        self.sort_end_bit = max(int(np.ceil(np.log2(self.num_experts))), 1)
        self.router = LearnedRouter(args)
        self.mlp = mlp.MLP(args)

    def indices_and_bins(self, top_expert):
        top_expert = top_expert.int()
        bin_ids, indices = ops.sort(top_expert, self.sort_end_bit)
        tokens_per_expert = ops.histogram(top_expert, self.num_experts)
        bins = ops.inclusive_cumsum(tokens_per_expert, 0)
        bins = bins.view(1) if not len(bins.size()) else bins
        return indices, bin_ids, bins, tokens_per_expert

    def forward(self, x):
        sl, bs, hs = x.size()
        routing = self.router(x)
        if routing.is_train_step and self.args.moe_jitter_eps is not None:
            # re-route with multiplicative jitter noise on the router input
            routing = self.router(x, noisy_input=x * self.router.jitter(x))
        scores, expert_weights, top_experts, _ = routing

        with torch.no_grad():
            indices, bin_ids, bins, tokens_per_expert = self.indices_and_bins(top_experts.flatten())
            expert_capacity = torch.max(tokens_per_expert)
        out = ops.binned_gather(x.view(-1, hs), indices, bins, expert_capacity)
        out = ops.binned_scatter(self.mlp(out), indices, bins)
        out = out * expert_weights.view(-1, 1)
        if routing.is_train_step:
            save_load_balancing_loss((tokens_per_expert, scores))
        return out.view(sl, bs, hs)
