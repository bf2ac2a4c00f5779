# adapted from linkedin/Liger-Kernel src/liger_kernel/ops/fused_linear_cross_entropy.py
import torch
import triton

from liger_kernel.ops.cross_entropy import liger_cross_entropy_kernel
from liger_kernel.ops.utils import amp_custom_bwd
from liger_kernel.ops.utils import amp_custom_fwd

MAX_FUSED_SIZE = 65536 // 2


def _can_use_mm_out(_input, weight):
    # out= bypasses autocast. Only use it when @ would use these exact operands
    # and return their dtype; keep AMP casts/rounding on the original path.
    if (
        _input.device.type != "cuda"
        or torch.is_grad_enabled()
        or _input.dtype != weight.dtype
    ):
        return False
    if torch.is_autocast_enabled():
        return False
    return True


def fused_linear_cross_entropy_forward(
    _input,
    weight,
    target,
    bias=None,
    ignore_index=-100,
    label_smoothing=0.0,
    reduction="mean",
    compute_grad=True,
):
    device = _input.device
    BT, H = _input.shape
    V = weight.shape[0]
    BLOCK_SIZE = min(MAX_FUSED_SIZE, triton.next_power_of_2(V))

    inc_factor = triton.cdiv(V, H)  # (V + H - 1) // H
    chunk_size = triton.next_power_of_2(triton.cdiv(BT, inc_factor))
    num_chunks = triton.cdiv(BT, chunk_size) if compute_grad else 1

    grad_weight = torch.zeros_like(weight, device=device) if weight.requires_grad else None
    loss_1d = torch.zeros(BT, dtype=torch.float32, device=device)
    use_mm_out = _can_use_mm_out(_input, weight)
    logits_storage = torch.empty((chunk_size, V), dtype=_input.dtype, device=device) if use_mm_out else None
    for chunk_id in range(num_chunks):
        start_idx = chunk_id * (BT // num_chunks)
        end_idx = min((chunk_id + 1) * (BT // num_chunks), BT)
        _input_chunk = _input[start_idx:end_idx]
        if logits_storage is not None:
            logits_chunk = logits_storage[: end_idx - start_idx]
            torch.mm(_input_chunk, weight.t(), out=logits_chunk)
        else:
            logits_chunk = _input_chunk @ weight.t()
        if bias is not None:
            logits_chunk = logits_chunk + bias
        target_chunk = target[start_idx:end_idx]
        n_rows = logits_chunk.shape[0]
        loss_1d_slice = loss_1d[start_idx:end_idx]
        liger_cross_entropy_kernel[(n_rows,)](
            X_ptr=logits_chunk, X_stride=logits_chunk.stride(-2), Y_ptr=target_chunk,
            Y_stride=target_chunk.stride(-1), loss_ptr=loss_1d_slice, n_cols=V,
            ignore_index=ignore_index, label_smoothing=label_smoothing, reduction=reduction,
            BLOCK_SIZE=BLOCK_SIZE, num_warps=32,
        )
    loss = torch.sum(loss_1d)
    return loss, None, grad_weight, None


class LigerFusedLinearCrossEntropyFunction(torch.autograd.Function):
    @staticmethod
    @amp_custom_fwd
    def forward(ctx, _input, weight, target, bias=None, ignore_index=-100, label_smoothing=0.0,
                reduction="mean", compute_grad=True):
        loss, grad_input, grad_weight, grad_bias = fused_linear_cross_entropy_forward(
            _input, weight, target, bias, ignore_index, label_smoothing, reduction, compute_grad)
        ctx.save_for_backward(grad_input, grad_weight, grad_bias)
        return loss

    @staticmethod
    @amp_custom_bwd
    def backward(ctx, grad_output):
        raise NotImplementedError


class LigerFusedLinearCrossEntropyLoss(torch.nn.Module):
    def __init__(self, ignore_index=-100, label_smoothing=0.0, reduction="mean"):
        super().__init__()
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing
        self.reduction = reduction

    def forward(self, lin_weight, _input, target, bias=None):
        grad = torch.is_grad_enabled()
        if grad:
            return LigerFusedLinearCrossEntropyFunction.apply(
                _input, lin_weight, target, bias, self.ignore_index, self.label_smoothing, self.reduction, grad
            )
        loss, *_ = fused_linear_cross_entropy_forward(
            _input, lin_weight, target, bias, self.ignore_index, self.label_smoothing, self.reduction, grad
        )
        return loss
