# adapted from vllm-project/vllm vllm/model_executor/layers/fused_moe/runner/default_moe_runner.py
from contextlib import nullcontext

import torch
from torch.utils.checkpoint import checkpoint
from vllm.utils.torch_utils import aux_stream, current_stream


class DefaultMoERunner:
    def forward(self, hidden_states, router_logits):
        if torch.is_grad_enabled():
            return checkpoint(self._forward, hidden_states, router_logits, use_reentrant=False)
        return self._forward(hidden_states, router_logits)

    def _forward(self, hidden_states, router_logits):
        shared_stream = aux_stream() if torch.is_grad_enabled() else None
        if shared_stream is not None and self.shared_experts is not None:
            shared_stream.wait_stream(current_stream())
            with torch.cuda.stream(shared_stream):
                shared_output = self.shared_experts(hidden_states)
        else:
            shared_output = None if self.shared_experts is None else self.shared_experts(hidden_states)
        fused_output = self.quant_method.apply(layer=self.layer, x=hidden_states, router_logits=router_logits)
        if shared_stream is not None:
            current_stream().wait_stream(shared_stream)
        return shared_output, fused_output
