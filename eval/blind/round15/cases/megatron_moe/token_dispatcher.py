# adapted from NVIDIA/Megatron-LM megatron/core/transformer/moe/token_dispatcher.py
from abc import abstractmethod
from typing import List, Optional

import torch

from megatron.core.tensor_parallel import (
    all_to_all,
    gather_from_sequence_parallel_region,
    reduce_scatter_to_sequence_parallel_region,
)
from megatron.core.transformer.moe.shared_experts import SharedExpertMLP
from megatron.core.transformer.transformer_config import TransformerConfig

from .moe_utils import get_capacity, permute, shared_expert_overlap_active, unpermute


class MoETokenDispatcher:
    """
    MoE Token Dispatcher
    """

    def __init__(self, config: TransformerConfig, model_comm_pgs=None) -> None:
        self.config = config
        self.shared_experts: Optional[SharedExpertMLP] = None
        self.ep_group = model_comm_pgs.ep_group
        self.tp_group = model_comm_pgs.expt_tp_group
        self.tp_ep_group = model_comm_pgs.tp_ep_group
        self.tp_size = self.tp_group.size()
        self.tp_rank = self.tp_group.rank()
        self.ep_size = self.ep_group.size()

    @abstractmethod
    def token_permutation(self, tokens: torch.Tensor, probs: torch.Tensor, routing_map: torch.Tensor):
        raise NotImplementedError("Dispatch function not implemented.")

    @abstractmethod
    def token_unpermutation(self, expert_output: torch.Tensor, bias: torch.Tensor = None):
        raise NotImplementedError("Restore function not implemented.")

    def set_shared_experts(self, shared_experts):
        """Set shared expert to the dispatcher."""
        assert self.config.moe_shared_expert_overlap
        self.shared_experts = shared_experts


class MoEAlltoAllTokenDispatcher(MoETokenDispatcher):
    """
    AlltoAll-based token dispatcher.

    The workflow of AlltoAll token dispatcher is as follows:
    (1) preprocess(): calculate necessary metadata for communication and permute
    (2) token_permutation(): permute->A2A(EP)->AG(TP)->sort_chunk(if num_local_experts>1)
    (3) token_unpermutation(): sort_chunk(if num_local_experts>1)->RS(TP)->A2A(EP)->unpermute
    """

    def __init__(self, num_local_experts: int, local_expert_indices: List[int], config: TransformerConfig, model_comm_pgs=None) -> None:
        super().__init__(config=config, model_comm_pgs=model_comm_pgs)
        self.num_local_experts = num_local_experts
        self.num_experts = config.num_moe_experts
        self.local_expert_indices = local_expert_indices
        self.input_splits = None
        self.output_splits = None
        self.drop_and_pad = self.config.moe_pad_expert_input_to_capacity
        self.capacity = None
        self.shared_experts = None
        self.comm_stream = torch.cuda.Stream()

    def preprocess(self, routing_map: torch.Tensor) -> torch.Tensor:
        if self.drop_and_pad:
            num_tokens = routing_map.size(0) * self.config.moe_router_topk
            self.capacity = get_capacity(
                num_tokens=num_tokens,
                num_experts=self.num_experts,
                capacity_factor=self.config.moe_expert_capacity_factor,
            )
            self.num_out_tokens = self.capacity * self.num_experts
            num_tokens_per_local_expert = torch.full(
                (self.num_local_experts,), self.capacity * self.tp_size * self.ep_size, dtype=torch.long
            )
            return num_tokens_per_local_expert

        num_local_tokens_per_expert = routing_map.sum(dim=0).long()
        self.num_out_tokens = routing_map.size(0) * self.config.moe_router_topk
        if self.ep_size > 1 or self.tp_size > 1:
            self.input_splits = num_local_tokens_per_expert.reshape(self.ep_size, self.num_local_experts).sum(axis=1).to(torch.device("cpu")).numpy()
            num_global_tokens_per_expert = gather_from_sequence_parallel_region(
                num_local_tokens_per_expert, group=self.tp_ep_group
            ).reshape(self.ep_size, self.tp_size, self.num_experts)
            self.num_global_tokens_per_local_expert = num_global_tokens_per_expert[
                :, :, self.local_expert_indices[0] : self.local_expert_indices[-1] + 1
            ]
            self.output_splits = self.num_global_tokens_per_local_expert.sum(axis=-1).to(torch.device("cpu")).numpy()
            num_tokens_per_local_expert = self.num_global_tokens_per_local_expert.sum(dim=(0, 1))
        else:
            num_tokens_per_local_expert = num_local_tokens_per_expert
        return num_tokens_per_local_expert

    def token_permutation(self, hidden_states: torch.Tensor, probs: torch.Tensor, routing_map: torch.Tensor):
        self.hidden_shape = hidden_states.shape
        self.probs = probs
        self.routing_map = routing_map
        assert probs.dim() == 2, "Expected 2D tensor for probs"
        assert routing_map.dim() == 2, "Expected 2D tensor for token2expert mask"
        hidden_states = hidden_states.view(-1, self.hidden_shape[-1])
        tokens_per_expert = self.preprocess(self.routing_map)

        overlap_shared = shared_expert_overlap_active(self.config)
        if self.shared_experts is not None and overlap_shared:
            self.comm_stream.wait_stream(torch.cuda.current_stream())
            self.shared_experts.pre_forward_comm(hidden_states.view(self.hidden_shape))

        self.hidden_shape_before_permute = hidden_states.shape
        permutated_local_input_tokens, self.reversed_local_input_permutation_mapping = permute(
            hidden_states, routing_map, num_out_tokens=self.num_out_tokens
        )

        global_input_tokens = all_to_all(
            self.ep_group, permutated_local_input_tokens, self.output_splits, self.input_splits
        )
        if self.shared_experts is not None:
            self.shared_experts.linear_fc1_forward_and_act(global_input_tokens)

        if self.tp_size > 1:
            global_input_tokens = gather_from_sequence_parallel_region(
                global_input_tokens, group=self.tp_group, output_split_sizes=None
            )
        return global_input_tokens, tokens_per_expert

    def token_unpermutation(self, hidden_states: torch.Tensor, bias: Optional[torch.Tensor] = None):
        assert bias is None, "Bias is not supported in MoEAlltoAllTokenDispatcher"
        if self.tp_size > 1:
            hidden_states = reduce_scatter_to_sequence_parallel_region(hidden_states, group=self.tp_group)
        permutated_local_input_tokens = all_to_all(self.ep_group, hidden_states, self.input_splits, self.output_splits)
        if self.shared_experts is not None:
            self.shared_experts.linear_fc2_forward(permutated_local_input_tokens)
            self.shared_experts.post_forward_comm()
        output = unpermute(
            permutated_local_input_tokens,
            self.reversed_local_input_permutation_mapping,
            restore_shape=self.hidden_shape_before_permute,
            probs=self.probs,
            routing_map=self.routing_map,
        )
        output = output.view(self.hidden_shape)
        if self.shared_experts is not None:
            shared_expert_output = self.shared_experts.get_output()
            output = output + shared_expert_output
        return output, None
