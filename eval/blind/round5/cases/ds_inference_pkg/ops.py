import torch
import torch.distributed as dist

from deepspeed.ops.transformer.inference.triton import softmax_context as triton_softmax_context
from deepspeed.ops.op_builder import InferenceBuilder

inference_module = None


class DeepSpeedSelfAttentionFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, input_mask, attn_qkvw, attn_ow, config, mp_group, layer_past):
        global inference_module
        if inference_module is None:
            inference_module = InferenceBuilder().load()

        # fused dropout inside the attention kernel is the "training" flavour
        training_mode = config.training and config.grad_mode
        dropout_p = config.attn_dropout_ratio if training_mode else 0.0

        qkv_out = torch.matmul(input, attn_qkvw)
        # Triton softmax_context kernels are forward-only; keep them off the autograd path
        use_triton = config.use_triton and not config.grad_mode
        if use_triton:
            context_layer = triton_softmax_context(qkv_out, input_mask, config.heads, config.triangular_masking)
        else:
            context_layer = inference_module.softmax_context_fp16(
                qkv_out, input_mask, config.heads, config.layer_norm_eps, config.triangular_masking,
                dropout_p, config.layer_id, config.num_hidden_layers,
            )
        output = torch.matmul(context_layer, attn_ow)
        if mp_group is not None and dist.get_world_size(group=mp_group) > 1:
            dist.all_reduce(output, group=mp_group)

        if config.grad_mode:
            ctx.save_for_backward(input, input_mask, attn_qkvw, attn_ow, qkv_out, context_layer)
            ctx.config = config
        return output

    @staticmethod
    def backward(ctx, grad_output):
        raise NotImplementedError
