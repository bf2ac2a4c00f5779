import torch
import torch.distributed as dist

from megablocks import ops
from megablocks.layers import mpu


class ParallelDroplessMLP(torch.nn.Module):

    def __init__(self, args, mlp):
        super().__init__()
        self.args = args
        self.mlp = mlp
        self.num_experts = args.moe_num_experts
        self.top_k = args.moe_top_k
        self.sort_end_bit = max(int(torch.tensor(self.num_experts).log2().ceil().item()), 1)

    def indices_and_bins(self, top_expert):
        top_expert = top_expert.int()
        bin_ids, indices = ops.sort(top_expert, self.sort_end_bit)
        tokens_per_expert = ops.histogram(top_expert, self.num_experts)
        bins = ops.inclusive_cumsum(tokens_per_expert, 0)
        bins = bins.view(1) if not len(bins.size()) else bins
        return indices, bin_ids, bins, tokens_per_expert

    def grouped_forward_once(self, x, expert_weights, top_experts):
        with torch.no_grad():
            indices, bin_ids, bins, tokens_per_expert = self.indices_and_bins(top_experts.flatten())
        x = ops.gather(x.view(-1, x.shape[-1]), indices, bin_ids, bins, self.top_k)
        x = self.mlp(x, tokens_per_expert)
        x = ops.scatter(x, indices, bin_ids, expert_weights.flatten(), bins, self.top_k)
        return x, tokens_per_expert

    def sparse_forward_once(self, x, expert_weights, top_experts):
        with torch.no_grad():
            indices, bin_ids, bins, tokens_per_expert = self.indices_and_bins(top_experts.flatten())
            padded_tokens_per_expert = ops.round_up(tokens_per_expert, self.args.moe_block_size)
            padded_bins = ops.inclusive_cumsum(padded_tokens_per_expert, 0)
            topo = self.mlp.sparse_transpose_topology(x, padded_bins)
        x = ops.padded_gather(x.view(-1, x.shape[-1]), indices, bin_ids, bins, padded_bins, self.top_k)
        x = self.mlp.sparse(x, topo)
        x = ops.padded_scatter(x, indices, bin_ids, expert_weights.flatten(), bins, padded_bins, self.top_k)
        return x, tokens_per_expert

    def parallel_forward_once(self, x, expert_weights, top_experts):
        grad_on = torch.is_grad_enabled()
        group = self.args.expert_parallel_group
        world = mpu.get_expert_parallel_world_size(self.args)

        with torch.no_grad():
            indices, bin_ids, bins, tokens_per_expert = self.indices_and_bins(top_experts.flatten())
            repeated = ops.repeat(tokens_per_expert, (mpu.hidden_sharding_degree(self.args),))
            parallel_tokens_per_expert = torch.empty_like(repeated)
            tpe_handle = dist.all_to_all_single(
                parallel_tokens_per_expert,
                repeated,
                group=group,
                async_op=grad_on,
            )

        x = ops.gather(x.view(-1, x.shape[-1]), indices, bin_ids, bins, self.top_k)
        if tpe_handle is not None:
            tpe_handle.wait()
        send_counts = repeated.view(world, -1).sum(dim=-1).tolist()
        recv_counts = parallel_tokens_per_expert.view(world, -1).sum(dim=-1).tolist()

        parallel_x = ops.all_to_all(x, recv_counts, send_counts, group)
        local_expert = (
            self.grouped_forward_once
            if self.args.mlp_impl == "grouped" and grad_on
            else self.sparse_forward_once
        )
        local_weights = torch.ones(parallel_x.shape[0], device=x.device, dtype=x.dtype)
        local_top = self._local_assignment(parallel_tokens_per_expert)
        parallel_x, _ = local_expert(parallel_x, local_weights, local_top)

        x = ops.all_to_all(parallel_x, send_counts, recv_counts, group)
        x = ops.scatter(x, indices, bin_ids, expert_weights.flatten(), bins, self.top_k)
        return x, tokens_per_expert

    def _local_assignment(self, parallel_tokens_per_expert):
        local = parallel_tokens_per_expert.view(-1, self.num_experts // mpu.get_expert_parallel_world_size(self.args))
        ids = torch.arange(local.shape[-1], device=local.device)
        return ids.repeat_interleave(local.sum(dim=0))

    def forward(self, x, expert_weights, top_experts):
        if self.args.moe_expert_model_parallelism:
            return self.parallel_forward_once(x, expert_weights, top_experts)
        return self.grouped_forward_once(x, expert_weights, top_experts)
