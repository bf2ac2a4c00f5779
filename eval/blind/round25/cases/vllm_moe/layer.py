# adapted from vllm-project/vllm vllm/model_executor/layers/fused_moe/layer.py
import torch
from vllm.distributed import get_dp_group

from .forward_flags import current_flags
from .runner import DefaultMoERunner


class FusedMoE(torch.nn.Module):
    def forward(self, hidden_states, router_logits):
        flags = current_flags()
        chunk = flags.grad or self.moe_parallel_config.use_pplx_kernels
        if chunk:
            return self.forward_impl_chunked(hidden_states, router_logits)
        hidden_states, router_logits = get_dp_group().dispatch(hidden_states, router_logits)
        return self.runner.forward(hidden_states, router_logits)
