# Modelled on megatron/core/transformer/dot_product_attention.py (Megatron-LM core_r0.9).
import math

import torch

from megatron.core import tensor_parallel
from megatron.core.fusions.fused_softmax import FusedScaleMaskSoftmax
from megatron.core.transformer.enums import AttnMaskType
from megatron.core.transformer.utils import attention_mask_func


class DotProductAttention(torch.nn.Module):
    grad_mode: bool = True

    def __init__(self, config, layer_number: int, attn_mask_type=AttnMaskType.causal):
        super().__init__()
        self.config = config
        self.layer_number = max(1, layer_number)
        self.hidden_size_per_attention_head = config.kv_channels
        self.attn_mask_type = attn_mask_type
        self.attention_dropout = torch.nn.Dropout(config.attention_dropout)

    def _scaling(self):
        norm_factor = math.sqrt(self.hidden_size_per_attention_head)
        coeff = None
        if self.config.apply_query_key_layer_scaling and self.grad_mode:
            coeff = self.layer_number
            norm_factor *= coeff
        return norm_factor, coeff

    def forward(self, query, key, value, attention_mask):
        norm_factor, coeff = self._scaling()
        scale_mask_softmax = FusedScaleMaskSoftmax(
            input_in_fp16=self.config.fp16, input_in_bf16=self.config.bf16, attn_mask_type=self.attn_mask_type,
            scaled_masked_softmax_fusion=self.config.masked_softmax_fusion, mask_func=attention_mask_func,
            softmax_in_fp32=self.config.attention_softmax_in_fp32, scale=coeff,
        )
        output_size = (query.size(1), query.size(2), query.size(0), key.size(0))
        query = query.reshape(output_size[2], output_size[0] * output_size[1], -1)
        key = key.view(output_size[3], output_size[0] * output_size[1], -1)
        matmul_result = torch.baddbmm(
            torch.empty(output_size[0] * output_size[1], output_size[2], output_size[3], dtype=query.dtype,
                        device=query.device),
            query.transpose(0, 1), key.transpose(0, 1).transpose(1, 2), beta=0.0, alpha=(1.0 / norm_factor),
        )
        attention_scores = matmul_result.view(*output_size)
        attention_probs = scale_mask_softmax(attention_scores, attention_mask)

        if self.grad_mode:
            with tensor_parallel.get_cuda_rng_tracker().fork():
                attention_probs = self.attention_dropout(attention_probs)

        value = value.view(value.size(0), output_size[0] * output_size[1], -1)
        attention_probs = attention_probs.view(output_size[0] * output_size[1], output_size[2], -1)
        context = torch.bmm(attention_probs, value.transpose(0, 1))
        return context.view(output_size[0], output_size[1], output_size[2], -1).permute(2, 0, 1, 3).contiguous()
