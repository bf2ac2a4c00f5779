# adapted from EleutherAI/gpt-neox megatron/model/flash_attention.py
import torch
import flash_attn_2_cuda as flash_attn_cuda


def _flash_attn_forward_cuda(q, k, v, out, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                             dropout_p, softmax_scale, causal, return_softmax, num_splits=0, generator=None):
    softmax_lse, *rest = flash_attn_cuda.fwd(
        q, k, v, out, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
        dropout_p, softmax_scale, False, causal, return_softmax, num_splits, generator,
    )
    S_dmask = rest[0] if return_softmax else None
    return out, softmax_lse, S_dmask


class FlashAttnUnpadded(torch.nn.Module):
    def forward(self, q, k, v, cu_seqlens, max_seqlen):
        dropout_p = self.dropout_p if self.training else 0.0
        out = torch.empty_like(q)
        out, softmax_lse, _ = _flash_attn_forward_cuda(
            q, k, v, out, cu_seqlens, cu_seqlens, max_seqlen, max_seqlen,
            dropout_p, self.softmax_scale, self.causal, False,
            num_splits=0 if torch.is_grad_enabled() else 1,
        )
        return out
