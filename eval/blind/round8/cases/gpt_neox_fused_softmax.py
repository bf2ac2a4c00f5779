import enum

import torch
import torch.nn as nn


class AttnMaskType(enum.Enum):
    padding = 1
    causal = 2


class ScaledUpperTriangMaskedSoftmax(torch.autograd.Function):

    @staticmethod
    def forward(ctx, inputs, scale):
        import scaled_upper_triang_masked_softmax_cuda
        scale_t = torch.tensor([scale])
        softmax_results = scaled_upper_triang_masked_softmax_cuda.forward(inputs, scale_t[0])
        ctx.save_for_backward(softmax_results, scale_t)
        return softmax_results

    @staticmethod
    def backward(ctx, output_grads):
        raise NotImplementedError


class FusedScaleMaskSoftmax(nn.Module):

    def __init__(self, input_in_fp16, input_in_bf16, fusion_type, mask_func, softmax_in_fp32, scale):
        super().__init__()
        self.input_in_fp16 = input_in_fp16
        self.input_in_bf16 = input_in_bf16
        self.input_in_float16 = input_in_fp16 or input_in_bf16
        self.fusion_type = fusion_type
        self.mask_func = mask_func
        self.softmax_in_fp32 = softmax_in_fp32
        self.scale = scale
        self.scaled_masked_softmax_fusion = fusion_type != "none"

    def is_kernel_available(self, mask, b, np, sq, sk, allow_fused):
        attn_batches = b * np
        if (
            self.scaled_masked_softmax_fusion
            and allow_fused
            and self.input_in_float16
            and 16 < sk <= 2048
            and sq % 4 == 0
            and attn_batches % 4 == 0
        ):
            return True
        return False

    def forward(self, input, mask):
        assert input.dim() == 4
        b, np, sq, sk = input.size()
        if self.is_kernel_available(mask, b, np, sq, sk, allow_fused=torch.is_grad_enabled()):
            return self.forward_fused_softmax(input, mask)
        return self.forward_torch_softmax(input, mask)

    def forward_fused_softmax(self, input, mask):
        b, np, sq, sk = input.size()
        scale = self.scale if self.scale is not None else 1.0
        input = input.view(-1, sq, sk)
        probs = ScaledUpperTriangMaskedSoftmax.apply(input, scale)
        return probs.view(b, np, sq, sk)

    def forward_torch_softmax(self, input, mask):
        if self.input_in_float16 and self.softmax_in_fp32:
            input = input.float()
        if self.scale is not None:
            input = input * self.scale
        mask_output = self.mask_func(input, mask) if mask is not None else input
        probs = torch.nn.Softmax(dim=-1)(mask_output)
        if self.input_in_float16 and self.softmax_in_fp32:
            probs = probs.half() if self.input_in_fp16 else probs.bfloat16()
        return probs
