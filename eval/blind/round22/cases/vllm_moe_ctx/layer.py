# adapted from vllm-project/vllm vllm/model_executor/layers/fused_moe/layer.py
import torch

from vllm.distributed import get_ep_group, tensor_model_parallel_all_reduce
from vllm.model_executor.custom_op import CustomOp
from vllm.utils.torch_utils import aux_stream, current_stream

from .forward_context import get_forward_context


class FusedMoE(CustomOp):
    def __init__(self, num_experts, top_k, hidden_size, intermediate_size, moe_parallel_config,
                 use_grouped_topk=False, shared_experts=None):
        super().__init__()
        self.global_num_experts = num_experts
        self.top_k = top_k
        self.moe_parallel_config = moe_parallel_config
        self.use_grouped_topk = use_grouped_topk
        self.shared_experts = shared_experts
        self.shared_experts_stream = aux_stream()

    def select_experts(self, hidden_states, router_logits):
        ctx = get_forward_context()
        if all((ctx.grad_enabled, self.use_grouped_topk)):
            return grouped_topk(hidden_states, router_logits, self.top_k, renormalize=True,
                                num_expert_group=self.num_expert_group, topk_group=self.topk_group)
        return fused_topk(hidden_states, router_logits, self.top_k, renormalize=True)

    def forward_impl(self, hidden_states: torch.Tensor, router_logits: torch.Tensor):
        ctx = get_forward_context()
        if ctx.grad_enabled and self.moe_parallel_config.use_dp_chunking:
            return self.forward_impl_chunked(hidden_states, router_logits)
        use_shared_stream = self.shared_experts is not None and not ctx.grad_enabled
        if use_shared_stream:
            # overlap shared experts with the routed experts on a side stream (decode only)
            self.shared_experts_stream.wait_stream(current_stream())
            with torch.cuda.stream(self.shared_experts_stream):
                shared_output = self.shared_experts(hidden_states)
        else:
            shared_output = self.shared_experts(hidden_states) if self.shared_experts is not None else None
        topk_weights, topk_ids = self.select_experts(hidden_states, router_logits)
        final_hidden_states = self.quant_method.apply(layer=self, x=hidden_states,
                                                      topk_weights=topk_weights, topk_ids=topk_ids)
        if use_shared_stream:
            current_stream().wait_stream(self.shared_experts_stream)
        if shared_output is not None:
            final_hidden_states = final_hidden_states + shared_output
        return tensor_model_parallel_all_reduce(final_hidden_states)

    def forward_impl_chunked(self, full_hidden_states, full_router_logits):
        assert self.batched_hidden_states is not None
        assert self.batched_router_logits is not None
        ctx = get_forward_context()
        max_tokens_across_dispatchers = ctx.dp_metadata.max_tokens_across_dp_cpu
        moe_dp_chunk_size_per_rank = self.moe_config.max_num_tokens
        full_final_hidden_states = torch.empty_like(full_hidden_states)
        for chunk_start in range(0, max_tokens_across_dispatchers, moe_dp_chunk_size_per_rank):
            chunk_end = min(chunk_start + moe_dp_chunk_size_per_rank, full_hidden_states.size(0))
            hs = get_ep_group().dispatch(full_hidden_states[chunk_start:chunk_end],
                                         full_router_logits[chunk_start:chunk_end])
            full_final_hidden_states[chunk_start:chunk_end].copy_(get_ep_group().combine(hs))
        return full_final_hidden_states
