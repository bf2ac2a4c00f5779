# adapted from NVIDIA/Megatron-LM megatron/core/transformer/moe/moe_layer.py
from typing import Optional

import torch

from megatron.core import parallel_state, tensor_parallel
from megatron.core.transformer.module import MegatronModule
from megatron.core.transformer.spec_utils import build_module

from .router import TopKRouter
from .token_dispatcher import MoEAlltoAllTokenDispatcher


class MoELayer(MegatronModule):
    """Mixture of Experts layer."""

    def __init__(self, config, submodules=None, layer_number: Optional[int] = None, pg_collection=None):
        super().__init__(config)
        self.config = config
        self.submodules = submodules
        self.layer_number = layer_number
        self.num_local_experts = config.num_moe_experts // pg_collection.ep.size()
        self.local_expert_indices = list(range(self.num_local_experts))
        self.use_shared_expert = config.moe_shared_expert_intermediate_size is not None
        self.shared_expert_overlap = config.moe_shared_expert_overlap
        self.moe_layer_recompute = (
            config.recompute_granularity == 'selective' and "moe" in config.recompute_modules
        )
        self.attn_tp_group = pg_collection.tp

        # Initialize router.
        self.router = TopKRouter(config=self.config, pg_collection=pg_collection)

        # Initialize token dispatcher
        self.token_dispatcher = MoEAlltoAllTokenDispatcher(
            self.num_local_experts, self.local_expert_indices, config=self.config, pg_collection=pg_collection
        )

        # Initialize experts
        self.experts = build_module(self.submodules.experts, self.num_local_experts, self.config)

        # Initialize shared experts
        self.shared_experts = None
        if self.use_shared_expert:
            self.shared_experts = build_module(self.submodules.shared_experts, config=self.config)
            if self.shared_expert_overlap:
                self.token_dispatcher.set_shared_experts(self.shared_experts)

    def shared_experts_compute(self, hidden_states: torch.Tensor):
        """Computes the output of the shared experts when they are not owned by the dispatcher."""
        shared_expert_output = None
        if self.use_shared_expert and not self.shared_expert_overlap:
            shared_expert_output = self.shared_experts(hidden_states)
        return shared_expert_output

    def forward(self, hidden_states: torch.Tensor):
        """Forward pass for the MoE layer."""
        if self.training and self.attn_tp_group.size() > 1 and not self.config.sequence_parallel:
            raise ValueError(
                "During training, performance may degrade if MoE and tensor parallelism"
                "are enabled without also enabling sequence parallelism."
            )

        dispatch_opts = {
            "overlap_shared_expert": self.shared_expert_overlap and torch.is_grad_enabled(),
        }

        # MoE forward: route -> dispatch -> compute -> combine
        def custom_forward(hidden_states):
            shared_expert_output = self.shared_experts_compute(hidden_states)
            probs, routing_map = self.router(hidden_states)
            hidden_states, probs = self.token_dispatcher.dispatch_preprocess(
                hidden_states, routing_map, probs, **dispatch_opts
            )
            dispatched_input, probs = self.token_dispatcher.token_dispatch(hidden_states, probs)
            dispatched_input, tokens_per_expert, permuted_probs = self.token_dispatcher.dispatch_postprocess(
                dispatched_input, probs
            )
            expert_output, mlp_bias = self.experts(dispatched_input, tokens_per_expert, permuted_probs)
            output = self.token_dispatcher.combine_preprocess(expert_output)
            output = self.token_dispatcher.token_combine(output)
            output = self.token_dispatcher.combine_postprocess(output)
            if shared_expert_output is not None:
                output = output + shared_expert_output
            return output, mlp_bias

        if self.moe_layer_recompute:
            output, mlp_bias = tensor_parallel.checkpoint(custom_forward, False, hidden_states)
        else:
            output, mlp_bias = custom_forward(hidden_states)

        return output, mlp_bias
