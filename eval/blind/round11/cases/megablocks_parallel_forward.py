# Adapted from databricks/megablocks megablocks/layers/moe.py
# (ParallelMLP.parallel_forward_once token-count exchange and ParallelMLP.forward).
import torch

from megablocks import ops
from megablocks.layers import mpu
from megablocks.layers.all_to_all import all_to_all
from megablocks.layers.moe import save_load_balancing_loss


class ParallelMLP(torch.nn.Module):
    def parallel_forward_once(self, x, top_expert):
        with torch.no_grad():
            indices, bin_ids, bins, tokens_per_expert = self.indices_and_bins(top_expert)
            parallel_tokens_per_expert = torch.empty_like(tokens_per_expert)
            tpe_handle = torch.distributed.all_to_all_single(
                parallel_tokens_per_expert,
                tokens_per_expert,
                group=self.args.expert_parallel_group,
                async_op=torch.is_grad_enabled(),
            )

        x = x.view(-1, x.shape[-1])
        x = ops.padded_gather(x, indices, bin_ids, bins, bins)

        with torch.no_grad():
            if tpe_handle is not None:
                tpe_handle.wait()
            world_size = mpu.get_expert_parallel_world_size(self.args)
            tokens_per_expert = tokens_per_expert.view(world_size, -1)
            parallel_tokens_per_expert = parallel_tokens_per_expert.view(world_size, -1)
            send_counts = tokens_per_expert.cpu().sum(dim=-1).tolist()
            recv_counts = parallel_tokens_per_expert.cpu().sum(dim=-1).tolist()
            tokens_received = sum(recv_counts)
            replicate_bins = ops.inclusive_cumsum(parallel_tokens_per_expert.flatten(), 0)
            parallel_top_expert = torch.remainder(
                torch.arange(self.num_experts, dtype=torch.int32, device=indices.device),
                self.num_experts_per_rank,
            )
            parallel_top_expert = ops.replicate(parallel_top_expert.unsqueeze(dim=0), replicate_bins,
                                                tokens_received).flatten()
            parallel_bin_ids, parallel_indices = ops.sort(parallel_top_expert, self.sort_end_bit)
            parallel_tokens_per_expert = parallel_tokens_per_expert.sum(dim=0, dtype=torch.int)
            parallel_bins = ops.inclusive_cumsum(parallel_tokens_per_expert, 0)
            expert_capacity = self.expert_capacity(x.size(0))
            if expert_capacity == 0:
                expert_capacity = torch.max(parallel_tokens_per_expert)

        parallel_x = all_to_all(x, recv_counts, send_counts, self.args.expert_parallel_group)
        parallel_x = self.permute_and_compute(parallel_x, parallel_tokens_per_expert, parallel_indices,
                                              parallel_bin_ids, parallel_bins, expert_capacity)
        x = all_to_all(parallel_x, send_counts, recv_counts, self.args.expert_parallel_group)
        x = ops.padded_scatter(x, indices, bin_ids, bins, bins)
        return x, tokens_per_expert.flatten()

    def forward(self, x):
        sl, bs, hs = x.size()
        scores, expert_weights, top_experts = self.router(x)
        x, tokens_per_expert = self.forward_fn(x, top_experts)
        x = x * expert_weights.view(-1, 1)
        if torch.is_grad_enabled() and self.args.moe_loss_weight > 0:
            save_load_balancing_loss((tokens_per_expert, scores))
        return x.view(sl, bs, hs), self.bias
