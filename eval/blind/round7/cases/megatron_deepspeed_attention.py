import math

import torch
import torch.nn.functional as F
from torch import nn

from megatron import get_args
from megatron.core import mpu, tensor_parallel
from megatron.model.fused_softmax import FusedScaleMaskSoftmax
from megatron.model.enums import AttnMaskType

try:
    from flash_attn.flash_attn_interface import flash_attn_varlen_func
except ImportError:
    flash_attn_varlen_func = None


class FlashSelfAttention(nn.Module):
    def __init__(self, causal=False, softmax_scale=None, attention_dropout=0.0):
        super().__init__()
        self.causal = causal
        self.softmax_scale = softmax_scale
        self.dropout_p = attention_dropout

    def forward(self, q, k, v):
        batch_size, seqlen_q = q.shape[0], q.shape[1]
        seqlen_k = k.shape[1]
        q, k, v = [x.reshape(-1, *x.shape[2:]) for x in (q, k, v)]
        cu_seqlens_q = torch.arange(0, (batch_size + 1) * seqlen_q, step=seqlen_q, dtype=torch.int32, device=q.device)
        cu_seqlens_k = torch.arange(0, (batch_size + 1) * seqlen_k, step=seqlen_k, dtype=torch.int32, device=q.device)
        dropout_p = self.dropout_p if torch.is_grad_enabled() else 0.0
        output = flash_attn_varlen_func(
            q, k, v, cu_seqlens_q, cu_seqlens_k, seqlen_q, seqlen_k, dropout_p,
            softmax_scale=self.softmax_scale, causal=self.causal and seqlen_q == seqlen_k,
        )
        return output.view(batch_size, seqlen_q, *output.shape[1:])


class ParallelAttention(nn.Module):
    def __init__(self, config, layer_number, core_attention, attn_mask_type=AttnMaskType.causal):
        super().__init__()
        args = get_args()
        self.layer_number = max(1, layer_number)
        self.attn_mask_type = attn_mask_type
        self.use_flash_attn = args.use_flash_attn and flash_attn_varlen_func is not None
        self.checkpoint_core_attention = config.recompute_granularity == "selective"
        self.core_attention = core_attention
        if self.use_flash_attn:
            self.core_attention_flash = FlashSelfAttention(causal=True, attention_dropout=config.attention_dropout)

    def _checkpointed_attention_forward(self, query_layer, key_layer, value_layer, attention_mask):
        def custom_forward(*inputs):
            return self.core_attention(inputs[0], inputs[1], inputs[2], inputs[3])
        return tensor_parallel.checkpoint(custom_forward, False, query_layer, key_layer, value_layer, attention_mask)

    def forward(self, query_layer, key_layer, value_layer, attention_mask):
        grad_on = torch.is_grad_enabled()
        use_flash = self.use_flash_attn and (grad_on or query_layer.shape[0] > 1)
        if not use_flash:
            if self.checkpoint_core_attention and grad_on:
                return self._checkpointed_attention_forward(query_layer, key_layer, value_layer, attention_mask)
            return self.core_attention(query_layer, key_layer, value_layer, attention_mask)
        q, k, v = [x.transpose(0, 1).contiguous() for x in (query_layer, key_layer, value_layer)]
        context = self.core_attention_flash(q, k, v)
        return context.transpose(0, 1).reshape(context.shape[1], context.shape[0], -1).contiguous()
