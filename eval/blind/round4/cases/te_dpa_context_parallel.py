# Modeled on TransformerEngine transformer_engine/pytorch/attention/dot_product_attention/
# dot_product_attention.py (DotProductAttention.forward, context-parallel branch) and
# dot_product_attention/utils.py (get_attention_backend).
from dataclasses import dataclass
from typing import List, Optional

import torch


@dataclass
class AttentionParams:
    qkv_dtype: torch.dtype = torch.bfloat16
    qkv_layout: str = "sbh3d"
    attention_dropout: float = 0.0
    context_parallel: bool = False
    fp8: bool = False
    needs_backward: bool = True


def get_attention_backend(params: AttentionParams):
    use_flash_attention_2 = True
    use_flash_attention_3 = params.fp8
    use_fused_attention = True
    # FA3's FP8 kernels have no backward: only usable when no backward can follow
    use_flash_attention_3 = use_flash_attention_3 and not params.needs_backward
    if params.context_parallel and params.qkv_layout.startswith("thd"):
        use_flash_attention_2 = False
    return use_flash_attention_2, use_flash_attention_3, use_fused_attention


class DotProductAttention(torch.nn.Module):
    def __init__(self, num_attention_heads, kv_channels, attention_dropout=0.0, cp_group=None,
                 cp_global_ranks: Optional[List[int]] = None, cp_comm_type="p2p"):
        super().__init__()
        self.num_attention_heads = num_attention_heads
        self.hidden_size_per_attention_head = kv_channels
        self.attention_dropout = attention_dropout
        self.cp_group = cp_group
        self.cp_global_ranks = cp_global_ranks
        self.cp_stream = torch.cuda.Stream()
        self.cp_comm_type = cp_comm_type

    def forward(self, query_layer, key_layer, value_layer, cu_seqlens_q=None, cu_seqlens_kv=None,
                max_seqlen_q=None, max_seqlen_kv=None, attn_mask_type="causal"):
        from transformer_engine.pytorch.attention.dot_product_attention.context_parallel import (
            attn_forward_func_with_cp,
        )
        context_parallel = self.cp_group is not None and torch.distributed.get_world_size(self.cp_group) > 1
        attention_params = AttentionParams(
            qkv_dtype=query_layer.dtype,
            attention_dropout=self.attention_dropout,
            context_parallel=context_parallel,
            needs_backward=torch.is_grad_enabled(),
        )
        use_fa2, use_fa3, use_fused = get_attention_backend(attention_params)
        if context_parallel:
            cp_stream = self.cp_stream if torch.is_grad_enabled() else torch.cuda.current_stream()
            return attn_forward_func_with_cp(
                self.training,
                query_layer, key_layer, value_layer,
                cu_seqlens_q, cu_seqlens_kv, max_seqlen_q, max_seqlen_kv,
                cu_seqlens_q, cu_seqlens_kv,
                self.attention_dropout if self.training else 0.0,
                self.cp_group, self.cp_global_ranks, cp_stream, self.cp_comm_type,
                attn_mask_type=attn_mask_type,
                use_flash_attn_3=use_fa3,
            )
        raise NotImplementedError
