# Modeled on flash-attention flash_attn/modules/mha.py (FlashSelfAttention) and
# flash_attn/modules/mlp.py (FusedMLP).
import torch
import torch.nn as nn
import torch.nn.functional as F

try:
    from flash_attn import flash_attn_qkvpacked_func, flash_attn_varlen_qkvpacked_func
except ImportError:
    flash_attn_qkvpacked_func, flash_attn_varlen_qkvpacked_func = None, None

try:
    from flash_attn.ops.fused_dense import fused_mlp_func
except ImportError:
    fused_mlp_func = None


class FlashSelfAttention(nn.Module):
    def __init__(self, causal=False, softmax_scale=None, attention_dropout=0.0, window_size=(-1, -1),
                 alibi_slopes=None, deterministic=False):
        super().__init__()
        self.causal = causal
        self.softmax_scale = softmax_scale
        self.drop = nn.Dropout(attention_dropout)
        self.register_buffer("alibi_slopes", alibi_slopes, persistent=False)
        self.window_size = window_size
        self.deterministic = deterministic

    def forward(self, qkv, causal=None, cu_seqlens=None, max_seqlen=None):
        causal = self.causal if causal is None else causal
        unpadded = cu_seqlens is not None
        dropout_p = self.drop.p if torch.is_grad_enabled() else 0.0
        if unpadded:
            return flash_attn_varlen_qkvpacked_func(
                qkv, cu_seqlens, max_seqlen, dropout_p,
                softmax_scale=self.softmax_scale, causal=causal,
                alibi_slopes=self.alibi_slopes, window_size=self.window_size,
                deterministic=self.deterministic,
            )
        return flash_attn_qkvpacked_func(
            qkv, dropout_p, softmax_scale=self.softmax_scale, causal=causal,
            alibi_slopes=self.alibi_slopes, window_size=self.window_size,
            deterministic=self.deterministic,
        )


class FusedMLP(nn.Module):
    def __init__(self, in_features, hidden_features, out_features=None, activation="gelu_approx",
                 return_residual=False, checkpoint_lvl=0, heuristic="auto"):
        super().__init__()
        out_features = out_features or in_features
        self.activation = activation
        self.return_residual = return_residual
        self.checkpoint_lvl = checkpoint_lvl
        self.heuristic = heuristic
        self.fc1 = nn.Linear(in_features, hidden_features)
        self.fc2 = nn.Linear(hidden_features, out_features)

    def forward(self, x, process_group=None):
        dtype = x.dtype if not torch.is_autocast_enabled() else torch.get_autocast_gpu_dtype()
        if self.heuristic == "auto":
            heuristic = 0 if self.activation != "gelu_approx" else (1 if dtype == torch.float16 else -1)
        else:
            heuristic = self.heuristic
        out = fused_mlp_func(
            x, self.fc1.weight, self.fc2.weight, self.fc1.bias, self.fc2.bias,
            activation=self.activation,
            # pre-activation is only kept around for the backward pass
            save_pre_act=torch.is_grad_enabled(),
            return_residual=self.return_residual,
            checkpoint_lvl=self.checkpoint_lvl,
            heuristic=heuristic,
            process_group=process_group,
        )
        if self.return_residual:
            out, x = out
        return out if not self.return_residual else (out, x)
