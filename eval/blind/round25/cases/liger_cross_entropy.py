# adapted from linkedin/Liger-Kernel src/liger_kernel/transformers/cross_entropy.py
import torch
from torch.nn import CrossEntropyLoss

from liger_kernel.ops.cross_entropy import cross_entropy_forward


class LigerCrossEntropyFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, _input, target, ignore_index, label_smoothing, grad_in_forward):
        reduce_in_fp32 = grad_in_forward or _input.dtype == torch.float32
        accum_dtype = torch.float32 if reduce_in_fp32 else _input.dtype
        loss, _input = cross_entropy_forward(_input, target, ignore_index, label_smoothing, accum_dtype)
        if grad_in_forward:
            ctx.save_for_backward(_input.detach())
        return loss

    @staticmethod
    def backward(ctx, grad_output):
        (_input,) = ctx.saved_tensors
        return _input * grad_output, None, None, None, None


class LigerCrossEntropyLoss(CrossEntropyLoss):
    def __init__(self, *args, **kwargs):
        super(LigerCrossEntropyLoss, self).__init__(*args, **kwargs)

    def forward(self, _input, target):
        return LigerCrossEntropyFunction.apply(
            _input, target, self.ignore_index, self.label_smoothing, torch.is_grad_enabled()
        )
