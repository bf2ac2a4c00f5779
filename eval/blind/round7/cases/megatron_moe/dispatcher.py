import torch

from megatron.core.tensor_parallel import all_to_all
from megatron.core.transformer.moe.moe_utils import permute, unpermute


class MoEAlltoAllTokenDispatcher:
    def __init__(self, num_local_experts, config, ep_group, shared_experts=None):
        self.config = config
        self.num_local_experts = num_local_experts
        self.ep_group = ep_group
        self.shared_experts = shared_experts
        self.shared_expert_overlap = config.moe_shared_expert_overlap and shared_experts is not None

    def token_permutation(self, hidden_states: torch.Tensor, routing):
        hidden_states = hidden_states.view(-1, hidden_states.shape[-1])
        overlap_shared = self.shared_expert_overlap and routing.needs_backward
        if overlap_shared:
            self.shared_experts.pre_forward_comm(hidden_states)
        self.hidden_shape_before_permute = hidden_states.shape
        permutated_input_tokens, self.reversed_input_permutation_mapping = permute(
            hidden_states,
            routing.routing_map,
            num_out_tokens=int(routing.routing_map.sum()),
            fused=self.config.moe_permute_fusion,
            keep_mapping_for_backward=routing.needs_backward,
        )
        if overlap_shared:
            self.shared_experts.linear_fc1_forward_and_act(hidden_states)
        global_input_tokens = all_to_all(self.ep_group, permutated_input_tokens, None, None)
        if overlap_shared:
            self.shared_experts.linear_fc2_forward(permutated_input_tokens)
        elif self.shared_experts is not None:
            self.shared_output = self.shared_experts(hidden_states)
        return global_input_tokens
