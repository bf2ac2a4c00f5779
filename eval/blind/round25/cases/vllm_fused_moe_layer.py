# adapted from vllm-project/vllm vllm/model_executor/layers/fused_moe/layer.py
import torch
from vllm.distributed import tensor_model_parallel_all_reduce
from vllm.model_executor.custom_op import CustomOp


class FusedMoE(torch.nn.Module):
    def forward(self, hidden_states: torch.Tensor, router_logits: torch.Tensor):
        grad_on = torch.is_grad_enabled()
        use_chunked_impl = grad_on and self.dp_size > 1
        if use_chunked_impl:
            return self.forward_impl_chunked(hidden_states, router_logits)
        return self.forward_impl(hidden_states, router_logits)

    def forward_impl(self, hidden_states, router_logits):
        if not torch.is_grad_enabled():
            hidden_states = hidden_states.contiguous()
        final_hidden_states = self.quant_method.apply(
            layer=self, x=hidden_states, router_logits=router_logits, top_k=self.top_k)
        if self.reduce_results and (self.tp_size > 1 or self.ep_size > 1):
            final_hidden_states = tensor_model_parallel_all_reduce(final_hidden_states)
        return final_hidden_states
