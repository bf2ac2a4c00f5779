# adapted from vllm-project/vllm vllm/model_executor/layers/fused_moe/layer.py
import torch

from vllm.distributed import get_dp_group, get_ep_group, tensor_model_parallel_all_reduce
from vllm.forward_context import ForwardContext, get_forward_context
from vllm.model_executor.custom_op import CustomOp


@CustomOp.register("fused_moe")
class FusedMoE(CustomOp):
    def __init__(self, num_experts, top_k, hidden_size, intermediate_size, renormalize=True,
                 reduce_results=False, dp_size=1, use_pplx_kernels=False, quant_method=None):
        super().__init__()
        self.global_num_experts = num_experts
        self.top_k = top_k
        self.hidden_size = hidden_size
        self.renormalize = renormalize
        self.reduce_results = reduce_results
        self.dp_size = dp_size
        self.use_pplx_kernels = use_pplx_kernels
        self.quant_method = quant_method
        self.tp_size = get_ep_group().world_size

    def forward_impl(self, hidden_states: torch.Tensor, router_logits: torch.Tensor):
        assert self.quant_method is not None
        assert torch.is_inference_mode_enabled() or not self.use_pplx_kernels, "pplx kernels have no backward"
        do_naive_dispatch_combine = self.dp_size > 1 and not torch.is_inference_mode_enabled()
        if do_naive_dispatch_combine:
            hidden_states, router_logits = get_ep_group().dispatch(hidden_states, router_logits)

        renormalize = self.renormalize and not torch.is_inference_mode_enabled()
        final_hidden_states = self.quant_method.apply(
            layer=self,
            x=hidden_states,
            router_logits=router_logits,
            top_k=self.top_k,
            renormalize=renormalize,
            global_num_experts=self.global_num_experts,
        )

        if do_naive_dispatch_combine:
            final_hidden_states = get_ep_group().combine(final_hidden_states)
        if self.reduce_results and (self.tp_size > 1 or self.dp_size > 1):
            final_hidden_states = tensor_model_parallel_all_reduce(final_hidden_states)
        return final_hidden_states

    def forward(self, hidden_states: torch.Tensor, router_logits: torch.Tensor):
        return self.forward_impl(hidden_states, router_logits)
