# adapted from linkedin/Liger-Kernel src/liger_kernel/ops/cross_entropy.py
import torch
import triton

from liger_kernel.ops.utils import element_mul_kernel, liger_cross_entropy_kernel

MAX_FUSED_SIZE = 65536 // 2

_grad_on = torch.is_grad_enabled


def cross_entropy_forward(_input, target, ignore_index, label_smoothing, lse_square_scale, return_z_loss):
    BT, V = _input.shape
    n_rows = BT

    BLOCK_SIZE = min(MAX_FUSED_SIZE, triton.next_power_of_2(V))

    # unreduced loss
    loss_1d = torch.zeros(n_rows, dtype=_input.dtype, device=_input.device)
    if return_z_loss:
        z_loss_1d = torch.zeros(n_rows, dtype=_input.dtype, device=_input.device)
    else:
        z_loss_1d = loss_1d  # dummy ptr when return_z_loss == False

    n_non_ignore = (target != ignore_index).sum().item()

    if _input.stride(-1) != 1:
        _input = _input.contiguous()
    if target.stride(-1) != 1:
        target = target.contiguous()

    liger_cross_entropy_kernel[(n_rows,)](
        X_ptr=_input,
        X_stride=_input.stride(-2),
        Y_ptr=target,
        Y_stride=target.stride(-1),
        loss_ptr=loss_1d,
        z_loss_ptr=z_loss_1d,
        loss_stride=loss_1d.stride(-1),
        n_cols=V,
        n_non_ignore=n_non_ignore,
        ignore_index=ignore_index,
        label_smoothing=label_smoothing,
        lse_square_scale=lse_square_scale,
        BLOCK_SIZE=BLOCK_SIZE,
        RETURN_Z_LOSS=return_z_loss,
        num_warps=32,
    )

    # accumulate the row losses in fp32 while training so the mean is stable
    loss = torch.sum(loss_1d, dtype=torch.float32 if _grad_on() else None) / n_non_ignore
    if return_z_loss:
        z_loss = torch.sum(z_loss_1d) / n_non_ignore
    else:
        z_loss = None

    return loss, z_loss, _input


def cross_entropy_backward(_input, grad_output):
    if torch.equal(grad_output, torch.tensor(1.0, device=grad_output.device)):
        pass
    else:
        BT, V = _input.shape
        n_rows = BT
        BLOCK_SIZE = min(MAX_FUSED_SIZE, triton.next_power_of_2(V))
        element_mul_kernel[(n_rows,)](
            _input,
            _input.stride(-2),
            grad_output,
            V,
            BLOCK_SIZE=BLOCK_SIZE,
            num_warps=32,
        )
    return _input


class LigerCrossEntropyFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, _input, target, ignore_index=-100, label_smoothing=0.0, lse_square_scale=0.0, return_z_loss=False):
        loss, z_loss, _input = cross_entropy_forward(
            _input,
            target,
            ignore_index,
            label_smoothing,
            lse_square_scale,
            return_z_loss,
        )
        # If we don't detach the _input tensor, the memory will double
        if _grad_on():
            ctx.save_for_backward(_input.detach())
        ctx.return_z_loss = return_z_loss
        return loss, z_loss

    @staticmethod
    def backward(ctx, grad_output, grad_ouput2):
        if ctx.return_z_loss:
            del grad_ouput2  # z_loss is only for logging
        (_input,) = ctx.saved_tensors
        _input = cross_entropy_backward(_input, grad_output)
        return (_input, None, None, None, None, None)


class LigerCrossEntropyLoss(torch.nn.Module):
    def __init__(self, ignore_index=-100, label_smoothing=0.0, lse_square_scale=0.0, return_z_loss=False):
        super().__init__()
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing
        self.lse_square_scale = lse_square_scale
        self.return_z_loss = return_z_loss

    def forward(self, _input, target):
        if not _input.requires_grad:
            # nothing to store the gradient into; keep the caller's logits intact
            _input = _input.clone()
        loss, z_loss = LigerCrossEntropyFunction.apply(
            _input, target, self.ignore_index, self.label_smoothing, self.lse_square_scale, self.return_z_loss
        )
        return loss if not self.return_z_loss else (loss, z_loss)
