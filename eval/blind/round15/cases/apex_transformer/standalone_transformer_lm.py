# adapted from NVIDIA/apex apex/transformer/testing/standalone_transformer_lm.py
import contextlib
import enum
import math

import torch
import torch.nn.functional as F

from apex.normalization import MixedFusedLayerNorm as LayerNorm
from apex.transformer import parallel_state, tensor_parallel
from apex.transformer.enums import AttnMaskType, AttnType, LayerType
from apex.transformer.testing.global_vars import get_args

from . import random as tp_random
from .fused_bias_dropout import get_bias_dropout_add


class MegatronModule(torch.nn.Module):
    def __init__(self, share_word_embeddings: bool = True) -> None:
        super().__init__()
        self.share_word_embeddings = share_word_embeddings


class ParallelMLP(MegatronModule):
    def __init__(self, init_method, output_layer_init_method):
        super().__init__()
        args = get_args()
        self.dense_h_to_4h = tensor_parallel.ColumnParallelLinear(
            args.hidden_size,
            args.ffn_hidden_size,
            gather_output=False,
            init_method=init_method,
            skip_bias_add=True,
            no_async_tensor_model_parallel_allreduce=not args.async_tensor_model_parallel_allreduce,
            sequence_parallel_enabled=args.sequence_parallel,
        )
        self.activation_func = F.gelu
        self.dense_4h_to_h = tensor_parallel.RowParallelLinear(
            args.ffn_hidden_size,
            args.hidden_size,
            input_is_parallel=True,
            init_method=output_layer_init_method,
            skip_bias_add=True,
            sequence_parallel_enabled=args.sequence_parallel,
        )

    def forward(self, hidden_states):
        intermediate_parallel, bias_parallel = self.dense_h_to_4h(hidden_states)
        intermediate_parallel = self.activation_func(intermediate_parallel + bias_parallel)
        output, output_bias = self.dense_4h_to_h(intermediate_parallel)
        return output, output_bias


class ParallelTransformerLayer(MegatronModule):
    """A single transformer layer.

    Transformer layer takes input with size [s, b, h] and returns an
    output of the same size.
    """

    def __init__(self, init_method, output_layer_init_method, layer_number, self_attention, layer_type=LayerType.encoder, drop_path_rate=0.0):
        args = get_args()
        super().__init__()
        self.layer_number = layer_number
        self.layer_type = layer_type
        self.apply_residual_connection_post_layernorm = args.apply_residual_connection_post_layernorm
        self.input_layernorm = LayerNorm(args.hidden_size, eps=args.layernorm_epsilon, sequence_parallel_enabled=args.sequence_parallel)
        self.self_attention = self_attention
        self.hidden_dropout = args.hidden_dropout
        self.post_attention_layernorm = LayerNorm(args.hidden_size, eps=args.layernorm_epsilon, sequence_parallel_enabled=args.sequence_parallel)
        self.mlp = ParallelMLP(init_method, output_layer_init_method)
        TORCH_MAJOR = int(torch.__version__.split(".")[0])
        TORCH_MINOR = int(torch.__version__.split(".")[1])
        use_nvfuser = TORCH_MAJOR > 1 or (TORCH_MAJOR == 1 and TORCH_MINOR >= 10)
        self.bias_dropout_add_exec_handler = contextlib.nullcontext if use_nvfuser else torch.enable_grad

    def forward(self, hidden_states, attention_mask, encoder_output=None, enc_dec_attn_mask=None, inference_params=None):
        # hidden_states: [s, b, h]
        layernorm_output = self.input_layernorm(hidden_states)
        attention_output, attention_bias = self.self_attention(
            layernorm_output, attention_mask, inference_params=inference_params
        )

        if self.apply_residual_connection_post_layernorm:
            residual = layernorm_output
        else:
            residual = hidden_states

        bias_dropout_add_func = get_bias_dropout_add(self.training and torch.is_grad_enabled())

        with self.bias_dropout_add_exec_handler():
            layernorm_input = bias_dropout_add_func(
                attention_output, attention_bias.expand_as(residual), residual, self.hidden_dropout
            )

        layernorm_output = self.post_attention_layernorm(layernorm_input)
        mlp_output, mlp_bias = self.mlp(layernorm_output)

        if self.apply_residual_connection_post_layernorm:
            residual = layernorm_output
        else:
            residual = layernorm_input

        with self.bias_dropout_add_exec_handler():
            output = bias_dropout_add_func(mlp_output, mlp_bias.expand_as(residual), residual, self.hidden_dropout)

        return output


