# adapted from pytorch/torchtune torchtune/modules/kv_cache.py
from typing import Tuple

import torch
from torch import nn, Tensor


class KVCache(nn.Module):
    def __init__(self, max_batch_size: int, max_seq_len: int, n_kv_heads: int, head_dim: int,
                 dtype: torch.dtype = torch.float32):
        super().__init__()
        cache_shape = (max_batch_size, max_seq_len, n_kv_heads, head_dim)
        self.register_buffer("k_cache", torch.zeros(cache_shape, dtype=dtype), persistent=False)
        self.register_buffer("v_cache", torch.zeros(cache_shape, dtype=dtype), persistent=False)
        self.max_batch_size = max_batch_size

    def update(self, bsz: int, seq_len: int, curr_pos: int, k_val: Tensor, v_val: Tensor) -> Tuple[Tensor, Tensor]:
        if bsz > self.max_batch_size:
            raise ValueError(f"Batch size {bsz} greater than max batch size {self.max_batch_size}")
        if k_val.requires_grad or v_val.requires_grad:
            k_val, v_val = k_val.detach(), v_val.detach()
        if torch.is_inference_mode_enabled():
            # inference tensors can be written in place without a version bump
            pos = torch.arange(curr_pos, curr_pos + seq_len, device=k_val.device)
            self.k_cache[:bsz].index_copy_(1, pos, k_val)
            self.v_cache[:bsz].index_copy_(1, pos, v_val)
        else:
            self.k_cache[:bsz, curr_pos : curr_pos + seq_len] = k_val
            self.v_cache[:bsz, curr_pos : curr_pos + seq_len] = v_val
        return (
            self.k_cache[:bsz, : curr_pos + seq_len],
            self.v_cache[:bsz, : curr_pos + seq_len],
        )
