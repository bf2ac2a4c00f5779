# Copyright (c) 2025, NVIDIA CORPORATION. All rights reserved.
"""DeepEP-backed token dispatch for MoE (modelled on megatron/core/transformer/moe/token_dispatcher.py)."""
from typing import Callable, Optional, Tuple

import torch

from megatron.core.transformer.moe.fused_a2a import fused_combine, fused_dispatch, set_deepep_num_sms
from megatron.core.transformer.moe.moe_utils import permute, unpermute


class _DeepepManager:
    """Thin wrapper around DeepEP dispatch/combine."""

    def __init__(self, group, router_topk: int, num_experts: int, num_local_experts: int,
                 permute_fusion: bool = False, deepep_num_sms: int = 20):
        self.group = group
        self.router_topk = router_topk
        self.num_experts = num_experts
        self.num_local_experts = num_local_experts
        self.permute_fusion = permute_fusion
        self.handle = None
        set_deepep_num_sms(deepep_num_sms)

    def make_comm_fns(self) -> Tuple[Callable, Callable]:
        """Build the dispatch/combine closures for one forward of the MoE layer."""
        grad_enabled = torch.is_grad_enabled()

        def dispatch(hidden_states: torch.Tensor, token_indices: torch.Tensor, token_probs: torch.Tensor):
            hidden_states, dispatched_indices, dispatched_probs, num_tokens_per_expert, handle = fused_dispatch(
                hidden_states,
                token_indices,
                token_probs,
                self.num_experts,
                self.group,
                async_finish=grad_enabled, allocate_on_comm_stream=grad_enabled,
            )
            self.handle = handle
            self.tokens_per_expert = num_tokens_per_expert
            self.dispatched_indices = dispatched_indices
            self.dispatched_probs = dispatched_probs
            return hidden_states

        def combine(hidden_states: torch.Tensor, handle: Optional[object] = None):
            hidden_states, _ = fused_combine(
                hidden_states,
                self.group,
                handle if handle is not None else self.handle,
                async_finish=grad_enabled,
                allocate_on_comm_stream=False,
            )
            self.handle = None
            return hidden_states

        return dispatch, combine


class MoEFlexTokenDispatcher:

    def token_permutation(self, hidden_states, probs, routing_map):
        token_probs, token_indices = torch.topk(probs, self.router_topk, dim=-1)
        dispatch, combine = self._comm_manager.make_comm_fns()
        self._combine = combine
        hidden_states = dispatch(hidden_states.view(-1, self.hidden_shape[-1]), token_indices, token_probs)
        routing_map = self._comm_manager.get_permuted_routing_map()
        global_input_tokens, self.reversed_mapping_for_combine = permute(
            hidden_states, routing_map, num_out_tokens=sum(self._comm_manager.tokens_per_expert),
            fused=self.config.moe_permute_fusion,
        )
        return global_input_tokens, self._comm_manager.tokens_per_expert

    def token_unpermutation(self, hidden_states: torch.Tensor, bias: Optional[torch.Tensor] = None):
        assert bias is None, "Bias is not supported in MoEFlexTokenDispatcher"
        hidden_states = unpermute(hidden_states, self.reversed_mapping_for_combine,
                                  restore_shape=self.hidden_shape_before_permute,
                                  fused=self.config.moe_permute_fusion)
        hidden_states = self._combine(hidden_states)
        return hidden_states.view(self.hidden_shape), None
