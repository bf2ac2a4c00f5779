# adapted from NVIDIA/Megatron-LM megatron/core/transformer/moe/token_dispatcher.py (MoE layer driving router and dispatcher)
import torch

from megatron.core.transformer.moe.moe_utils import permute, unpermute

from .dispatcher import AlltoAllDispatcher
from .routing import topk_routing
from .state import moe_forward_scope


class MoELayer(torch.nn.Module):
    def __init__(self, config, ep_group, experts, layer_number):
        super().__init__()
        self.config = config
        self.layer_number = layer_number
        self.router_weight = torch.nn.Parameter(torch.empty(config.num_moe_experts, config.hidden_size))
        self.dispatcher = AlltoAllDispatcher(config, ep_group)
        self.experts = experts

    def forward(self, hidden_states: torch.Tensor):
        with moe_forward_scope(self.layer_number):
            shape = hidden_states.shape
            hidden_states = hidden_states.view(-1, shape[-1])
            logits = torch.nn.functional.linear(hidden_states, self.router_weight)
            probs, routing_map = topk_routing(logits, self.config.moe_router_topk)
            tokens, perm_probs, mapping = permute(hidden_states, routing_map, probs=probs)
            tokens, perm_probs = self.dispatcher.dispatch_all_to_all(tokens, perm_probs)
            expert_out = self.experts(tokens, perm_probs)
            output = unpermute(expert_out, mapping, restore_shape=hidden_states.shape, routing_map=routing_map)
        return output.view(shape)
