# Modelled on megatron/core/transformer/transformer_layer.py (Megatron-LM core_r0.9).
import torch

from .dot_product_attention import DotProductAttention


class TransformerLayer(torch.nn.Module):
    def __init__(self, config, layer_number, self_attention, mlp, input_layernorm, pre_mlp_layernorm):
        super().__init__()
        self.config = config
        self.layer_number = layer_number
        self.self_attention = self_attention
        self.mlp = mlp
        self.input_layernorm = input_layernorm
        self.pre_mlp_layernorm = pre_mlp_layernorm

    def forward(self, hidden_states, attention_mask, rotary_pos_emb=None):
        DotProductAttention.grad_mode = torch.is_grad_enabled()
        residual = hidden_states
        attention_output, _ = self.self_attention(self.input_layernorm(hidden_states), attention_mask=attention_mask,
                                                  rotary_pos_emb=rotary_pos_emb)
        hidden_states = residual + attention_output
        residual = hidden_states
        mlp_output, _ = self.mlp(self.pre_mlp_layernorm(hidden_states))
        return residual + mlp_output
