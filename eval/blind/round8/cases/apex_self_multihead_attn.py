import torch
import torch.nn.functional as F
from torch import nn


def _fast_self_attn_ref(use_time_mask, is_training, heads, inputs, input_weights, output_weights,
                        pad_mask, dropout_prob):
    seql, bsz, embed = inputs.shape
    head_dim = embed // heads
    qkv = torch.addmm(torch.zeros(1, device=inputs.device, dtype=inputs.dtype),
                      inputs.view(seql * bsz, embed), input_weights.t())
    qkv = qkv.view(seql, bsz * heads, 3, head_dim)
    q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
    scores = torch.bmm(q.transpose(0, 1), k.transpose(0, 1).transpose(1, 2)) * (head_dim ** -0.5)
    if pad_mask is not None:
        scores = scores.view(bsz, heads, seql, seql).masked_fill(pad_mask[:, None, None, :], float("-inf"))
        scores = scores.view(bsz * heads, seql, seql)
    probs = F.softmax(scores, dim=-1)
    p = dropout_prob if is_training else 0.0
    probs = F.dropout(probs, p=p, training=True)
    ctx = torch.bmm(probs, v.transpose(0, 1)).transpose(0, 1).contiguous().view(seql * bsz, embed)
    return torch.mm(ctx, output_weights.t()).view(seql, bsz, embed)


class SelfMultiheadAttn(nn.Module):

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=False, impl="fast"):
        super().__init__()
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.dropout = dropout
        self.impl = impl
        self.in_proj_weight = nn.Parameter(torch.empty(3 * embed_dim, embed_dim))
        self.out_proj_weight = nn.Parameter(torch.empty(embed_dim, embed_dim))
        nn.init.xavier_uniform_(self.in_proj_weight)
        nn.init.xavier_uniform_(self.out_proj_weight)
        self.attn_func = _fast_self_attn_ref

    def _run(self, query, key_padding_mask, is_training):
        return self.attn_func(
            False,
            is_training,
            self.num_heads,
            query,
            self.in_proj_weight,
            self.out_proj_weight,
            key_padding_mask,
            self.dropout,
        )

    def forward(self, query, key=None, value=None, key_padding_mask=None, need_weights=False):
        is_training = torch.is_grad_enabled()
        outputs = self._run(query, key_padding_mask, is_training)
        return outputs, None
