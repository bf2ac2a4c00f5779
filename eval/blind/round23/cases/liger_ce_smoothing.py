# adapted from linkedin/Liger-Kernel src/liger_kernel/ops/cross_entropy.py
import torch
import triton

MAX_FUSED_SIZE = 65536 // 2


def cross_entropy_forward(_input, target, ignore_index, label_smoothing, lse_square_scale, return_z_loss):
    BT, V = _input.shape
    n_rows = BT
    BLOCK_SIZE = min(MAX_FUSED_SIZE, triton.next_power_of_2(V))
    loss_1d = torch.zeros(n_rows, dtype=_input.dtype, device=_input.device)
    z_loss_1d = torch.zeros(n_rows, dtype=_input.dtype, device=_input.device) if return_z_loss else loss_1d
    n_non_ignore = (target != ignore_index).sum().item()
    if _input.stride(-1) != 1:
        _input = _input.contiguous()
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
        RETURN_Z_LOSS=int(return_z_loss),
        num_warps=32,
    )
    loss = torch.sum(loss_1d) / n_non_ignore
    z_loss = torch.sum(z_loss_1d) / n_non_ignore if return_z_loss else None
    return loss, z_loss, _input


class LigerCrossEntropyFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, _input, target, ignore_index=-100, label_smoothing=0.0,
                lse_square_scale=0.0, return_z_loss=False):
        loss, z_loss, _input = cross_entropy_forward(
            _input, target, ignore_index, label_smoothing, lse_square_scale, return_z_loss,
        )
        ctx.save_for_backward(_input.detach())
        ctx.return_z_loss = return_z_loss
        return loss, z_loss

    @staticmethod
    def backward(ctx, grad_output, grad_ouput2):
        (_input,) = ctx.saved_tensors
        return (_input * grad_output, None, None, None, None, None)


class LigerCrossEntropyLoss(torch.nn.Module):
    def __init__(self, ignore_index=-100, label_smoothing=0.0, lse_square_scale=0.0, return_z_loss=False):
        super().__init__()
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing
        self.lse_square_scale = lse_square_scale
        self.return_z_loss = return_z_loss

    def forward(self, _input, target):
        label_smoothing = self.label_smoothing if torch.is_grad_enabled() else 0.0
        if not _input.requires_grad:
            # the kernel overwrites its input with gradients; keep the caller's logits intact
            _input = _input.clone()
        loss, z_loss = LigerCrossEntropyFunction.apply(
            _input, target, self.ignore_index, label_smoothing,
            self.lse_square_scale, self.return_z_loss,
        )
        return (loss, z_loss) if self.return_z_loss else loss
