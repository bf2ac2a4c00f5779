from typing import List, Optional, Union

import torch
import torch.distributed as dist

from transformer_engine.pytorch.attention.dot_product_attention.context_parallel import (
    AttnFuncWithCPAndKVAllGather,
    AttnFuncWithCPAndKVP2P,
    AttnFuncWithCPAndQKVOA2A,
)
from transformer_engine.pytorch.constants import dist_group_type


def attn_forward_func_with_cp(
    is_training: bool,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cu_seqlens_q: torch.Tensor,
    cu_seqlens_kv: torch.Tensor,
    max_seqlen_q: int,
    max_seqlen_kv: int,
    dropout_p: float,
    cp_group: Union[dist_group_type, List[dist_group_type]],
    cp_global_ranks: List[int],
    cp_stream: torch.cuda.Stream,
    cp_comm_type: str = "p2p",
    softmax_scale: Optional[float] = None,
    qkv_format: str = "bshd",
    attn_mask_type: str = "causal",
    deterministic: bool = False,
    window_size=None,
) -> torch.Tensor:
    assert qkv_format in ["bshd", "sbhd", "thd"], f"QKV format of {qkv_format} is not supported with CP!"
    assert cp_comm_type in ["p2p", "all_gather", "a2a", "a2a+p2p"], f"Unsupported cp_comm_type {cp_comm_type}"

    args = [
        is_training, q, k, v, cu_seqlens_q, cu_seqlens_kv, max_seqlen_q, max_seqlen_kv,
        dropout_p, softmax_scale, qkv_format, attn_mask_type, deterministic,
    ]
    match cp_comm_type, torch.is_grad_enabled():
        case ("p2p" | "a2a+p2p", True):
            args += [cp_group, cp_global_ranks, cp_stream]
            out = AttnFuncWithCPAndKVP2P.apply(*args)
        case ("p2p" | "a2a+p2p", False) | ("all_gather", _):
            group = cp_group[-1] if isinstance(cp_group, list) else cp_group
            out = AttnFuncWithCPAndKVAllGather.apply(*args, window_size, group, cp_stream)
        case ("a2a", _):
            args += [window_size, cp_group]
            out = AttnFuncWithCPAndQKVOA2A.apply(*args)
        case _:
            raise ValueError(f"Unsupported communication type: {cp_comm_type}!")
    return out


class DotProductAttention(torch.nn.Module):
    def __init__(self, num_attention_heads: int, kv_channels: int, attention_dropout: float = 0.0,
                 qkv_format: str = "bshd", attn_mask_type: str = "causal"):
        super().__init__()
        self.num_attention_heads = num_attention_heads
        self.hidden_size_per_attention_head = kv_channels
        self.attention_dropout = attention_dropout
        self.qkv_format = qkv_format
        self.attn_mask_type = attn_mask_type
        self.cp_group = None
        self.cp_global_ranks = None
        self.cp_stream = None
        self.cp_comm_type = "p2p"

    def set_context_parallel_group(self, cp_group, cp_global_ranks, cp_stream, cp_comm_type="p2p"):
        self.cp_group = cp_group
        self.cp_global_ranks = cp_global_ranks
        self.cp_stream = cp_stream
        self.cp_comm_type = cp_comm_type

    def forward(self, query_layer, key_layer, value_layer, cu_seqlens_q=None, cu_seqlens_kv=None,
                max_seqlen_q=None, max_seqlen_kv=None):
        return attn_forward_func_with_cp(
            self.training, query_layer, key_layer, value_layer,
            cu_seqlens_q, cu_seqlens_kv, max_seqlen_q, max_seqlen_kv,
            self.attention_dropout if self.training else 0.0,
            self.cp_group, self.cp_global_ranks, self.cp_stream,
            cp_comm_type=self.cp_comm_type,
            softmax_scale=1.0 / (self.hidden_size_per_attention_head ** 0.5),
            qkv_format=self.qkv_format,
            attn_mask_type=self.attn_mask_type,
        )
