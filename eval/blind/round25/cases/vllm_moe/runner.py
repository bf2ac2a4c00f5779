# adapted from vllm-project/vllm vllm/model_executor/layers/fused_moe/runner/default_moe_runner.py
import torch
from vllm.utils.torch_utils import aux_stream, current_stream

from .forward_flags import current_flags


class DefaultMoERunner:
    def forward(self, hidden_states, router_logits):
        flags = current_flags()
        if not flags.grad:
            router_logits = torch.ops.vllm.inference_fused_topk(router_logits, self.top_k)
        if flags.grad and self.shared_experts is not None:
            stream = aux_stream()
            stream.wait_stream(current_stream())
            with torch.cuda.stream(stream):
                shared_output = self.shared_experts(hidden_states)
            fused = self.quant_method.apply(layer=self.layer, x=hidden_states, router_logits=router_logits)
            current_stream().wait_stream(stream)
            return shared_output, fused
        return None, self.quant_method.apply(layer=self.layer, x=hidden_states, router_logits=router_logits)
