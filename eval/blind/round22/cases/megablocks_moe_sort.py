# adapted from databricks/megablocks megablocks/layers/moe.py
from megablocks.layers import common
from megablocks.layers import mpu
from megablocks.layers import router
from megablocks.layers import mlp
from megablocks.layers.all_to_all import all_to_all
from megablocks.layers.arguments import Arguments
import megablocks.ops as ops
import numpy as np
import torch


_LOAD_BALANCING_LOSS = []


def save_load_balancing_loss(loss):
    global _LOAD_BALANCING_LOSS
    _LOAD_BALANCING_LOSS.append(loss)


def _torch_sort(x, end_bit):
    values, indices = torch.sort(x)
    return values.int(), indices.int()


class MoE(torch.nn.Module):

    def __init__(self, args : Arguments):
        super(MoE, self).__init__()
        self.args = args
        world_size = mpu.get_expert_parallel_world_size(args)
        self.num_experts = args.moe_num_experts
        self.num_experts_per_rank = self.num_experts // world_size
        self.sort_end_bit = max(int(np.ceil(np.log2(self.num_experts))), 1)
        self.router = router.LearnedRouter(args)
        self.mlp = mlp.MLP(args)
        self.forward_fn = (
            self.parallel_forward_once if
            args.moe_expert_model_parallelism else
            self.forward_once)

    def indices_and_bins(self, top_expert):
        top_expert = top_expert.int()
        # Radix sort is only stable enough for the training histogram path.
        sort_fn = ops.sort if torch.is_grad_enabled() else _torch_sort
        bin_ids, indices = sort_fn(top_expert, self.sort_end_bit)
        tokens_per_expert = ops.histogram(top_expert, self.num_experts)
        bins = ops.inclusive_cumsum(tokens_per_expert, 0)
        bins = bins.view(1) if not len(bins.size()) else bins
        return indices, bin_ids, bins, tokens_per_expert

    def parallel_forward_once(self, x, top_expert):
        with torch.no_grad():
            indices, bin_ids, bins, tokens_per_expert = (
                self.indices_and_bins(top_expert))
            parallel_tokens_per_expert = torch.empty_like(
                tokens_per_expert)
            tpe_handle = torch.distributed.all_to_all_single(
                parallel_tokens_per_expert,
                tokens_per_expert,
                group=self.args.expert_parallel_group,
                async_op=torch.is_grad_enabled())
        x = x.view(-1, x.shape[-1])
        x = ops.padded_gather(x, indices, bin_ids, bins, bins)
        with torch.no_grad():
            if tpe_handle is not None:
                tpe_handle.wait()
            world_size = mpu.get_expert_parallel_world_size(self.args)
            tokens_per_expert = tokens_per_expert.view(world_size, -1)
            parallel_tokens_per_expert = (
                parallel_tokens_per_expert.view(world_size, -1))
            send_counts = tokens_per_expert.cpu().sum(dim=-1).tolist()
            recv_counts = parallel_tokens_per_expert.cpu().sum(dim=-1).tolist()
        parallel_x = all_to_all(
            x, recv_counts, send_counts,
            self.args.expert_parallel_group)
        parallel_x = self.mlp(parallel_x)
        x = all_to_all(
            parallel_x, send_counts, recv_counts,
            self.args.expert_parallel_group)
        x = ops.padded_scatter(x, indices, bin_ids, bins, bins)
        return x, tokens_per_expert.flatten()

    def forward(self, x):
        sl, bs, hs = x.size()
        scores, expert_weights, top_experts = self.router(x)
        x, tokens_per_expert = self.forward_fn(x, top_experts)
        x = x * expert_weights.view(-1, 1)
        # The load balancing loss only feeds the backward pass.
        if torch.is_grad_enabled():
            save_load_balancing_loss((tokens_per_expert, scores))
        return x.view(sl, bs, hs), self.bias
