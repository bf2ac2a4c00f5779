# Modelled on deepspeed/ops/transformer/transformer.py (DeepSpeed v0.9-0.14).
import torch
from torch import nn
from torch.autograd import Function

from deepspeed.ops.op_builder import TransformerBuilder

transformer_cuda_module = None


class DeepSpeedTransformerConfig:
    def __init__(self, batch_size=-1, hidden_size=-1, heads=-1, attn_dropout_ratio=-1,
                 hidden_dropout_ratio=-1, fp16=False, pre_layer_norm=True, training=True,
                 attn_dropout_checkpoint=False, normalize_invertible=False, gelu_checkpoint=False):
        self.layer_id = -1
        self.batch_size = batch_size
        self.hidden_size = hidden_size
        self.heads = heads
        self.attn_dropout_ratio = attn_dropout_ratio
        self.hidden_dropout_ratio = hidden_dropout_ratio
        self.fp16 = fp16
        self.pre_layer_norm = pre_layer_norm
        self.training = training
        self.is_grad_enabled = True
        self.attn_dropout_checkpoint = attn_dropout_checkpoint
        self.normalize_invertible = normalize_invertible
        self.gelu_checkpoint = gelu_checkpoint


class DeepSpeedTransformerFunction(Function):
    @staticmethod
    def forward(ctx, input, input_mask, self, grads, layer_id, attn_qkvw, attn_qkvb, attn_ow, attn_ob,
                attn_nw, attn_nb, inter_w, inter_b, output_w, output_b, norm_w, norm_b, config):
        cuda_module = transformer_cuda_module
        forward_func = cuda_module.forward_fp16 if config.fp16 else cuda_module.forward_fp32

        (output, inp_norm, qkv_tf, soft_inp, ctx_bufB, attn_o_inp, add_res, ff1_inp, gelu_inp, ff2_inp,
         attn_prob_dropout_mask, attn_output_dropout_mask, layer_output_dropout_mask,
         attn_layer_norm_var, attn_layer_norm_mean, layer_norm_var, layer_norm_mean) = forward_func(
             config.layer_id, input, input_mask, attn_qkvw, attn_qkvb, attn_ow, attn_ob, attn_nw, attn_nb,
             inter_w, inter_b, output_w, output_b, norm_w, norm_b, config.training and config.is_grad_enabled,
             config.pre_layer_norm, config.attn_dropout_checkpoint, config.normalize_invertible,
             config.gelu_checkpoint)

        if config.is_grad_enabled:
            if config.pre_layer_norm and config.normalize_invertible:
                ctx.save_for_backward(input_mask, attn_qkvw, attn_qkvb, attn_ow, attn_ob, attn_nw, attn_nb,
                                      inter_w, inter_b, output_w, output_b, norm_w, norm_b)
            else:
                ctx.save_for_backward(output, input, input_mask, attn_qkvw, attn_qkvb, attn_ow, attn_ob,
                                      attn_nw, attn_nb, inter_w, inter_b, output_w, output_b, norm_w, norm_b)
            ctx.config = config
            ctx.qkv_tf = qkv_tf
            ctx.soft_inp = soft_inp
            ctx.attn_prob_dropout_mask = attn_prob_dropout_mask
            ctx.attn_output_dropout_mask = attn_output_dropout_mask
            ctx.layer_output_dropout_mask = layer_output_dropout_mask
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
        h = config.hidden_size
        self.attn_qkvw = nn.Parameter(torch.Tensor(h * 3, h))
        self.attn_qkvb = nn.Parameter(torch.Tensor(h * 3))
        self.attn_ow = nn.Parameter(torch.Tensor(h, h))
        self.attn_ob = nn.Parameter(torch.Tensor(h))
        self.attn_nw = nn.Parameter(torch.Tensor(h))
        self.attn_nb = nn.Parameter(torch.Tensor(h))
        self.inter_w = nn.Parameter(torch.Tensor(4 * h, h))
        self.inter_b = nn.Parameter(torch.Tensor(4 * h))
        self.output_w = nn.Parameter(torch.Tensor(h, 4 * h))
        self.output_b = nn.Parameter(torch.Tensor(h))
        self.norm_w = nn.Parameter(torch.Tensor(h))
        self.norm_b = nn.Parameter(torch.Tensor(h))

    def forward(self, hidden_states, attention_mask=None, grads=None):
        self.config.is_grad_enabled = torch.is_grad_enabled()
        self.config.training = self.training
        return DeepSpeedTransformerFunction.apply(
            hidden_states, attention_mask, self, grads, self.config.layer_id, self.attn_qkvw,
            self.attn_qkvb, self.attn_ow, self.attn_ob, self.attn_nw, self.attn_nb, self.inter_w,
            self.inter_b, self.output_w, self.output_b, self.norm_w, self.norm_b, self.config)
