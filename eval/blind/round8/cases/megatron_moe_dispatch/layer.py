import torch

from .dispatcher import MoEAlltoAllTokenDispatcher
from .routing import route_tokens


class MoELayer(torch.nn.Module):

    def __init__(self, config, router_weight, experts, ep_group, shared_experts=None, layer_number=0):
        super().__init__()
        self.config = config
        self.router_weight = router_weight
        self.experts = experts
        self.layer_number = layer_number
        self.dispatcher = MoEAlltoAllTokenDispatcher(config, ep_group, shared_experts)

    def forward(self, hidden_states):
        fwd_ctx = {"grad": torch.is_grad_enabled(), "layer": self.layer_number}
        flat = hidden_states.view(-1, hidden_states.shape[-1])
        logits = torch.nn.functional.linear(flat, self.router_weight)
        probs, routing_map = route_tokens(logits, self.config.moe_router_topk, self.config, fwd_ctx)
        tokens, shared_out = self.dispatcher.dispatch(flat, routing_map, fwd_ctx)
        expert_out = self.dispatcher.combine(self.experts(tokens))
        out = torch.zeros_like(flat)
        out[routing_map.any(dim=-1)] = expert_out * probs.sum(dim=-1, keepdim=True)[routing_map.any(dim=-1)]
        if shared_out is not None:
            out = out + shared_out
        return out.view_as(hidden_states)
