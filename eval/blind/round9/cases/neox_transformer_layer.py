from typing import Optional

import torch
import torch.nn as nn


def bias_dropout_add(x: torch.Tensor, bias: Optional[torch.Tensor], residual: Optional[torch.Tensor],
                     prob: float, training: bool) -> torch.Tensor:
    if bias is not None:
        x = x + bias
    out = torch.nn.functional.dropout(x, p=prob, training=training)
    if residual is not None:
        out = residual + out
    return out


def get_bias_dropout_add(training):
    def _bias_dropout_add(x, bias, residual, prob):
        return bias_dropout_add(x, bias, residual, prob, training)

    return _bias_dropout_add


@torch.jit.script
def bias_dropout_add_fused_train(x: torch.Tensor, bias: Optional[torch.Tensor],
                                 residual: Optional[torch.Tensor], prob: float) -> torch.Tensor:
    return bias_dropout_add(x, bias, residual, prob, True)


@torch.jit.script
def bias_dropout_add_fused_inference(x: torch.Tensor, bias: Optional[torch.Tensor],
                                     residual: Optional[torch.Tensor], prob: float) -> torch.Tensor:
    return bias_dropout_add(x, bias, residual, prob, False)


class ParallelTransformerLayer(nn.Module):
    def __init__(self, neox_args, attention, mlp, norm, layer_number):
        super().__init__()
        self.layer_number = layer_number
        self.input_layernorm = norm(neox_args.hidden_size, eps=neox_args.layernorm_epsilon)
        self.post_attention_layernorm = norm(neox_args.hidden_size, eps=neox_args.layernorm_epsilon)
        self.hidden_dropout = neox_args.hidden_dropout
        self.bias_dropout_fusion = neox_args.bias_dropout_fusion
        self.gpt_j_residual = neox_args.gpt_j_residual
        self.attention = attention
        self.mlp = mlp

    def _get_bias_dropout(self):
        if self.bias_dropout_fusion:
            if torch.is_grad_enabled():
                fn = bias_dropout_add_fused_train
            else:
                fn = bias_dropout_add_fused_inference
        else:
            fn = get_bias_dropout_add(self.training)
        return fn

    def forward(self, x, attention_mask, layer_past=None):
        bias_dropout_fn = self._get_bias_dropout()
        if self.gpt_j_residual:
            residual = x
            x1 = self.input_layernorm(x)
            x2 = self.post_attention_layernorm(x)
            attention_output, attention_bias = self.attention(x1, attention_mask, layer_past=layer_past)
            with torch.enable_grad():
                attention_output = bias_dropout_fn(
                    attention_output, bias=attention_bias.expand_as(attention_output),
                    residual=None, prob=self.hidden_dropout,
                )
            mlp_output, mlp_bias = self.mlp(x2)
            with torch.enable_grad():
                output = bias_dropout_fn(
                    mlp_output, bias=mlp_bias.expand_as(mlp_output),
                    residual=attention_output, prob=self.hidden_dropout,
                )
            return output + residual

        residual = x
        attention_output, attention_bias = self.attention(
            self.input_layernorm(x), attention_mask, layer_past=layer_past
        )
        with torch.enable_grad():
            attention_output = bias_dropout_fn(
                attention_output,
                bias=attention_bias.expand_as(residual) if attention_bias is not None else None,
                residual=residual,
                prob=self.hidden_dropout,
            )
        layernorm_output = self.post_attention_layernorm(attention_output)
        mlp_output, mlp_bias = self.mlp(layernorm_output)
        with torch.enable_grad():
            output = bias_dropout_fn(
                mlp_output,
                bias=mlp_bias.expand_as(attention_output) if mlp_bias is not None else None,
                residual=attention_output,
                prob=self.hidden_dropout,
            )
        return output
