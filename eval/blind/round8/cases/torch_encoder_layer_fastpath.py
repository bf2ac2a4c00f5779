import torch
import torch.nn as nn
import torch.nn.functional as F


class TransformerEncoderLayer(nn.Module):

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, norm_first=False):
        super().__init__()
        self.self_attn = nn.MultiheadAttention(d_model, nhead, dropout=dropout, batch_first=True)
        self.linear1 = nn.Linear(d_model, dim_feedforward)
        self.linear2 = nn.Linear(dim_feedforward, d_model)
        self.norm_first = norm_first
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)
        self.activation_relu_or_gelu = 1

    def _why_not_fast_path(self, src, src_mask):
        why_not_sparsity_fast_path = ""
        if not src.dim() == 3:
            why_not_sparsity_fast_path = f"input not batched; expected src.dim() of 3 but got {src.dim()}"
        elif self.training:
            why_not_sparsity_fast_path = "training is enabled"
        elif not self.self_attn.batch_first:
            why_not_sparsity_fast_path = "self_attn.batch_first was not True"
        elif not self.activation_relu_or_gelu:
            why_not_sparsity_fast_path = "activation_relu_or_gelu was not True"
        if not why_not_sparsity_fast_path:
            tensor_args = (
                src,
                self.self_attn.in_proj_weight,
                self.self_attn.in_proj_bias,
                self.self_attn.out_proj.weight,
                self.self_attn.out_proj.bias,
                self.linear1.weight,
                self.linear1.bias,
                self.linear2.weight,
                self.linear2.bias,
            )
            if not all((x.device.type in ("cpu", "cuda")) for x in tensor_args):
                why_not_sparsity_fast_path = "some Tensor argument's device is neither cpu nor cuda"
            elif torch.is_grad_enabled() and any(x.requires_grad for x in tensor_args):
                why_not_sparsity_fast_path = "grad is enabled and at least one argument requires_grad"
        return why_not_sparsity_fast_path

    def forward(self, src, src_mask=None):
        if not self._why_not_fast_path(src, src_mask):
            return torch._transformer_encoder_layer_fwd(
                src, self.self_attn.embed_dim, self.self_attn.num_heads,
                self.self_attn.in_proj_weight, self.self_attn.in_proj_bias,
                self.self_attn.out_proj.weight, self.self_attn.out_proj.bias,
                self.activation_relu_or_gelu == 2, self.norm_first, self.norm1.eps,
                self.norm1.weight, self.norm1.bias, self.norm2.weight, self.norm2.bias,
                self.linear1.weight, self.linear1.bias, self.linear2.weight, self.linear2.bias,
                src_mask, None,
            )
        x = src
        x = self.norm1(x + self.dropout(self.self_attn(x, x, x, attn_mask=src_mask, need_weights=False)[0]))
        x = self.norm2(x + self.dropout(self.linear2(self.dropout(F.relu(self.linear1(x))))))
        return x
