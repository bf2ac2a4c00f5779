# Adapted from linkedin/Liger-Kernel src/liger_kernel/ops/fused_linear_cross_entropy.py
import math
import torch
import torch.nn.functional as F


class LigerFusedLinearCrossEntropyFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, _input, weight, target, ignore_index, compute_grad):
        BT, H = _input.shape
        V = weight.shape[0]
        inc_factor = math.ceil(V / H)
        chunk_size = 1 << max(0, (math.ceil(BT / inc_factor) - 1).bit_length())
        num_chunks = math.ceil(BT / chunk_size) if compute_grad else 1
        grad_input = torch.zeros_like(_input)
        total = torch.zeros((), dtype=torch.float32, device=_input.device)
        step = math.ceil(BT / num_chunks)
        for i in range(num_chunks):
            s, e = i * step, min((i + 1) * step, BT)
            logits = (_input[s:e] @ weight.t()).float()
            total = total + F.cross_entropy(logits, target[s:e], ignore_index=ignore_index, reduction="sum")
            if compute_grad:
                p = torch.softmax(logits, -1)
                p[torch.arange(e - s), target[s:e].clamp(min=0)] -= 1
                grad_input[s:e] = (p @ weight.float()).to(_input.dtype)
        if compute_grad:
            ctx.save_for_backward(grad_input.detach())
        return total / BT

    @staticmethod
    def backward(ctx, grad_output):
        (grad_input,) = ctx.saved_tensors
        return grad_input * grad_output, None, None, None, None
