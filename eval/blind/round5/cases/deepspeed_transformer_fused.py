"""Modelled on DeepSpeed deepspeed/ops/transformer/transformer.py
(DeepSpeedTransformerFunction / DeepSpeedTransformerLayer)."""
import torch
from torch import nn

from deepspeed.ops.op_builder import TransformerBuilder

transformer_cuda_module = None
stochastic_transformer_cuda_module = None


class DeepSpeedTransformerFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, input_mask, self, grads, layer_id, attn_qkvw, attn_qkvb, attn_ow, attn_ob,
                attn_nw, attn_nb, inter_w, inter_b, output_w, output_b, norm_w, norm_b, config):
        cuda_module = stochastic_transformer_cuda_module if config.stochastic_mode else transformer_cuda_module
        forward_func = cuda_module.forward_fp16 if config.fp16 else cuda_module.forward_fp32

        inp_size = input.size()
        if inp_size[1] % 16 != 0:
            input = torch.cat((input, torch.randn((inp_size[0], (16 - (inp_size[1] % 16)), inp_size[2]),
                                                  device=input.device, dtype=input.dtype)), 1)

        # training_mode turns on the fused dropout masks inside the kernel
        training_mode = config.training and config.is_grad_enabled
        (output, inp_norm, qkv_tf, soft_inp, ctx_bufB, attn_o_inp, add_res, ff1_inp, gelu_inp, ff2_inp,
         attn_prob_dropout_mask, attn_output_dropout_mask, layer_output_dropout_mask, attn_layer_norm_var,
         attn_layer_norm_mean, layer_norm_var, layer_norm_mean) = forward_func(
             config.layer_id, input, input_mask, attn_qkvw, attn_qkvb, attn_ow, attn_ob, attn_nw, attn_nb,
             inter_w, inter_b, output_w, output_b, norm_w, norm_b, training_mode,
             config.pre_layer_norm, config.attn_dropout_checkpoint, config.normalize_invertible,
             config.gelu_checkpoint)

        if config.is_grad_enabled:
            ctx.save_for_backward(input_mask, attn_qkvw, attn_qkvb, attn_ow, attn_ob, attn_nw, attn_nb,
                                  inter_w, inter_b, output_w, output_b, norm_w, norm_b)
            ctx.config = config
            ctx.inp_norm = inp_norm
            ctx.qkv_tf = qkv_tf
            ctx.soft_inp = soft_inp
            ctx.attn_prob_dropout_mask = attn_prob_dropout_mask
            ctx.attn_output_dropout_mask = attn_output_dropout_mask
            ctx.layer_output_dropout_mask = layer_output_dropout_mask

        if inp_size[1] % 16 != 0:
            output = torch.narrow(output, 1, 0, inp_size[1])
        return output

    @staticmethod
    def backward(ctx, grad_output):
        raise NotImplementedError


class DeepSpeedTransformerLayer(nn.Module):
    layer_id = 0

    def __init__(self, config, initial_weights=None, initial_biases=None):
        super().__init__()
        self.config = config
        self.config.layer_id = DeepSpeedTransformerLayer.layer_id
        DeepSpeedTransformerLayer.layer_id += 1
        global transformer_cuda_module
        if transformer_cuda_module is None:
            transformer_cuda_module = TransformerBuilder().load()

    def forward(self, hidden_states, attention_mask=None, grads=None):
        self.config.is_grad_enabled = torch.is_grad_enabled()
        self.config.training = self.training
        return DeepSpeedTransformerFunction.apply(hidden_states, attention_mask, self, grads,
                                                  self.config.layer_id, self.attn_qkvw, self.attn_qkvb,
                                                  self.attn_ow, self.attn_ob, self.attn_nw, self.attn_nb,
                                                  self.inter_w, self.inter_b, self.output_w, self.output_b,
                                                  self.norm_w, self.norm_b, self.config)
