# Modelled on Megatron-LM megatron/core/transformer/moe/moe_layer.py (MoELayer.forward)
import torch

from megatron.core import tensor_parallel
from megatron.core.transformer.module import MegatronModule

from .router import TopKRouter
from .token_dispatcher import DispatchMeta, MoEAlltoAllTokenDispatcher, MoEFlexTokenDispatcher


class MoELayer(MegatronModule):
    def __init__(self, config, submodules=None, layer_number=None, pg_collection=None):
        super().__init__(config=config)
        self.router = TopKRouter(config=config)
        self.experts = submodules.experts
        self.shared_experts = submodules.shared_experts
        self.moe_layer_recompute = config.recompute_granularity == "selective" and "moe" in config.recompute_modules
        if config.moe_token_dispatcher_type == "flex":
            self.token_dispatcher = MoEFlexTokenDispatcher(
                self.num_local_experts, self.local_expert_indices, config, pg_collection.ep
            )
        else:
            self.token_dispatcher = MoEAlltoAllTokenDispatcher(
                self.num_local_experts, self.local_expert_indices, config, pg_collection.ep,
                shared_experts=self.shared_experts if config.moe_shared_expert_overlap else None,
            )

    def forward(self, hidden_states: torch.Tensor):
        grad_enabled = torch.is_grad_enabled()

        def custom_forward(hidden_states):
            probs, routing_map = self.router(hidden_states)
            num_local_tokens = hidden_states.numel() // hidden_states.shape[-1]
            meta = DispatchMeta(grad_enabled=grad_enabled, num_local_tokens=num_local_tokens)
            dispatched_input, tokens_per_expert, permuted_probs = self.token_dispatcher.dispatch(
                hidden_states, probs, routing_map, meta
            )
            expert_output, mlp_bias = self.experts(dispatched_input, tokens_per_expert, permuted_probs)
            output = self.token_dispatcher.combine(expert_output, meta)
            if self.shared_experts is not None and not self.config.moe_shared_expert_overlap:
                output = output + self.shared_experts(hidden_states)
            return output, mlp_bias

        if self.moe_layer_recompute and grad_enabled:
            output, mlp_bias = tensor_parallel.checkpoint(custom_forward, False, hidden_states)
        else:
            output, mlp_bias = custom_forward(hidden_states)
        return output, mlp_bias