class ParallelTransformer(MegatronModule):
    """Transformer class."""

    def __init__(self, layers, post_layer_norm=True, pre_process=True, post_process=True):
        super().__init__()
        args = get_args()
        self.post_layer_norm = post_layer_norm
        self.pre_process = pre_process
        self.post_process = post_process
        self.input_tensor = None
        self.recompute_granularity = args.recompute_granularity
        self.recompute_method = args.recompute_method
        self.recompute_num_layers = args.recompute_num_layers
        self.distribute_saved_activations = args.distribute_saved_activations and not args.sequence_parallel
        self.sequence_parallel = args.sequence_parallel
        self.layers = torch.nn.ModuleList(layers)
        self.num_layers = len(self.layers)
        if self.post_process and self.post_layer_norm:
            self.final_layernorm = LayerNorm(args.hidden_size, eps=args.layernorm_epsilon, sequence_parallel_enabled=args.sequence_parallel)

    def _get_layer(self, layer_number):
        return self.layers[layer_number]

    def _checkpointed_forward(self, hidden_states, attention_mask, encoder_output, enc_dec_attn_mask):
        """Forward method with activation checkpointing."""

        def custom(start, end):
            def custom_forward(*inputs):
                x_ = inputs[0]
                attention_mask = inputs[1]
                encoder_output = inputs[2]
                enc_dec_attn_mask = inputs[3]
                for index in range(start, end):
                    layer = self._get_layer(index)
                    x_ = layer(x_, attention_mask, encoder_output, enc_dec_attn_mask)
                return x_

            return custom_forward

        if self.recompute_method == "uniform":
            l = 0
            while l < self.num_layers:
                hidden_states = tp_random.checkpoint(
                    custom(l, l + self.recompute_num_layers),
                    self.distribute_saved_activations,
                    hidden_states,
                    attention_mask,
                    encoder_output,
                    enc_dec_attn_mask,
                )
                l += self.recompute_num_layers
        elif self.recompute_method == "block":
            for l in range(self.num_layers):
                if l < self.recompute_num_layers:
                    hidden_states = tp_random.checkpoint(
                        custom(l, l + 1),
                        self.distribute_saved_activations,
                        hidden_states,
                        attention_mask,
                        encoder_output,
                        enc_dec_attn_mask,
                    )
                else:
                    hidden_states = custom(l, l + 1)(hidden_states, attention_mask, encoder_output, enc_dec_attn_mask)
        else:
            raise ValueError("Invalid activation recompute method.")
        return hidden_states

    def set_input_tensor(self, input_tensor):
        self.input_tensor = input_tensor

    def forward(self, hidden_states, attention_mask, encoder_output=None, enc_dec_attn_mask=None, inference_params=None):
        if inference_params:
            assert self.recompute_granularity is None, "inference does not work with activation checkpointing"

        if not self.pre_process:
            hidden_states = self.input_tensor

        if self.sequence_parallel:
            rng_context = tp_random.get_cuda_rng_tracker().fork()
        else:
            rng_context = contextlib.nullcontext()

        with rng_context:
            if self.recompute_granularity == "full" and torch.is_grad_enabled():
                hidden_states = self._checkpointed_forward(hidden_states, attention_mask, encoder_output, enc_dec_attn_mask)
            else:
                for index in range(self.num_layers):
                    layer = self._get_layer(index)
                    hidden_states = layer(
                        hidden_states,
                        attention_mask,
                        encoder_output=encoder_output,
                        enc_dec_attn_mask=enc_dec_attn_mask,
                        inference_params=inference_params,
                    )

        if self.post_process and self.post_layer_norm:
            hidden_states = self.final_layernorm(hidden_states)
        return hidden_states
