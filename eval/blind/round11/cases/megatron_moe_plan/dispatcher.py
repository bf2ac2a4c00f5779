# Adapted from NVIDIA/Megatron-LM megatron/core/transformer/moe/token_dispatcher.py
# (MoEAlltoAllTokenDispatcher.preprocess / token_permutation).
import torch

from megatron.core.tensor_parallel import all_to_all
from megatron.core.transformer.moe.moe_utils import permute

from .plan import DispatchPlan, get_capacity


class MoEAlltoAllTokenDispatcher:
    def __init__(self, num_local_experts, local_expert_indices, config, ep_group):
        self.num_local_experts = num_local_experts
        self.local_expert_indices = local_expert_indices
        self.config = config
        self.ep_group = ep_group
        self.comm_stream = torch.cuda.Stream()

    def token_permutation(self, hidden_states, probs, routing_map, plan: DispatchPlan):
        self.hidden_shape = hidden_states.shape
        hidden_states = hidden_states.view(-1, self.hidden_shape[-1])
        num_tokens = hidden_states.shape[0]
        capacity = get_capacity(num_tokens, self.config.num_moe_experts, plan.capacity_factor)
        num_out_tokens = capacity * self.config.num_moe_experts if plan.pad_to_capacity else routing_map.sum()
        permutated_local_input_tokens, permuted_probs, self.reversed_input_permutation_mapping, _, _ = permute(
            hidden_states, routing_map, probs=probs, num_out_tokens=num_out_tokens,
            drop_and_pad=plan.pad_to_capacity,
        )
        if plan.overlap_a2a:
            self.comm_stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(self.comm_stream):
                global_input_tokens = all_to_all(
                    self.ep_group, permutated_local_input_tokens, self.output_splits, self.input_splits
                )
            torch.cuda.current_stream().wait_stream(self.comm_stream)
        else:
            global_input_tokens = all_to_all(
                self.ep_group, permutated_local_input_tokens, self.output_splits, self.input_splits
            )
        return global_input_tokens, permuted_probs
