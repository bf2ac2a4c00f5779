# Modelled on Megatron-LM megatron/core/transformer/moe/token_dispatcher.py and fused_a2a.py
from typing import NamedTuple, Optional

import torch

from megatron.core.tensor_parallel import all_to_all
from megatron.core.transformer.moe.fused_a2a import fused_combine, fused_dispatch
from megatron.core.transformer.moe.moe_utils import permute, unpermute


class DispatchMeta(NamedTuple):
    grad_enabled: bool
    num_local_tokens: int


class MoEAlltoAllTokenDispatcher:
    def __init__(self, num_local_experts, local_expert_indices, config, ep_group, shared_experts=None):
        self.config = config
        self.ep_group = ep_group
        self.num_local_experts = num_local_experts
        self.shared_experts = shared_experts
        self.input_splits = None
        self.output_splits = None

    def dispatch(self, hidden_states: torch.Tensor, probs: torch.Tensor, routing_map: torch.Tensor,
                 meta: DispatchMeta):
        self.hidden_shape = hidden_states.shape
        hidden_states = hidden_states.view(-1, self.hidden_shape[-1])
        self.tokens_per_expert = self.preprocess(routing_map)

        self.shared_expert_overlap = (
            self.shared_experts is not None and self.config.moe_shared_expert_overlap and meta.grad_enabled
        )
        self._shared_input = hidden_states.view(self.hidden_shape)
        if self.shared_expert_overlap:
            # shared-expert input all-gather runs on the comm stream, overlapped with the EP all-to-all
            self.shared_experts.pre_forward_comm(self._shared_input)

        permutated_local_input_tokens, permuted_probs, self.reversed_local_input_permutation_mapping = permute(
            hidden_states, routing_map, probs=probs, fused=self.config.moe_permute_fusion
        )
        global_input_tokens = all_to_all(
            self.ep_group, permutated_local_input_tokens, self.output_splits, self.input_splits
        )
        global_probs = all_to_all(self.ep_group, permuted_probs, self.output_splits, self.input_splits)
        if self.shared_expert_overlap:
            self.shared_experts.linear_fc1_forward_and_act(global_input_tokens)
        return global_input_tokens, self.tokens_per_expert, global_probs

    def combine(self, hidden_states: torch.Tensor, meta: DispatchMeta):
        permutated_local_input_tokens = all_to_all(
            self.ep_group, hidden_states, self.input_splits, self.output_splits
        )
        output = unpermute(
            permutated_local_input_tokens,
            self.reversed_local_input_permutation_mapping,
            restore_shape=torch.Size((meta.num_local_tokens, self.hidden_shape[-1])),
        )
        if self.shared_expert_overlap:
            self.shared_experts.post_forward_comm()
            output = output + self.shared_experts.get_output().view(output.shape)
        elif self.shared_experts is not None:
            output = output + self.shared_experts(self._shared_input).view(output.shape)
        return output.view(self.hidden_shape)


class MoEFlexTokenDispatcher:
    """DeepEP-backed dispatcher."""

    def __init__(self, num_local_experts, local_expert_indices, config, ep_group):
        self.config = config
        self.group = ep_group
        self.num_experts = config.num_moe_experts
        self.async_finish = config.moe_deepep_async_finish
        self.handle = None

    def dispatch(self, hidden_states: torch.Tensor, probs: torch.Tensor, routing_map: torch.Tensor,
                 meta: DispatchMeta):
        self.hidden_shape = hidden_states.shape
        token_probs, token_indices = torch.topk(probs, self.config.moe_router_topk, dim=-1)
        x = hidden_states.view(-1, self.hidden_shape[-1])
        match (self.async_finish, meta.grad_enabled):
            case (True, True):
                recv_x, recv_indices, recv_probs, tokens_per_expert, self.handle = fused_dispatch(
                    x, token_indices, token_probs.float(), self.num_experts, self.group,
                    async_finish=True, allocate_on_comm_stream=True,
                )
            case _:
                recv_x, recv_indices, recv_probs, tokens_per_expert, self.handle = fused_dispatch(
                    x, token_indices, token_probs.float(), self.num_experts, self.group,
                    async_finish=False, allocate_on_comm_stream=False,
                )
        return recv_x, tokens_per_expert, recv_probs

    def combine(self, hidden_states: torch.Tensor, meta: DispatchMeta):
        combined, _ = fused_combine(hidden_states, self.group, self.handle,
                                    async_finish=self.async_finish, allocate_on_comm_stream=self.async_finish)
        return combined.view(self.hidden_shape)
