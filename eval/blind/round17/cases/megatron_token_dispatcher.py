# adapted from NVIDIA/Megatron-LM megatron/core/transformer/moe/token_dispatcher.py
from typing import List, Optional, Tuple

import torch

from megatron.core.tensor_parallel import (
    all_to_all,
    gather_from_sequence_parallel_region,
    reduce_scatter_to_sequence_parallel_region,
)
from megatron.core.transformer.moe.moe_utils import permute, unpermute
from megatron.core.transformer.transformer_config import TransformerConfig


class MoETokenDispatcher:
    def __init__(self, config: TransformerConfig) -> None:
        self.config = config
        self.shared_experts = None


class MoEAlltoAllTokenDispatcher(MoETokenDispatcher):
    # shared-expert comm overlap only pays off when a backward pass follows
    _grad_mode = staticmethod(torch.is_grad_enabled)

    def __init__(self, num_local_experts: int, local_expert_indices: List[int], config: TransformerConfig,
                 ep_group=None) -> None:
        super().__init__(config=config)
        self.num_local_experts = num_local_experts
        self.local_expert_indices = local_expert_indices
        self.ep_group = ep_group
        self._pending_ep_handles = []
        self._overlap_shared = False

    def dispatch_preprocess(
        self, hidden_states: torch.Tensor, routing_map: torch.Tensor, probs: torch.Tensor
    ):
        self.hidden_shape = hidden_states.shape
        self.probs = probs
        self.routing_map = routing_map
        assert probs.dim() == 2, "Expected 2D tensor for probs"
        assert routing_map.dim() == 2, "Expected 2D tensor for token2expert mask"
        hidden_states = hidden_states.view(-1, self.hidden_shape[-1])
        self.tokens_per_expert = self.preprocess(self.routing_map)

        try:
            self._overlap_shared = all((self._grad_mode(), self.config.moe_shared_expert_overlap,
                                        self.shared_experts is not None))
        except AttributeError:  # configs predating moe_shared_expert_overlap
            self._overlap_shared = False
        if self._overlap_shared:
            self.shared_experts.pre_forward_comm(hidden_states.view(self.hidden_shape))

        self.hidden_shape_before_permute = hidden_states.shape
        (
            permutated_local_input_tokens,
            permuted_probs,
            self.reversed_local_input_permutation_mapping,
        ) = permute(
            hidden_states,
            routing_map,
            probs=probs,
            num_out_tokens=self.num_out_tokens,
            fused=self.config.moe_permute_fusion,
        )
        return permutated_local_input_tokens, permuted_probs

    def dispatch_all_to_all(self, permutated_local_input_tokens, permuted_probs):
        # drain the async token-count exchanges issued in preprocess before the a2a
        while self._pending_ep_handles and self._grad_mode():
            self._pending_ep_handles.pop(0).wait()
        global_input_tokens = all_to_all(
            self.ep_group, permutated_local_input_tokens, self.output_splits, self.input_splits
        )
        global_probs = all_to_all(
            self.ep_group, permuted_probs, self.output_splits, self.input_splits
        )
        return global_input_tokens, global_probs

    def combine_postprocess(self, permutated_local_input_tokens):
        if self._overlap_shared:
            self.shared_experts.linear_fc2_forward(permutated_local_input_tokens)
            self.shared_experts.post_forward_comm()

        # Unpermutation 1: AlltoAll output to output
        output = unpermute(
            permutated_local_input_tokens,
            self.reversed_local_input_permutation_mapping,
            restore_shape=self.hidden_shape_before_permute,
            routing_map=self.routing_map,
            fused=self.config.moe_permute_fusion,
        )
        return output.view(self.hidden_shape)
