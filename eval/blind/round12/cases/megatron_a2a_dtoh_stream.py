# adapted from NVIDIA/Megatron-LM megatron/core/transformer/moe/token_dispatcher.py
import torch

from megatron.core.tensor_parallel import all_to_all
from megatron.core.transformer.moe.moe_utils import maybe_move_tensor_to_cpu, permute


class MoEAlltoAllTokenDispatcher:
    def __init__(self, config, ep_group, num_local_experts):
        self.config = config
        self.ep_group = ep_group
        self.num_local_experts = num_local_experts
        self.drop_and_pad = config.moe_pad_expert_input_to_capacity
        self.cuda_dtoh_stream = torch.cuda.Stream()
        self.cuda_dtoh_point = "before_permutation_1"
        self.input_splits = None
        self.output_splits = None
        self.num_out_tokens = None
        self.d2h_event = None

    def _maybe_dtoh_and_synchronize(self, point: str, tokens_per_expert: torch.Tensor = None) -> torch.Tensor:
        if not self.drop_and_pad and point == self.cuda_dtoh_point:
            if (grad_on := torch.is_grad_enabled()) and torch.cuda.current_stream() != self.cuda_dtoh_stream:
                self.cuda_dtoh_stream.wait_stream(torch.cuda.current_stream())
            stream = self.cuda_dtoh_stream if grad_on else torch.cuda.current_stream()
            with torch.cuda.stream(stream):
                tokens_per_expert = maybe_move_tensor_to_cpu(tokens_per_expert, record_stream=True)
                self.input_splits = maybe_move_tensor_to_cpu(self.input_splits, as_numpy=True)
                self.output_splits = maybe_move_tensor_to_cpu(self.output_splits, as_numpy=True)
                self.num_out_tokens = maybe_move_tensor_to_cpu(self.num_out_tokens)
            self.d2h_event = stream.record_event()
        if self.d2h_event is not None:
            self.d2h_event.synchronize()
        return tokens_per_expert

    def dispatch_preprocess(self, hidden_states, routing_map, probs):
        self.hidden_shape = hidden_states.shape
        self.routing_map = routing_map
        hidden_states = hidden_states.view(-1, self.hidden_shape[-1])
        self.tokens_per_expert = routing_map.sum(dim=0)
        self.tokens_per_expert = self._maybe_dtoh_and_synchronize("before_permutation_1", self.tokens_per_expert)
        permutated_local_input_tokens, permuted_probs, self.reversed_mapping = permute(
            hidden_states, routing_map, probs=probs, num_out_tokens=self.num_out_tokens,
            fused=self.config.moe_permute_fusion, drop_and_pad=self.drop_and_pad,
        )
        return permutated_local_input_tokens, permuted_probs

    def dispatch_all_to_all(self, permutated_local_input_tokens, permuted_probs):
        global_input_tokens = all_to_all(
            self.ep_group, permutated_local_input_tokens, self.output_splits, self.input_splits
        )
        global_probs = all_to_all(self.ep_group, permuted_probs, self.output_splits, self.input_splits)
        return global_input_tokens, global_probs
