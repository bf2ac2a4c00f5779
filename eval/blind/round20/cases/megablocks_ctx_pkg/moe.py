# adapted from databricks/megablocks megablocks/layers/moe.py
from megablocks.layers import mpu
from megablocks.layers.all_to_all import all_to_all
import megablocks.ops as ops
import numpy as np
import torch

from ._context import FORWARD_CTX

_LOAD_BALANCING_LOSS = []


def save_load_balancing_loss(loss):
    global _LOAD_BALANCING_LOSS
    _LOAD_BALANCING_LOSS.append(loss)


class MoE(torch.nn.Module):
    def __init__(self, args, router, mlp):
        super().__init__()
        self.args = args
        world_size = mpu.get_expert_parallel_world_size(args)
        self.num_experts = args.moe_num_experts
        self.num_experts_per_rank = self.num_experts // world_size
        self.sort_end_bit = max(int(np.ceil(np.log2(self.num_experts))), 1)
        self.router = router
        self.mlp = mlp

    def indices_and_bins(self, top_expert):
        top_expert = top_expert.int()
        bin_ids, indices = ops.sort(top_expert, self.sort_end_bit)
        tokens_per_expert = ops.histogram(top_expert, self.num_experts)
        bins = ops.inclusive_cumsum(tokens_per_expert, 0)
        bins = bins.view(1) if not len(bins.size()) else bins
        return indices, bin_ids, bins, tokens_per_expert

    def parallel_forward_once(self, x, top_expert):
        with torch.no_grad():
            indices, bin_ids, bins, tokens_per_expert = self.indices_and_bins(top_expert)
            parallel_tokens_per_expert = torch.empty_like(tokens_per_expert)
            tpe_handle = torch.distributed.all_to_all_single(
                parallel_tokens_per_expert,
                tokens_per_expert,
                group=self.args.expert_parallel_group,
                async_op=FORWARD_CTX.grad_enabled)

        x = x.view(-1, x.shape[-1])
        x = ops.padded_gather(x, indices, bin_ids, bins, bins)

        with torch.no_grad():
            if tpe_handle is not None:
                tpe_handle.wait()
            world_size = mpu.get_expert_parallel_world_size(self.args)
            send_counts = tokens_per_expert.view(world_size, -1).cpu().sum(dim=-1).tolist()
            recv_counts = parallel_tokens_per_expert.view(world_size, -1).cpu().sum(dim=-1).tolist()

        parallel_x = all_to_all(x, recv_counts, send_counts, self.args.expert_parallel_group)
        parallel_x = self.mlp(parallel_x)
        x = all_to_all(parallel_x, send_counts, recv_counts, self.args.expert_parallel_group)
        x = ops.padded_scatter(x, indices, bin_ids, bins, bins)
        return x, tokens_per_expert.flatten()

    def forward(self, x):
        sl, bs, hs = x.size()
        scores, expert_weights, top_experts = self.router(x)
        x, tokens_per_expert = self.parallel_forward_once(x, top_experts)
        x = x * expert_weights.view(-1, 1)
        FORWARD_CTX.num_layers_seen += 1
        # Save the matrices needed for load balancing loss computation (backward only).
        if FORWARD_CTX.grad_enabled:
            save_load_balancing_loss((tokens_per_expert, scores))
        return x.view(sl, bs, hs)
