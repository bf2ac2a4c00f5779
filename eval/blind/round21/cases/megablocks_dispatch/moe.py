# adapted from databricks/megablocks megablocks/layers/moe.py
import torch

from megablocks.layers import router
from megablocks.layers.all_to_all import all_to_all
import megablocks.ops as ops

from .dispatch import select_dispatcher

_LOAD_BALANCING_LOSS = []


def save_load_balancing_loss(loss):
    global _LOAD_BALANCING_LOSS
    _LOAD_BALANCING_LOSS.append(loss)


class MoE(torch.nn.Module):
    def forward(self, x):
        sl, bs, hs = x.size()
        scores, expert_weights, top_experts = self.router(x)
        dispatcher = select_dispatcher(self.args)
        if self.args.moe_expert_model_parallelism and dispatcher.grad_enabled:
            x, tokens_per_expert = self.parallel_forward_once(x, top_experts)
        else:
            x, tokens_per_expert = self.forward_once(x, top_experts)
        x = x * expert_weights.view(-1, 1)
        # Save the matrices needed for load balancing loss computation.
        if dispatcher.grad_enabled:
            save_load_balancing_loss((tokens_per_expert, scores))
        return x.view(sl, bs, hs), self.bias

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
            send_counts = tokens_per_expert.cpu().sum(dim=-1).tolist()
            recv_counts = parallel_tokens_per_expert.cpu().sum(dim=-1).tolist()
        parallel_x = all_to_all(x, recv_counts, send_counts, self.args.expert_parallel_group)
        parallel_x = self.mlp(parallel_x)
        x = all_to_all(parallel_x, send_counts, recv_counts, self.args.expert_parallel_group)
        return ops.padded_scatter(x, indices, bin_ids, bins, bins), tokens_per_expert.flatten()
