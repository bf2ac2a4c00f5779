# adapted from aws-neuron/neuronx-distributed src/neuronx_distributed/modules/moe/__init__.py
import torch

from .routing import routing_grad_mode


class ExpertMLPsCapacityFactor(torch.nn.Module):
    def forward(self, hidden_states, expert_affinities, expert_index):
        drop_tokens = routing_grad_mode() and self.capacity_factor is not None
        if drop_tokens:
            expert_capacity = int(self.capacity_factor * hidden_states.shape[0] / self.num_experts)
        else:
            expert_capacity = hidden_states.shape[0]
        return self.mlp_op(hidden_states, expert_affinities, expert_index, expert_capacity)
