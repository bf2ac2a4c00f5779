# adapted from databricks/megablocks megablocks/layers/moe.py
from megablocks.layers import common
from megablocks.layers import mpu
from megablocks.layers import router
from megablocks.layers import mlp
from megablocks.layers.arguments import Arguments
import megablocks.ops as ops
import numpy as np
import torch


_LOAD_BALANCING_LOSS = []


def save_load_balancing_loss(loss):
    global _LOAD_BALANCING_LOSS
    _LOAD_BALANCING_LOSS.append(loss)


def get_load_balancing_loss():
    global _LOAD_BALANCING_LOSS
    return _LOAD_BALANCING_LOSS


class MoE(torch.nn.Module):

    def __init__(self, args: Arguments):
        super(MoE, self).__init__()
        self.args = args
        world_size = mpu.get_expert_parallel_world_size(args)
        self.num_experts = args.moe_num_experts
        self.num_experts_per_rank = self.num_experts // world_size
        self.sort_end_bit = max(int(np.ceil(np.log2(self.num_experts))), 1)
        self.router = router.LearnedRouter(args)
        self.mlp = mlp.MLP(args)
        self.bias = torch.nn.Parameter(torch.empty(
            1, 1, args.hidden_size, device=args.device, dtype=common.dtype(args)))
        torch.nn.init.zeros_(self.bias)

    def expert_capacity(self, tokens):
        tokens_per_expert = tokens / self.num_experts_per_rank
        return int(self.args.moe_capacity_factor * tokens_per_expert)

    def indices_and_bins(self, top_expert):
        top_expert = top_expert.int()
        bin_ids, indices = ops.sort(top_expert, self.sort_end_bit)
        tokens_per_expert = ops.histogram(top_expert, self.num_experts)
        bins = ops.inclusive_cumsum(tokens_per_expert, 0)
        bins = bins.view(1) if not len(bins.size()) else bins
        return indices, bin_ids, bins, tokens_per_expert

    def permute_and_compute(self, x, indices, bins, expert_capacity):
        x = x.view(-1, x.shape[-1])
        x = ops.binned_gather(x, indices, bins, expert_capacity)
        x = self.mlp(x)
        return ops.binned_scatter(x, indices, bins)

    def forward(self, x):
        sl, bs, hs = x.size()
        scores, expert_weights, top_experts = self.router(x)

        if (grad_on := torch.is_grad_enabled()) and self.args.moe_capacity_factor > 0:
            # drop overflow tokens while training; keep every token otherwise
            expert_capacity = self.expert_capacity(sl * bs)
        else:
            expert_capacity = 0

        with torch.no_grad():
            indices, bin_ids, bins, tokens_per_expert = self.indices_and_bins(top_experts)
            if expert_capacity == 0:
                expert_capacity = torch.max(tokens_per_expert)

        x = self.permute_and_compute(x, indices, bins, expert_capacity)
        x = x * expert_weights.view(-1, 1)
        if grad_on:
            # only the backward pass consumes the load balancing loss
            save_load_balancing_loss((tokens_per_expert, scores))
        return x.view(sl, bs, hs), self.bias
