# adapted from databricks/megablocks megablocks/layers/moe.py
from megablocks.layers import mpu
from megablocks.layers.all_to_all import all_to_all
import megablocks.ops as ops
import torch


class MoE(torch.nn.Module):

    def indices_and_bins(self, top_expert):
        top_expert = top_expert.int()
        bin_ids, indices = ops.sort(top_expert, self.sort_end_bit)
        tokens_per_expert = ops.histogram(top_expert, self.num_experts)
        bins = ops.inclusive_cumsum(tokens_per_expert, 0)
        bins = bins.view(1) if not len(bins.size()) else bins
        return indices, bin_ids, bins, tokens_per_expert

    def forward(self, x):
        sl, bs, hs = x.size()
        scores, expert_weights, top_experts = self.router(x)

        # Only track expert-weight grads if any expert parameter is trainable.
        if any(p.requires_grad for p in self.mlp.parameters()):
            expert_weights = expert_weights.float()

        top_experts = top_experts.chunk(self.args.moe_top_k, dim=-1)
        expert_weights = expert_weights.chunk(self.args.moe_top_k, dim=-1)

        if all((torch.is_grad_enabled(), self.args.moe_expert_model_parallelism)):
            outs = [self.parallel_forward_once(x, routing.squeeze()) for routing in top_experts]
        else:
            outs = [self.forward_once(x, routing.squeeze()) for routing in top_experts]
        x, tokens_per_expert = zip(*outs)
        x = sum([out * weight.view(-1, 1) for (out, weight) in zip(x, expert_weights)])
        return x.view(sl, bs, hs), self.bias
