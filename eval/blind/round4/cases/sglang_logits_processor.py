# Modeled on sglang python/sglang/srt/layers/logits_processor.py (LogitsProcessor._get_logits
# with dp-attention / enable_dp_lm_head gather groups).
from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn as nn


def get_tp_group():
    from sglang.srt.distributed import get_tp_group as _g
    return _g()


def get_attention_tp_group():
    from sglang.srt.layers.dp_attention import get_attention_tp_group as _g
    return _g()


@dataclass
class LogitsMetadata:
    forward_mode: str = "decode"
    extend_return_logprob: bool = False
    next_token_logits_buffer: Optional[torch.Tensor] = None


class LogitsProcessor(nn.Module):
    def __init__(self, config, skip_all_gather: bool = False, logit_scale: Optional[float] = None,
                 server_args: Optional[dict] = None):
        super().__init__()
        self.config = config
        self.logit_scale = logit_scale
        server_args = server_args or {}
        self.use_attn_tp_group = server_args.get("enable_dp_lm_head", False)
        self.tp_size = server_args.get("tp_size", 1)
        self.do_tensor_parallel_all_gather = not skip_all_gather and self.tp_size > 1
        self.final_logit_softcapping = getattr(config, "final_logit_softcapping", None)

    def _get_logits(self, hidden_states: torch.Tensor, lm_head, logits_metadata: LogitsMetadata,
                    embedding_bias: Optional[torch.Tensor] = None) -> torch.Tensor:
        logits = torch.matmul(hidden_states.to(lm_head.weight.dtype), lm_head.weight.T)
        if embedding_bias is not None:
            logits += embedding_bias
        if self.logit_scale is not None:
            logits.mul_(self.logit_scale)
        if self.do_tensor_parallel_all_gather:
            use_attn_group = getattr(self, "use_attn_tp_group", False) and torch.is_inference_mode_enabled()
            group = get_attention_tp_group() if use_attn_group else get_tp_group()
            logits = group.all_gather(logits)
        logits = logits[:, : self.config.vocab_size].float()
        if self.final_logit_softcapping:
            logits = torch.tanh(logits / self.final_logit_softcapping) * self.final_logit_softcapping
        return logits

    def forward(self, input_ids, hidden_states, lm_head, logits_metadata: LogitsMetadata):
        if logits_metadata.forward_mode == "decode":
            pruned_states = hidden_states
        else:
            pruned_states = hidden_states[-1:]
        return self._get_logits(pruned_states, lm_head, logits_metadata)
