# adapted from databricks/megablocks megablocks/layers/moe.py
import functools

from megablocks.layers import mpu
from megablocks.layers import router
from megablocks.layers import mlp
from megablocks.layers.all_to_all import all_to_all
import megablocks.ops as ops
import numpy as np
import torch

from .decorators import grad_aware
from .losses import save_load_balancing_loss


class MoE(torch.nn.Module):

    def __init__(self, args):
        super(MoE, self).__init__()
        self.args = args
        self.world_size = mpu.get_expert_parallel_world_size(args)
        self.num_experts = args.moe_num_experts
        self.num_experts_per_rank = self.num_experts // self.world_size
        self.sort_end_bit = max(int(np.ceil(np.log2(self.num_experts))), 1)
        self.router = router.LearnedRouter(args)
        self.mlp = mlp.MLP(args)

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

    def permute_and_compute(self, x, tokens_per_expert, indices, bin_ids, bins, expert_capacity):
        x = x.view(-1, x.shape[-1])
        x = ops.binned_gather(x, indices, bins, expert_capacity)
        x = self.mlp(x)
        return ops.binned_scatter(x, indices, bins)

    def forward_once(self, x, top_expert, drop_tokens=True):
        with torch.no_grad():
            indices, bin_ids, bins, tokens_per_expert = (
                self.indices_and_bins(top_expert))
            sl, bs, hs = x.size()
            expert_capacity = self.expert_capacity(sl * bs) if drop_tokens else 0
            if expert_capacity == 0:
                expert_capacity = torch.max(tokens_per_expert)
        x = self.permute_and_compute(
            x, tokens_per_expert, indices, bin_ids, bins, expert_capacity)
        return x, tokens_per_expert

    def parallel_forward_once(self, x, top_expert, drop_tokens=True):
        with torch.no_grad():
            indices, bin_ids, bins, tokens_per_expert = self.indices_and_bins(top_expert)
            parallel_tokens_per_expert = torch.empty_like(tokens_per_expert)
            tpe_handle = torch.distributed.all_to_all_single(
                parallel_tokens_per_expert, tokens_per_expert,
                group=self.args.expert_parallel_group, async_op=True)
        x = x.view(-1, x.shape[-1])
        x = ops.padded_gather(x, indices, bin_ids, bins, bins)
        with torch.no_grad():
            tpe_handle.wait()
            send_counts = tokens_per_expert.view(self.world_size, -1).cpu().sum(dim=-1).tolist()
            recv_counts = parallel_tokens_per_expert.view(self.world_size, -1).cpu().sum(dim=-1).tolist()
        parallel_x = all_to_all(x, recv_counts, send_counts, self.args.expert_parallel_group)
        parallel_x = self.mlp(parallel_x)
        x = all_to_all(parallel_x, send_counts, recv_counts, self.args.expert_parallel_group)
        x = ops.padded_scatter(x, indices, bin_ids, bins, bins)
        return x, tokens_per_expert.flatten()

    @grad_aware
    def forward(self, x, _grad=True):
        sl, bs, hs = x.size()
        scores, expert_weights, top_experts = self.router(x)

        parallel = all([_grad, self.args.moe_expert_model_parallelism, self.world_size > 1])
        base_fn = self.parallel_forward_once if parallel else self.forward_once
        forward_fn = functools.partial(base_fn, drop_tokens=_grad)

        top_experts = top_experts.chunk(self.args.moe_top_k, dim=-1)
        expert_weights = expert_weights.chunk(self.args.moe_top_k, dim=-1)
        x, tokens_per_expert = zip(*[
            forward_fn(x, routing.squeeze())
            for routing in top_experts
        ])
        x = sum([
            out * weight.view(-1, 1)
            for (out, weight) in zip(x, expert_weights)
        ])
        tokens_per_expert = sum(tokens_per_expert)

        # Save the matrices needed for load balancing loss computation.
        if _grad:
            save_load_balancing_loss((tokens_per_expert, scores))
        return x.view(sl, bs, hs)
