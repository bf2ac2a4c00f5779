# SPDX-License-Identifier: Apache-2.0
"""FusedMoE layer forward, trimmed from vllm/model_executor/layers/fused_moe/layer.py."""
from typing import Optional

import torch

import vllm.envs as envs
from vllm.distributed import (
    get_dp_group,
    get_ep_group,
    tensor_model_parallel_all_reduce,
)
from vllm.model_executor.layers.fused_moe.fused_moe import fused_experts, fused_topk
from vllm.model_executor.layers.fused_moe.moe_torch_iterative import fused_moe as torch_iterative_moe


class FusedMoE(torch.nn.Module):

    def naive_multicast(self, x: torch.Tensor, cu_tokens_across_dp_cpu: torch.Tensor):
        assert len(x.shape) == 2
        buffer = torch.empty(
            (cu_tokens_across_dp_cpu[-1], x.size(1)), device=x.device, dtype=x.dtype
        )
        start = 0 if self.dp_rank == 0 else cu_tokens_across_dp_cpu[self.dp_rank - 1]
        end = cu_tokens_across_dp_cpu[self.dp_rank]
        buffer[start:end, :].copy_(x)
        for idx in range(self.dp_size):
            start = 0 if idx == 0 else cu_tokens_across_dp_cpu[idx - 1]
            end = cu_tokens_across_dp_cpu[idx]
            get_dp_group().broadcast(buffer[start:end, :], idx)
        return buffer

    def _experts(self, hidden_states: torch.Tensor, router_logits: torch.Tensor):
        topk_weights, topk_ids = fused_topk(
            hidden_states, router_logits, self.top_k, renormalize=self.renormalize
        )
        if self.use_triton_kernels and not torch.is_grad_enabled():
            # Triton grouped GEMM kernels write into preallocated buffers and have no autograd.
            return fused_experts(
                hidden_states, self.w13_weight, self.w2_weight, topk_weights, topk_ids, inplace=True
            )
        return torch_iterative_moe(
            hidden_states, self.w13_weight, self.w2_weight, router_logits, self.top_k, self.renormalize
        )

    def forward_impl_chunked(self, full_hidden_states: torch.Tensor, full_router_logits: torch.Tensor):
        full_final_hidden_states = torch.empty_like(full_hidden_states)
        moe_dp_chunk_size_per_rank = envs.VLLM_MOE_DP_CHUNK_SIZE
        num_tokens = full_hidden_states.size(0)
        for chunk_start in range(0, num_tokens, moe_dp_chunk_size_per_rank):
            chunk_end = min(chunk_start + moe_dp_chunk_size_per_rank, num_tokens)
            hidden_states = full_hidden_states[chunk_start:chunk_end, :]
            router_logits = full_router_logits[chunk_start:chunk_end, :]
            hidden_states, router_logits = get_ep_group().dispatch(hidden_states, router_logits)
            final_hidden_states = self._experts(hidden_states, router_logits)
            final_hidden_states = get_ep_group().combine(final_hidden_states)
            full_final_hidden_states[chunk_start:chunk_end, :].copy_(final_hidden_states)
        return full_final_hidden_states

    def forward_impl(self, hidden_states: torch.Tensor, router_logits: torch.Tensor,
                     cu_tokens_across_dp_cpu: Optional[torch.Tensor] = None):
        if self.dp_size > 1 and torch.is_inference_mode_enabled():
            return self.forward_impl_chunked(hidden_states, router_logits)

        if self.dp_size > 1:
            hidden_states = self.naive_multicast(hidden_states, cu_tokens_across_dp_cpu)
            router_logits = self.naive_multicast(router_logits, cu_tokens_across_dp_cpu)

        final_hidden_states = self._experts(hidden_states, router_logits)

        if self.dp_size > 1:
            start = 0 if self.dp_rank == 0 else cu_tokens_across_dp_cpu[self.dp_rank - 1]
            end = cu_tokens_across_dp_cpu[self.dp_rank]
            all_hidden_states = get_dp_group().all_reduce(final_hidden_states)
            final_hidden_states = all_hidden_states[start:end, :]

        if self.reduce_results and (self.tp_size > 1 or self.ep_size > 1):
            final_hidden_states = tensor_model_parallel_all_reduce(final_hidden_states)
        return final_hidden_states
