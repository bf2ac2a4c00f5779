"""Chunked fused linear + cross entropy that computes input gradients during forward."""
import torch
import triton

from liger_kernel.ops.cross_entropy import liger_cross_entropy_kernel
from liger_kernel.ops.utils import amp_custom_bwd, amp_custom_fwd, element_mul_kernel

MAX_FUSED_SIZE = 65536 // 2


def fused_linear_cross_entropy_forward(_input, weight, target, bias=None, ignore_index=-100, reduction="mean"):
    device = _input.device
    BT, H = _input.shape
    V = weight.shape[0]
    BLOCK_SIZE = min(MAX_FUSED_SIZE, triton.next_power_of_2(V))
    inc_factor = triton.cdiv(V, H)
    chunk_size = triton.next_power_of_2(triton.cdiv(BT, inc_factor))
    num_chunks = triton.cdiv(BT, chunk_size)

    input_requires_grad = _input.requires_grad and torch.is_grad_enabled()
    grad_input = torch.zeros_like(_input, device=device) if input_requires_grad else None
    grad_weight = torch.zeros_like(weight, device=device) if weight.requires_grad else None
    loss_1d = torch.zeros(BT, dtype=torch.float32, device=device)
    total_n_non_ignore = (target != ignore_index).sum().item()

    for chunk_id in range(num_chunks):
        start_idx = chunk_id * chunk_size
        end_idx = min((chunk_id + 1) * chunk_size, BT)
        _input_chunk = _input[start_idx:end_idx]
        logits_chunk = _input_chunk @ weight.t()
        if bias is not None:
            logits_chunk = logits_chunk + bias
        target_chunk = target[start_idx:end_idx]
        n_rows = logits_chunk.shape[0]
        loss_1d_slice = loss_1d[start_idx:end_idx]
        logits_chunk = logits_chunk.contiguous()
        liger_cross_entropy_kernel[(n_rows,)](
            X_ptr=logits_chunk,
            X_stride=logits_chunk.stride(-2),
            Y_ptr=target_chunk,
            Y_stride=target_chunk.stride(-1),
            loss_ptr=loss_1d_slice,
            n_cols=V,
            n_non_ignore=total_n_non_ignore,
            ignore_index=ignore_index,
            BLOCK_SIZE=BLOCK_SIZE,
            num_warps=32,
        )
        grad_logits_chunk = logits_chunk
        if grad_input is not None:
            grad_input[start_idx:end_idx] = grad_logits_chunk @ weight
        if grad_weight is not None:
            torch.addmm(grad_weight, grad_logits_chunk.t(), _input_chunk, out=grad_weight)

    loss = torch.sum(loss_1d) if reduction != "none" else loss_1d
    return loss, grad_input, grad_weight


class LigerFusedLinearCrossEntropyFunction(torch.autograd.Function):
    @staticmethod
    @amp_custom_fwd
    def forward(ctx, _input, weight, target, bias=None, ignore_index=-100, reduction="mean"):
        loss, grad_input, grad_weight = fused_linear_cross_entropy_forward(
            _input, weight, target, bias, ignore_index, reduction
        )
        ctx.save_for_backward(
            grad_input.detach() if grad_input is not None else None,
            grad_weight.detach() if grad_weight is not None else None,
        )
        return loss

    @staticmethod
    @amp_custom_bwd
    def backward(ctx, grad_output):
        grad_input, grad_weight = ctx.saved_tensors
        if grad_input is not None:
            grad_input = grad_input * grad_output
        if grad_weight is not None:
            grad_weight = grad_weight * grad_output
        return grad_input, grad_weight, None, None, None, None
