# Copyright (c) 2024, NVIDIA CORPORATION. All rights reserved.
"""All-to-all token dispatcher with shared-expert overlap (modelled on megatron/core/transformer/moe)."""
from typing import Optional

import torch

from megatron.core.tensor_parallel import all_to_all
from megatron.core.transformer.moe.moe_utils import permute, sort_chunks_by_idxs, unpermute


class MoEAlltoAllTokenDispatcher:

    def token_permutation(self, hidden_states: torch.Tensor, probs: torch.Tensor, routing_map: torch.Tensor,
                          inference_context: Optional[object] = None):
        self.hidden_shape = hidden_states.shape
        self.probs = probs
        self.routing_map = routing_map
        hidden_states = hidden_states.view(-1, self.hidden_shape[-1])
        tokens_per_expert = self.preprocess(self.routing_map)

        self._overlap_shared = self.shared_experts is not None and getattr(inference_context, "overlap_shared_expert", torch.is_grad_enabled())

        if self._overlap_shared:
            self.shared_experts.pre_forward_comm(hidden_states.view(self.hidden_shape))

        self.hidden_shape_before_permute = hidden_states.shape
        permutated_local_input_tokens, self.reversed_local_input_permutation_mapping = permute(
            hidden_states, routing_map, num_out_tokens=self.num_out_tokens, fused=self.config.moe_permute_fusion
        )
        global_input_tokens = all_to_all(
            self.ep_group, permutated_local_input_tokens, self.output_splits, self.input_splits
        )
        if self._overlap_shared:
            self.shared_experts.linear_fc1_forward_and_act(global_input_tokens)

        if self.num_local_experts > 1:
            global_input_tokens = sort_chunks_by_idxs(
                global_input_tokens,
                self.num_global_tokens_per_local_expert.ravel(),
                self.sort_input_by_local_experts,
            )
        return global_input_tokens, tokens_per_expert

    def token_unpermutation(self, hidden_states: torch.Tensor, bias: Optional[torch.Tensor] = None):
        assert bias is None, "Bias is not supported in MoEAlltoAllTokenDispatcher"
        if self.num_local_experts > 1:
            hidden_states = sort_chunks_by_idxs(
                hidden_states,
                self.num_global_tokens_per_local_expert.T.ravel(),
                self.restore_output_by_local_experts,
            )
        permutated_local_input_tokens = all_to_all(
            self.ep_group, hidden_states, self.input_splits, self.output_splits
        )
        if self._overlap_shared:
            self.shared_experts.linear_fc2_forward(permutated_local_input_tokens)
            self.shared_experts.post_forward_comm()

        output = unpermute(
            permutated_local_input_tokens,
            self.reversed_local_input_permutation_mapping,
            restore_shape=self.hidden_shape_before_permute,
            routing_map=self.routing_map,
            fused=self.config.moe_permute_fusion,
        )
        output = output.view(self.hidden_shape)
        if self._overlap_shared:
            shared_expert_output = self.shared_experts.get_output()
            output = output + shared_expert_output
        return output, None


class MoELayer(torch.nn.Module):

    def forward(self, hidden_states: torch.Tensor, inference_context=None):
        probs, routing_map = self.router(hidden_states)
        dispatched_input, tokens_per_expert = self.token_dispatcher.token_permutation(
            hidden_states, probs, routing_map, inference_context
        )
        expert_output, mlp_bias = self.experts(dispatched_input, tokens_per_expert)
        output, mlp_bias = self.token_dispatcher.token_unpermutation(expert_output, mlp_bias)
        if self.shared_experts is not None and not self.token_dispatcher._overlap_shared:
            output = output + self.shared_experts(hidden_states)
        return output, mlp_bias
