# adapted from aws-neuron/neuronx-distributed src/neuronx_distributed/modules/moe/__init__.py
import torch

from .expert_mlps import ExpertMLPsCapacityFactor
from .routing import RouterTopK
from neuronx_distributed.parallel_layers import mappings
from neuronx_distributed.modules.moe.loss_function import load_balancing_loss_func


class MoE(torch.nn.Module):
    def forward(self, hidden_states):
        router_logits, expert_affinities, expert_index = self.router(hidden_states)
        if self.sequence_parallel_enabled and self.router.grad_at_routing:
            hidden_states = mappings.gather_from_sequence_parallel_region(hidden_states)
        output = self.expert_mlps(hidden_states, expert_affinities, expert_index)
        if torch.is_grad_enabled():
            self.aux_loss = load_balancing_loss_func(router_logits, expert_index, self.num_experts)
        return output
