# adapted from NVIDIA/Megatron-LM megatron/core/transformer/moe/token_dispatcher.py
from typing import Optional, Tuple

import torch

from megatron.core.tensor_parallel import all_to_all

from .moe_utils import permute, unpermute


class MoEAlltoAllTokenDispatcher:
    """AlltoAll-based token dispatcher."""

    def __init__(self, num_local_experts: int, local_expert_indices, config, pg_collection=None) -> None:
        self.config = config
        self.num_local_experts = num_local_experts
        self.local_expert_indices = local_expert_indices
        self.ep_group = pg_collection.ep
        self.ep_size = self.ep_group.size()
        self.num_experts = config.num_moe_experts
        self.shared_experts = None
        self._shared_overlapped = False
        self._shared_output = None
        self.input_splits = None
        self.output_splits = None

    def set_shared_experts(self, shared_experts):
        self.shared_experts = shared_experts

    def preprocess(self, routing_map: torch.Tensor) -> torch.Tensor:
        num_local_tokens_per_expert = routing_map.sum(dim=0).long()
        self.input_splits = (
            num_local_tokens_per_expert.reshape(self.ep_size, self.num_local_experts).sum(axis=1).to(torch.device("cpu"))
        ).numpy()
        num_global_tokens_per_expert = all_to_all(self.ep_group, num_local_tokens_per_expert.view(self.ep_size, -1))
        self.output_splits = num_global_tokens_per_expert.sum(axis=-1).to(torch.device("cpu")).numpy()
        return num_global_tokens_per_expert.sum(dim=0)

    def dispatch_preprocess(
        self,
        hidden_states: torch.Tensor,
        routing_map: torch.Tensor,
        probs: torch.Tensor,
        overlap_shared_expert: bool = False,
    ):
        """Preprocess hidden states for dispatching."""
        self.hidden_shape = hidden_states.shape
        self.probs = probs
        self.routing_map = routing_map
        assert probs.dim() == 2, "Expected 2D tensor for probs"
        assert routing_map.dim() == 2, "Expected 2D tensor for token2expert mask"
        assert routing_map.dtype == torch.bool, "Expected bool tensor for mask"
        hidden_states = hidden_states.view(-1, self.hidden_shape[-1])
        self.tokens_per_expert = self.preprocess(self.routing_map)

        if self.shared_experts is not None:
            if overlap_shared_expert:
                self.shared_experts.pre_forward_comm(hidden_states.view(self.hidden_shape))
                self._shared_overlapped = True
            else:
                self._shared_output = self.shared_experts(hidden_states.view(self.hidden_shape))
                self._shared_overlapped = False

        self.hidden_shape_before_permute = hidden_states.shape
        (
            permutated_local_input_tokens,
            permuted_probs,
            self.reversed_local_input_permutation_mapping,
        ) = permute(hidden_states, routing_map, probs=probs)
        return permutated_local_input_tokens, permuted_probs

    def token_dispatch(self, permutated_local_input_tokens, permuted_probs):
        global_input_tokens = all_to_all(
            self.ep_group, permutated_local_input_tokens, self.output_splits, self.input_splits
        )
        global_probs = all_to_all(self.ep_group, permuted_probs, self.output_splits, self.input_splits)
        return global_input_tokens, global_probs

    def dispatch_postprocess(self, global_input_tokens, global_probs):
        if self.shared_experts is not None and self._shared_overlapped:
            self.shared_experts.linear_fc1_forward_and_act(global_input_tokens)
        return global_input_tokens, self.tokens_per_expert, global_probs

    def combine_preprocess(self, hidden_states):
        return hidden_states

    def token_combine(self, hidden_states):
        return all_to_all(self.ep_group, hidden_states, self.input_splits, self.output_splits)

    def combine_postprocess(self, permutated_local_input_tokens):
        if self.shared_experts is not None and self._shared_overlapped:
            self.shared_experts.linear_fc2_forward(permutated_local_input_tokens)
            self.shared_experts.post_forward_comm()

        output = unpermute(
            permutated_local_input_tokens,
            self.reversed_local_input_permutation_mapping,
            restore_shape=self.hidden_shape_before_permute,
        )
        output = output.view(self.hidden_shape)

        if self.shared_experts is not None:
            if self._shared_overlapped:
                shared_expert_output = self.shared_experts.get_output()
            else:
                shared_expert_output = self._shared_output
            output = output + shared_expert_output
        return output
