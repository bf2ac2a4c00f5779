# adapted from linkedin/Liger-Kernel src/liger_kernel/transformers/cross_entropy.py
import torch


class LigerFusedLinearCrossEntropyFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, _input, weight, target, bias=None, ignore_index=-100, grad_in_fwd=True):
        accum_dtype = torch.float32 if grad_in_fwd else _input.dtype
        logits = (_input @ weight.t()).to(accum_dtype)
        if bias is not None:
            logits = logits + bias
        loss = torch.nn.functional.cross_entropy(logits, target, ignore_index=ignore_index)
        if grad_in_fwd:
            grad_weight = torch.zeros_like(weight)
            ctx.save_for_backward(_input.detach(), grad_weight)
        return loss

    @staticmethod
    def backward(ctx, grad_output):
        _input, grad_weight = ctx.saved_tensors
        return _input * grad_output, grad_weight, None, None, None, None
