# adapted from volcengine/verl verl/utils/ulysses.py (all_to_all_tensor used inside an attention forward)
import torch
import torch.nn as nn
import torch.nn.functional as F

from .factory import all_to_all_4d, build_overlap_predicate


class UlyssesAttention(nn.Module):
    def __init__(self, hidden_size, num_heads, sp_group, overlap_comm: bool = True):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = hidden_size // num_heads
        self.q_proj = nn.Linear(hidden_size, hidden_size)
        self.k_proj = nn.Linear(hidden_size, hidden_size)
        self.v_proj = nn.Linear(hidden_size, hidden_size)
        self.o_proj = nn.Linear(hidden_size, hidden_size)
        self.sp_group = sp_group
        self._should_overlap = build_overlap_predicate(overlap_comm)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        bsz, q_len, _ = hidden_states.shape
        k = self.k_proj(hidden_states).view(bsz, q_len, self.num_heads, self.head_dim)
        v = self.v_proj(hidden_states).view(bsz, q_len, self.num_heads, self.head_dim)
        if self._should_overlap():
            k_done = all_to_all_4d(k, 2, 1, self.sp_group, async_op=True)
            v_done = all_to_all_4d(v, 2, 1, self.sp_group, async_op=True)
            q = self.q_proj(hidden_states).view(bsz, q_len, self.num_heads, self.head_dim)
            q = all_to_all_4d(q, 2, 1, self.sp_group)()
            k, v = k_done(), v_done()
        else:
            q = self.q_proj(hidden_states).view(bsz, q_len, self.num_heads, self.head_dim)
            q = all_to_all_4d(q, 2, 1, self.sp_group)()
            k = all_to_all_4d(k, 2, 1, self.sp_group)()
            v = all_to_all_4d(v, 2, 1, self.sp_group)()
        out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
        out = all_to_all_4d(out.transpose(1, 2), 1, 2, self.sp_group)()
        return self.o_proj(out.reshape(bsz, q_len, -1))
