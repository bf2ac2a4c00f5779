# adapted from sgl-project/sglang python/sglang/srt/layers/logits_processor.py
"""Logits processing."""

import dataclasses
import logging
from typing import List, Optional, Union

import torch
from torch import nn

from sglang.srt.distributed import (
    get_tensor_model_parallel_world_size,
    tensor_model_parallel_all_gather,
)
from sglang.srt.layers.dp_attention import (
    attn_tp_all_gather,
    dp_gather_replicate,
    dp_scatter,
    get_attention_dp_size,
    get_attention_tp_size,
)
from sglang.srt.layers.vocab_parallel_embedding import VocabParallelEmbedding
from sglang.srt.managers.schedule_batch import global_server_args_dict
from sglang.srt.model_executor.forward_batch_info import ForwardBatch

from .logits_metadata import LogitsMetadata

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class LogitsProcessorOutput:
    # The logits of the next tokens.       shape: [#seq, vocab_size]
    next_token_logits: torch.Tensor
    # The last hidden layers
    hidden_states: Optional[torch.Tensor] = None


class LogitsProcessor(nn.Module):
    def __init__(self, config, skip_all_gather: bool = False, logit_scale: Optional[float] = None):
        super().__init__()
        self.config = config
        self.logit_scale = logit_scale
        self.use_attn_tp_group = global_server_args_dict["enable_dp_lm_head"]
        if self.use_attn_tp_group:
            self.attn_tp_size = get_attention_tp_size()
            self.do_tensor_parallel_all_gather = not skip_all_gather and self.attn_tp_size > 1
            self.do_tensor_parallel_all_gather_dp_attn = False
        else:
            self.do_tensor_parallel_all_gather = (
                not skip_all_gather and get_tensor_model_parallel_world_size() > 1
            )
            self.do_tensor_parallel_all_gather_dp_attn = (
                self.do_tensor_parallel_all_gather and get_attention_dp_size() != 1
            )
        self.final_logit_softcapping = getattr(self.config, "final_logit_softcapping", None)

    def forward(
        self,
        input_ids,
        hidden_states,
        lm_head: VocabParallelEmbedding,
        logits_metadata: Union[LogitsMetadata, ForwardBatch],
        aux_hidden_states: Optional[torch.Tensor] = None,
    ) -> LogitsProcessorOutput:
        if isinstance(logits_metadata, ForwardBatch):
            logits_metadata = LogitsMetadata.from_forward_batch(logits_metadata)

        if logits_metadata.forward_mode.is_decode_or_idle():
            pruned_states = hidden_states
        else:
            last_index = torch.cumsum(logits_metadata.extend_seq_lens, dim=0) - 1
            pruned_states = hidden_states[last_index]

        logits = self._get_logits(pruned_states, lm_head, logits_metadata)

        hidden_states_to_store: Optional[torch.Tensor] = None
        if logits_metadata.capture_hidden_mode.need_capture():
            hidden_states_to_store = pruned_states
            # the captured states are only consumed by the draft model; never keep the graph alive for them
            if logits_metadata.requires_grad_logits:
                hidden_states_to_store = hidden_states_to_store.detach()

        return LogitsProcessorOutput(next_token_logits=logits, hidden_states=hidden_states_to_store)

    def _get_logits(
        self,
        hidden_states: torch.Tensor,
        lm_head: VocabParallelEmbedding,
        logits_metadata: LogitsMetadata,
        embedding_bias: Optional[torch.Tensor] = None,
    ) -> torch.Tensor:
        """Get logits from hidden_states."""
        # gather over the attention-TP subgroup only when the trainer needs full-vocab logits
        use_attn_tp = self.use_attn_tp_group and logits_metadata.requires_grad_logits

        if self.do_tensor_parallel_all_gather_dp_attn:
            logits_metadata.compute_dp_attention_metadata(hidden_states)
            hidden_states, local_hidden_states = (
                logits_metadata.gathered_buffer,
                hidden_states.clone(),
            )
            dp_gather_replicate(hidden_states, local_hidden_states, logits_metadata)

        if hasattr(lm_head, "weight"):
            logits = torch.matmul(hidden_states.to(lm_head.weight.dtype), lm_head.weight.T)
        else:
            # GGUF models
            logits = lm_head.quant_method.apply(lm_head, hidden_states, embedding_bias)

        if self.logit_scale is not None:
            logits.mul_(self.logit_scale)

        if self.do_tensor_parallel_all_gather:
            if use_attn_tp:
                global_logits = torch.empty(
                    (self.config.vocab_size, logits.shape[0]),
                    device=logits.device,
                    dtype=logits.dtype,
                )
                global_logits = global_logits.T
                attn_tp_all_gather(list(global_logits.tensor_split(self.attn_tp_size, dim=-1)), logits)
                logits = global_logits
            else:
                logits = tensor_model_parallel_all_gather(logits)

        if self.do_tensor_parallel_all_gather_dp_attn:
            logits, global_logits = (
                torch.empty((local_hidden_states.shape[0], logits.shape[1]), device=logits.device, dtype=logits.dtype),
                logits,
            )
            dp_scatter(logits, global_logits, logits_metadata)

        logits = logits[:, : self.config.vocab_size].float()

        if self.final_logit_softcapping:
            logits.div_(self.final_logit_softcapping).tanh_().mul_(self.final_logit_softcapping)

        return logits
