"""All-to-all token dispatcher for expert parallelism (modelled on Megatron/DeepSpeed MoE dispatchers)."""
import math

import torch
import torch.distributed as dist

from megatron.core.tensor_parallel import all_to_all
from megatron.core.transformer.moe.moe_utils import permute, unpermute

from .config import MoEDispatcherConfig
from .routing import RoutingResult

try:
    from moe_inference_kernels import fused_permute_inference
except ImportError:
    fused_permute_inference = None


class AlltoAllTokenDispatcher:

    def __init__(self, config: MoEDispatcherConfig, ep_group: dist.ProcessGroup, shared_experts=None):
        self.config = config
        self.ep_group = ep_group
        self.ep_size = dist.get_world_size(ep_group)
        self.num_local_experts = config.num_experts // self.ep_size
        self.shared_experts = shared_experts
        self.comm_stream = torch.cuda.Stream()

    def _capacity(self, num_tokens: int, capacity_factor: float) -> int:
        capacity = math.ceil(num_tokens * self.config.topk / self.config.num_experts * capacity_factor)
        return max(capacity, self.config.min_capacity)

    def dispatch(self, hidden_states: torch.Tensor, routing: RoutingResult):
        hidden_states = hidden_states.view(-1, self.config.hidden_size)
        num_tokens = hidden_states.shape[0]

        capacity_factor = self.config.capacity_factor if routing.grad_enabled else self.config.eval_capacity_factor
        probs, indices = routing.probs, routing.indices
        if self.config.drop_tokens:
            capacity = self._capacity(num_tokens, capacity_factor)
            keep = torch.zeros_like(indices, dtype=torch.bool)
            for e in range(self.config.num_experts):
                pos = (indices == e).nonzero(as_tuple=False)[:capacity]
                keep[pos[:, 0], pos[:, 1]] = True
            probs = probs * keep
            indices = torch.where(keep, indices, torch.full_like(indices, -1))

        routing_map = torch.zeros(num_tokens, self.config.num_experts, dtype=torch.bool, device=indices.device)
        valid = indices >= 0
        routing_map[valid.nonzero()[:, 0], indices[valid]] = True

        if self.config.use_inference_fused_permute and fused_permute_inference is not None and not routing.grad_enabled:
            permuted, self._restore_map = fused_permute_inference(hidden_states, routing_map)
        else:
            permuted, self._restore_map = permute(hidden_states, routing_map)

        self.input_splits, self.output_splits = self._compute_splits(routing_map)

        a2a_stream = self.comm_stream if self.config.overlap_a2a_with_shared_expert and routing.grad_enabled else torch.cuda.current_stream()
        a2a_stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(a2a_stream):
            global_tokens = all_to_all(self.ep_group, permuted, self.output_splits, self.input_splits)
        shared_out = self.shared_experts(hidden_states) if self.shared_experts is not None else None
        torch.cuda.current_stream().wait_stream(a2a_stream)

        self._probs = probs
        self._routing_map = routing_map
        self._hidden_shape = hidden_states.shape
        return global_tokens, shared_out

    def combine(self, expert_output: torch.Tensor, shared_out=None):
        local_tokens = all_to_all(self.ep_group, expert_output, self.input_splits, self.output_splits)
        out = unpermute(local_tokens, self._restore_map, restore_shape=self._hidden_shape,
                        probs=self._probs, routing_map=self._routing_map)
        if shared_out is not None:
            out = out + shared_out
        return out

    def _compute_splits(self, routing_map: torch.Tensor):
        num_local_tokens_per_expert = routing_map.sum(dim=0)
        input_splits = num_local_tokens_per_expert.view(self.ep_size, self.num_local_experts).sum(dim=1)
        output_per_expert = torch.empty_like(num_local_tokens_per_expert)
        dist.all_to_all_single(output_per_expert, num_local_tokens_per_expert, group=self.ep_group)
        output_splits = output_per_expert.view(self.ep_size, self.num_local_experts).sum(dim=1)
        return input_splits.tolist(), output_splits.tolist()
