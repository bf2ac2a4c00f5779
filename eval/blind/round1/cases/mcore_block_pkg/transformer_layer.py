# Copyright (c) 2024, NVIDIA CORPORATION. All rights reserved.
"""TransformerLayer forward (trimmed)."""
from dataclasses import dataclass
from typing import Optional

import torch

from megatron.core.models.common.embeddings.rope_utils import apply_rotary_pos_emb
from megatron.core.tensor_parallel.random import CheckpointWithoutOutput
from megatron.core.utils import make_viewless_tensor


@dataclass
class LayerForwardState:
    grad_enabled: bool
    layer_number_offset: int = 0
    inference_context: Optional[object] = None


class TransformerLayer(torch.nn.Module):

    def _self_attention(self, hidden_states, attention_mask, rotary_pos_emb, fwd_state: LayerForwardState):
        query, key, value = self.self_attention.get_query_key_value_tensors(hidden_states)
        if rotary_pos_emb is not None:
            fused_rope = self.config.apply_rope_fusion and fwd_state.grad_enabled
            query = apply_rotary_pos_emb(query, rotary_pos_emb, config=self.config, fused=fused_rope)
            key = apply_rotary_pos_emb(key, rotary_pos_emb, config=self.config, fused=fused_rope)
        core_attn_out = self.self_attention.core_attention(query, key, value, attention_mask)
        return self.self_attention.linear_proj(core_attn_out)

    def forward(self, hidden_states, attention_mask=None, rotary_pos_emb=None,
                fwd_state: Optional[LayerForwardState] = None):
        residual = hidden_states

        if self.recompute_input_layernorm and fwd_state.grad_enabled:
            self.input_layernorm_checkpoint = CheckpointWithoutOutput()
            input_layernorm_output = self.input_layernorm_checkpoint.checkpoint(self.input_layernorm, hidden_states)
        else:
            input_layernorm_output = self.input_layernorm(hidden_states)

        attention_output_with_bias = self._self_attention(input_layernorm_output, attention_mask, rotary_pos_emb,
                                                          fwd_state)

        with self.bias_dropout_add_exec_handler():
            hidden_states = self.self_attn_bda(self.training and fwd_state.grad_enabled, self.config.bias_dropout_fusion)(
                attention_output_with_bias, residual, self.hidden_dropout
            )

        residual = hidden_states
        pre_mlp_layernorm_output = self.pre_mlp_layernorm(hidden_states)
        mlp_output_with_bias = self.mlp(pre_mlp_layernorm_output)
        with self.bias_dropout_add_exec_handler():
            hidden_states = self.mlp_bda(self.training, self.config.bias_dropout_fusion)(
                mlp_output_with_bias, residual, self.hidden_dropout
            )

        output = make_viewless_tensor(inp=hidden_states, requires_grad=hidden_states.requires_grad, keep_graph=True)
        return output
