# adapted from databricks/megablocks megablocks/layers/moe.py
from megablocks.layers import common
from megablocks.layers import mpu
from megablocks.layers import router
from megablocks.layers import mlp
from megablocks.layers.all_to_all import all_to_all
import megablocks.ops as ops
import numpy as np
import torch

_LOAD_BALANCING_LOSS = []


def save_load_balancing_loss(loss):
    global _LOAD_BALANCING_LOSS
    _LOAD_BALANCING_LOSS.append(loss)


class MoE(torch.nn.Module):

    def __init__(self, args):
        super(MoE, self).__init__()
        self.args = args
        world_size = mpu.get_expert_parallel_world_size(args)
        self.num_experts = args.moe_num_experts
        self.num_experts_per_rank = self.num_experts // world_size
        self.sort_end_bit = max(int(np.ceil(np.log2(self.num_experts))), 1)
        self.router = router.LearnedRouter(args)
        self.mlp = mlp.MLP(args)

    def forward_once(self, x, top_expert):
        with torch.no_grad():
            indices, bin_ids, bins, tokens_per_expert = self.indices_and_bins(top_expert)
        x = self.permute_and_compute(x, tokens_per_expert, indices, bin_ids, bins, 0)
        return x, tokens_per_expert

    def parallel_forward_once(self, x, top_expert):
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
            send_counts = tokens_per_expert.cpu().tolist()
            recv_counts = parallel_tokens_per_expert.cpu().tolist()
        parallel_x = all_to_all(x, recv_counts, send_counts, self.args.expert_parallel_group)
        x = all_to_all(parallel_x, send_counts, recv_counts, self.args.expert_parallel_group)
        x = ops.padded_scatter(x, indices, bin_ids, bins, bins)
        return x, tokens_per_expert.flatten()

    def forward(self, x):
        sl, bs, hs = x.size()
        scores, expert_weights, top_experts = self.router(x)

        # Select the forward function for the operating mode.
        forward_fn = (
            self.parallel_forward_once if
            (self.args.moe_expert_model_parallelism and torch.is_grad_enabled()) else
            self.forward_once)

        if self.args.moe_top_k == 1:
            x, tokens_per_expert = forward_fn(x, top_experts)
            x = x * expert_weights.view(-1, 1)
            if torch.is_grad_enabled():
                save_load_balancing_loss((tokens_per_expert, scores))
            return x.view(sl, bs, hs), self.bias
        raise NotImplementedError
