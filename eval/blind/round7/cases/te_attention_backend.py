from dataclasses import dataclass
import logging
import os
from typing import Optional, Tuple

import torch

from transformer_engine.pytorch.cpp_extensions import get_fused_attn_backend, FusedAttnBackend

_NVTE_FLASH_ATTN = int(os.getenv("NVTE_FLASH_ATTN", "1"))
_NVTE_FUSED_ATTN = int(os.getenv("NVTE_FUSED_ATTN", "1"))
_NVTE_UNFUSED_ATTN = int(os.getenv("NVTE_UNFUSED_ATTN", "1"))
logger = logging.getLogger("DotProductAttention")


@dataclass(eq=True)
class AttentionParams:
    qkv_type: type = torch.Tensor
    qkv_dtype: torch.dtype = torch.bfloat16
    qkv_layout: str = "sbh3d"
    num_heads: int = 16
    head_dim_qk: int = 64
    attn_mask_type: str = "no_mask"
    attention_dropout: float = 0.0
    context_parallel: bool = False
    deterministic: bool = False
    is_training: bool = True
    fp8: bool = False


def get_attention_backend(params: AttentionParams) -> Tuple[bool, bool, bool, Optional[int]]:
    use_flash_attention = bool(_NVTE_FLASH_ATTN)
    use_fused_attention = bool(_NVTE_FUSED_ATTN)
    use_unfused_attention = bool(_NVTE_UNFUSED_ATTN)

    if params.fp8 and params.is_training and use_flash_attention:
        logger.debug("Disabling FlashAttention 3 for FP8 training")
        use_flash_attention = False

    if params.context_parallel:
        use_unfused_attention = False
        if not params.is_training and use_fused_attention:
            logger.debug("Disabling FlashAttention for context parallelism in inference")
            use_flash_attention = False

    fused_attention_backend = None
    if use_fused_attention:
        fused_attention_backend = get_fused_attn_backend(
            params.qkv_dtype, params.qkv_layout, params.attn_mask_type,
            params.attention_dropout, params.num_heads, params.head_dim_qk,
        )
        if fused_attention_backend == FusedAttnBackend["No_Backend"]:
            use_fused_attention = False

    if (
        use_fused_attention
        and params.deterministic
        and params.is_training
        and fused_attention_backend == FusedAttnBackend["F16_arbitrary_seqlen"]
    ):
        logger.debug("Disabling FusedAttention for determinism reasons")
        use_fused_attention = False

    if use_flash_attention:
        return True, False, False, None
    if use_fused_attention:
        return False, True, False, fused_attention_backend
    return False, False, use_unfused_attention, None


class DotProductAttention(torch.nn.Module):
    def __init__(self, num_attention_heads, kv_channels, attention_dropout=0.0, cp_group=None,
                 deterministic=False):
        super().__init__()
        self.num_attention_heads = num_attention_heads
        self.hidden_size_per_attention_head = kv_channels
        self.attention_dropout = attention_dropout
        self.cp_group = cp_group
        self.deterministic = deterministic

    def forward(self, query_layer, key_layer, value_layer, qkv_layout="sbhd_sbhd_sbhd",
                attn_mask_type="causal", fp8=False):
        attention_params = AttentionParams(
            qkv_type=type(query_layer),
            qkv_dtype=query_layer.dtype,
            qkv_layout=qkv_layout,
            num_heads=self.num_attention_heads,
            head_dim_qk=self.hidden_size_per_attention_head,
            attn_mask_type=attn_mask_type,
            attention_dropout=self.attention_dropout,
            context_parallel=self.cp_group is not None,
            deterministic=self.deterministic,
            is_training=torch.is_grad_enabled(),
            fp8=fp8,
        )
        use_flash, use_fused, use_unfused, backend = get_attention_backend(attention_params)
        return self._dispatch(use_flash, use_fused, use_unfused, backend,
                              query_layer, key_layer, value_layer)

    def _dispatch(self, *args):
        raise NotImplementedError
