"""All-to-all token dispatcher that overlaps shared-expert compute with EP communication."""
import torch

from megatron.core.tensor_parallel import all_to_all
from megatron.core.transformer.moe.moe_utils import permute, unpermute


class MoEAlltoAllTokenDispatcher:
    def __init__(self, num_local_experts, local_expert_indices, config, ep_group, shared_experts=None):
        self.config = config
        self.num_local_experts = num_local_experts
        self.local_expert_indices = local_expert_indices
        self.ep_group = ep_group
        self.shared_experts = shared_experts
        self.shared_expert_overlap = config.moe_shared_expert_overlap and shared_experts is not None
        self.input_splits = None
        self.output_splits = None
        self.hidden_shape = None

    def _overlap_shared(self) -> bool:
        return all(flag for flag in (self.shared_expert_overlap, torch.is_grad_enabled(), self.ep_group.size() > 1))

    def token_permutation(self, hidden_states, probs, routing_map):
        self.hidden_shape = hidden_states.shape
        hidden_states = hidden_states.view(-1, self.hidden_shape[-1])
        tokens_per_expert = routing_map.sum(dim=0)
        permutated_local_input_tokens, self.reversed_local_input_permutation_mapping = permute(
            hidden_states, routing_map
        )
        overlap = self._overlap_shared()
        if overlap:
            self.shared_experts.pre_forward_comm(hidden_states)
        global_input_tokens = all_to_all(
            self.ep_group, permutated_local_input_tokens, self.output_splits, self.input_splits
        )
        if overlap:
            self.shared_experts.linear_fc1_forward_and_act(global_input_tokens)
        elif self.shared_experts is not None:
            self.shared_output = self.shared_experts(hidden_states)
        return global_input_tokens, tokens_per_expert

    def token_unpermutation(self, hidden_states, bias=None):
        permutated_local_input_tokens = all_to_all(
            self.ep_group, hidden_states, self.input_splits, self.output_splits
        )
        output = unpermute(
            permutated_local_input_tokens, self.reversed_local_input_permutation_mapping,
            restore_shape=self.hidden_shape,
        )
        return output.view(self.hidden_shape), None
