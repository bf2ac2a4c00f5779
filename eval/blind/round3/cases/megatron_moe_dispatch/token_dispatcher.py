# Modelled on megatron/core/transformer/moe/token_dispatcher.py MoEAlltoAllTokenDispatcher (core_r0.12).
import torch

from megatron.core.tensor_parallel import all_to_all
from megatron.core.transformer.moe.moe_utils import permute, unpermute

from .router import RoutingResult


class MoEAlltoAllTokenDispatcher:
    def __init__(self, num_local_experts, local_expert_indices, config, ep_group):
        self.config = config
        self.num_local_experts = num_local_experts
        self.local_expert_indices = local_expert_indices
        self.ep_group = ep_group
        self.ep_size = ep_group.size()
        self.shared_experts = None
        self.capacity = None

    def set_shared_experts(self, shared_experts):
        self.shared_experts = shared_experts

    def preprocess(self, routing: RoutingResult) -> torch.Tensor:
        routing_map = routing.routing_map
        num_local_tokens_per_expert = routing_map.sum(dim=0).long()
        self.drop_and_pad = self.config.moe_pad_expert_input_to_capacity and routing.grad_enabled
        if self.drop_and_pad:
            self.capacity = routing.probs.size(1)
            num_tokens_per_local_expert = torch.full(
                (self.num_local_experts,), self.capacity * self.ep_size, dtype=torch.long
            )
            self.input_splits = None
            self.output_splits = None
            return num_tokens_per_local_expert
        self.input_splits = num_local_tokens_per_expert.reshape(self.ep_size, self.num_local_experts).sum(axis=1)
        self.input_splits = self.input_splits.to(torch.device("cpu"), non_blocking=True).numpy()
        return num_local_tokens_per_expert

    def token_permutation(self, hidden_states: torch.Tensor, routing: RoutingResult):
        self.hidden_shape = hidden_states.shape
        hidden_states = hidden_states.view(-1, self.hidden_shape[-1])
        tokens_per_expert = self.preprocess(routing)

        overlap_shared = (
            self.shared_experts is not None and self.config.moe_shared_expert_overlap and routing.grad_enabled
        )
        if overlap_shared:
            self.shared_experts.pre_forward_comm(hidden_states.view(self.hidden_shape))

        permutated_local_input_tokens, self.reversed_local_input_permutation_mapping = permute(
            hidden_states, routing.routing_map, num_out_tokens=None, fused=self.config.moe_permute_fusion,
            drop_and_pad=self.drop_and_pad,
        )
        global_input_tokens = all_to_all(
            self.ep_group, permutated_local_input_tokens, self.output_splits, self.input_splits
        )
        if overlap_shared:
            self.shared_experts.linear_fc1_forward_and_act(global_input_tokens)
        elif self.shared_experts is not None:
            self.shared_output = self.shared_experts(hidden_states.view(self.hidden_shape))
        return global_input_tokens, tokens_per_expert
