# Modelled on apex/transformer/functional/fused_softmax.py (NVIDIA apex 22.x-23.x).
import torch

from apex._autocast_utils import _cast_if_autocast_enabled
from apex.transformer.enums import AttnMaskType


class ScaledMaskedSoftmax(torch.autograd.Function):
    @staticmethod
    def forward(ctx, inputs, mask, scale):
        import scaled_masked_softmax_cuda

        scale_t = torch.tensor([scale])
        softmax_results = scaled_masked_softmax_cuda.forward(inputs, mask, scale_t[0])
        ctx.save_for_backward(softmax_results, scale_t)
        return softmax_results

    @staticmethod
    def backward(ctx, output_grads):
        raise NotImplementedError


class FusedScaleMaskSoftmax(torch.nn.Module):
    def __init__(self, input_in_fp16, input_in_bf16, attn_mask_type, scaled_masked_softmax_fusion, mask_func,
                 softmax_in_fp32, scale):
        super().__init__()
        self.input_in_fp16 = input_in_fp16
        self.input_in_bf16 = input_in_bf16
        self.input_in_float16 = input_in_fp16 or input_in_bf16
        self.attn_mask_type = attn_mask_type
        self.scaled_masked_softmax_fusion = scaled_masked_softmax_fusion
        self.mask_func = mask_func
        self.softmax_in_fp32 = softmax_in_fp32
        self.scale = scale

    def forward(self, input, mask):
        assert input.dim() == 4
        if self.is_kernel_available(mask, *input.size()):
            return self.forward_fused_softmax(input, mask)
        return self.forward_torch_softmax(input, mask)

    def is_kernel_available(self, mask, b, np, sq, sk):
        attn_batches = b * np
        if (
            self.scaled_masked_softmax_fusion
            and torch.is_grad_enabled()
            and self.input_in_float16
            and self.attn_mask_type == AttnMaskType.padding
            and 16 < sk <= 16384
            and sq % 4 == 0
            and sk % 4 == 0
            and attn_batches % 4 == 0
        ):
            batch_per_block = self.get_batch_per_block(sq, sk, b, np)
            if sq % batch_per_block == 0:
                return True
        return False

    def forward_fused_softmax(self, input, mask):
        scale = self.scale if self.scale is not None else 1.0
        args = _cast_if_autocast_enabled(input, mask, scale)
        with torch.cuda.amp.autocast(enabled=False):
            if torch.is_grad_enabled():
                return ScaledMaskedSoftmax.apply(*args)
            return ScaledMaskedSoftmax.forward(_NoCtx(), *args)

    def forward_torch_softmax(self, input, mask):
        upcast = self.input_in_float16 and (self.softmax_in_fp32 or not torch.is_grad_enabled())
        if upcast:
            input = input.float()
        if self.scale is not None:
            input = input * self.scale
        mask_output = self.mask_func(input, mask) if mask is not None else input
        probs = torch.nn.Softmax(dim=-1)(mask_output)
        if upcast:
            probs = probs.half() if self.input_in_fp16 else probs.bfloat16()
        return probs

    @staticmethod
    def get_batch_per_block(sq, sk, b, np):
        import scaled_masked_softmax_cuda

        return scaled_masked_softmax_cuda.get_batch_per_block(sq, sk, b, np)


class _NoCtx:
    def save_for_backward(self, *tensors):
        pass
