# adapted from databricks/megablocks megablocks/layers/moe.py
import numpy as np
import torch

from megablocks.layers import mlp, mpu, router
from megablocks.layers.all_to_all import all_to_all
import megablocks.ops as ops

from .arguments import Arguments

_LOAD_BALANCING_LOSS = []


def save_load_balancing_loss(loss):
    _LOAD_BALANCING_LOSS.append(loss)


def get_load_balancing_loss():
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

    def indices_and_bins(self, top_expert):
        top_expert = top_expert.int()
        bin_ids, indices = ops.sort(top_expert, self.sort_end_bit)
        tokens_per_expert = ops.histogram(top_expert, self.num_experts)
        bins = ops.inclusive_cumsum(tokens_per_expert, 0)
        return indices, bin_ids, bins, tokens_per_expert

    def forward_once(self, x, top_expert):
        with torch.no_grad():
            indices, bin_ids, bins, tokens_per_expert = self.indices_and_bins(top_expert)
        x = ops.binned_gather(x.view(-1, x.shape[-1]), indices, bins, 0)
        return ops.binned_scatter(self.mlp(x), indices, bins), tokens_per_expert

    def parallel_forward_once(self, x, top_expert):
        with torch.no_grad():
            indices, bin_ids, bins, tokens_per_expert = self.indices_and_bins(top_expert)
            parallel_tpe = torch.empty_like(tokens_per_expert)
            torch.distributed.all_to_all_single(parallel_tpe, tokens_per_expert, group=self.args.expert_parallel_group)
            world_size = mpu.get_expert_parallel_world_size(self.args)
            send_counts = tokens_per_expert.view(world_size, -1).cpu().sum(dim=-1).tolist()
            recv_counts = parallel_tpe.view(world_size, -1).cpu().sum(dim=-1).tolist()
        x = ops.padded_gather(x.view(-1, x.shape[-1]), indices, bin_ids, bins, bins)
        parallel_x = all_to_all(x, recv_counts, send_counts, self.args.expert_parallel_group)
        parallel_x = self.mlp(parallel_x)
        x = all_to_all(parallel_x, send_counts, recv_counts, self.args.expert_parallel_group)
        return ops.padded_scatter(x, indices, bin_ids, bins, bins), tokens_per_expert

    def forward(self, x):
        sl, bs, hs = x.size()
        scores, expert_weights, top_experts = self.router(x)
        forward_fn = self.parallel_forward_once if self.args.ep_forward else self.forward_once
        x, tokens_per_expert = forward_fn(x, top_experts)
        x = x * expert_weights.view(-1, 1)
        if self.args.track_lbl:
            save_load_balancing_loss((tokens_per_expert, scores))
        return x.view(sl, bs, hs)
