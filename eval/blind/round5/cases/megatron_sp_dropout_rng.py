"""Modelled on Megatron-LM megatron/core/transformer/transformer_layer.py and
megatron/core/fusions/fused_bias_dropout.py (get_bias_dropout_add) with
tensor_parallel.get_cuda_rng_tracker().fork()."""
import contextlib

import torch

from megatron.core import tensor_parallel
from megatron.core.fusions.fused_bias_dropout import get_bias_dropout_add
from megatron.core.transformer.module import MegatronModule


class TransformerLayer(MegatronModule):
    def __init__(self, config, submodules, layer_number: int = 1):
        super().__init__(config=config)
        self.layer_number = layer_number
        self.hidden_dropout = config.hidden_dropout
        self.input_layernorm = submodules.input_layernorm
        self.self_attention = submodules.self_attention
        self.self_attn_bda = get_bias_dropout_add
        self.pre_mlp_layernorm = submodules.pre_mlp_layernorm
        self.mlp = submodules.mlp
        self.mlp_bda = get_bias_dropout_add

    def _dropout_rng_ctx(self):
        # sequence-parallel activations are sharded, so each TP rank needs its own dropout stream;
        # only bother while training
        grad_on = torch.is_grad_enabled()
        return (
            tensor_parallel.get_cuda_rng_tracker().fork()
            if self.config.sequence_parallel and grad_on
            else contextlib.nullcontext()
        )

    def forward(self, hidden_states, attention_mask=None, rotary_pos_emb=None, inference_context=None):
        residual = hidden_states
        input_layernorm_output = self.input_layernorm(hidden_states)
        attention_output_with_bias = self.self_attention(
            input_layernorm_output,
            attention_mask=attention_mask,
            inference_context=inference_context,
            rotary_pos_emb=rotary_pos_emb,
        )
        with self._dropout_rng_ctx():
            hidden_states = self.self_attn_bda(self.training, self.config.bias_dropout_fusion)(
                attention_output_with_bias, residual, self.hidden_dropout
            )
        residual = hidden_states
        pre_mlp_layernorm_output = self.pre_mlp_layernorm(hidden_states)
        mlp_output_with_bias = self.mlp(pre_mlp_layernorm_output)
        with self._dropout_rng_ctx():
            hidden_states = self.mlp_bda(self.training, self.config.bias_dropout_fusion)(
                mlp_output_with_bias, residual, self.hidden_dropout
            )
        output = hidden_states.contiguous() if self.config.sequence_parallel else hidden_states
        return output, None
