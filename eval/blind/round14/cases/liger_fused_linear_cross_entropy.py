# adapted from linkedin/Liger-Kernel src/liger_kernel/ops/fused_linear_cross_entropy.py
import torch
import triton

from packaging.version import Version

from liger_kernel.ops.cross_entropy import liger_cross_entropy_kernel
from liger_kernel.ops.utils import amp_custom_bwd
from liger_kernel.ops.utils import amp_custom_fwd
from liger_kernel.ops.utils import element_mul_kernel
from liger_kernel.ops.utils import is_hip
from liger_kernel.utils import infer_device

MAX_FUSED_SIZE = 2048 if infer_device() == "npu" else 65536 // 2
_CHUNK_MEM_CONST = 1
_TORCH_VERSION = Version(torch.__version__.split("+")[0])


def _can_use_mm_out(_input, weight):
    # out= bypasses autocast. Only use it when @ would use these exact operands
    # and return their dtype; keep AMP casts/rounding on the original path.
    if (
        _input.device.type != "cuda"
        or is_hip()
        or torch.is_grad_enabled()
        or _input.dtype != weight.dtype
        or _input.dtype not in (torch.float16, torch.bfloat16, torch.float32)
    ):
        return False
    if torch.is_autocast_enabled():
        autocast_dtype = (
            torch.get_autocast_dtype("cuda") if _TORCH_VERSION >= Version("2.4.0") else torch.get_autocast_gpu_dtype()
        )
        return _input.dtype == autocast_dtype
    return True


def fused_linear_cross_entropy_forward(
    _input,
    weight,
    target,
    ce_weight=None,
    bias=None,
    ignore_index=-100,
    lse_square_scale=0.0,
    label_smoothing=0.0,
    reduction="mean",
    softcap=None,
    return_z_loss=False,
    accum_dtype=None,
    compute_gradients=None,
    chunk_mem_const: int = _CHUNK_MEM_CONST,
):
    assert isinstance(return_z_loss, bool), f"return_z_loss must be True or False. Got: {return_z_loss}"
    device = _input.device
    input_requires_grad = _input.requires_grad if compute_gradients is None else compute_gradients

    BT, H = _input.shape
    V = weight.shape[0]
    inc_factor = triton.cdiv(V, chunk_mem_const * H)
    chunk_size = triton.next_power_of_2(triton.cdiv(BT, inc_factor))
    chunk_size = min(chunk_size, BT)
    num_chunks = triton.cdiv(BT, chunk_size)

    grad_input = torch.zeros_like(_input, device=device)
    if input_requires_grad:
        grad_weight = torch.zeros_like(weight, device=device) if weight.requires_grad else None
        grad_bias = torch.zeros_like(bias, device=device) if bias is not None else None
    else:
        grad_weight = None
        grad_bias = None

    loss_1d = torch.zeros(BT, dtype=torch.float32, device=device)
    z_loss_1d = torch.zeros(BT, dtype=_input.dtype, device=_input.device) if return_z_loss else None

    target_mask = target != ignore_index
    total_n_non_ignore = target_mask.sum().item()
    total_sum_non_ignore_ce_weight = total_n_non_ignore
    ce_weight_sum = 0.0
    if ce_weight is not None:
        total_sum_non_ignore_ce_weight = torch.gather(ce_weight, dim=0, index=target.masked_select(target_mask)).sum().item()
        ce_weight_sum = ce_weight.sum().item()

    use_mm_out = _can_use_mm_out(_input, weight)
    logits_storage = (
        torch.empty((chunk_size, V), dtype=_input.dtype, device=device)
        if use_mm_out and (bias is None or bias.dtype == _input.dtype)
        else None
    )

    for chunk_id in range(num_chunks):
        start_idx = chunk_id * chunk_size
        end_idx = min((chunk_id + 1) * chunk_size, BT)
        _input_chunk = _input[start_idx:end_idx]

        if logits_storage is not None:
            logits_chunk = logits_storage[: end_idx - start_idx]
            torch.mm(_input_chunk, weight.t(), out=logits_chunk)
            if bias is not None:
                logits_chunk.add_(bias)
        else:
            logits_chunk = _input_chunk @ weight.t()
            if bias is not None:
                logits_chunk = logits_chunk + bias

        target_chunk = target[start_idx:end_idx].contiguous()
        logits_chunk = logits_chunk.contiguous()
        loss_1d_slice = loss_1d[start_idx:end_idx]
        z_loss_1d_slice = z_loss_1d[start_idx:end_idx] if return_z_loss else None

        liger_cross_entropy_kernel[(end_idx - start_idx,)](
            X_ptr=logits_chunk,
            X_stride=logits_chunk.stride(-2),
            Y_ptr=target_chunk,
            Y_stride=target_chunk.stride(-1),
            weight_ptr=ce_weight,
            loss_ptr=loss_1d_slice,
            z_loss_ptr=z_loss_1d_slice,
            loss_stride=loss_1d_slice.stride(-1),
            n_cols=V,
            n_non_ignore=total_n_non_ignore,
            sum_non_ignore_weight=total_sum_non_ignore_ce_weight,
            weight_sum=ce_weight_sum,
            ignore_index=ignore_index,
            lse_square_scale=lse_square_scale,
            label_smoothing=label_smoothing,
            reduction=reduction,
            softcap=softcap,
            RETURN_Z_LOSS=return_z_loss,
            HAS_WEIGHT=ce_weight is not None,
            HAS_SOFTCAPPING=softcap is not None,
            HAS_GRADIENTS=input_requires_grad,
            BLOCK_SIZE=min(MAX_FUSED_SIZE, triton.next_power_of_2(V)),
            num_warps=32 if not is_hip() else 16,
        )
        grad_logits_chunk = logits_chunk

        if input_requires_grad:
            grad_input[start_idx:end_idx] = grad_logits_chunk @ weight
        if grad_weight is not None and input_requires_grad:
            grad_weight += torch.mm(grad_logits_chunk.t(), _input_chunk).float()
        if bias is not None and input_requires_grad:
            grad_bias += grad_logits_chunk.sum(dim=0)

    if reduction == "none":
        loss = loss_1d
        z_loss = z_loss_1d if return_z_loss else None
    else:
        loss = torch.sum(loss_1d)
        z_loss = torch.sum(z_loss_1d) if return_z_loss else None
    return loss, z_loss, grad_input, grad_weight, grad_bias


class LigerFusedLinearCrossEntropyFunction(torch.autograd.Function):
    @staticmethod
    @amp_custom_fwd
    def forward(ctx, _input, weight, target, bias=None, ce_weight=None, ignore_index=-100, lse_square_scale=0.0,
                label_smoothing=0.0, reduction="mean", softcap=None, return_z_loss: bool = False, accum_dtype=None):
        loss, z_loss, grad_input, grad_weight, grad_bias = fused_linear_cross_entropy_forward(
            _input=_input, weight=weight, target=target, bias=bias, ce_weight=ce_weight,
            ignore_index=ignore_index, lse_square_scale=lse_square_scale, label_smoothing=label_smoothing,
            reduction=reduction, softcap=softcap, return_z_loss=return_z_loss, accum_dtype=accum_dtype,
        )
        ctx.save_for_backward(
            grad_input.detach(),
            grad_weight.detach() if grad_weight is not None else None,
            grad_bias.detach() if bias is not None else None,
        )
        ctx.return_z_loss = return_z_loss
        return loss, z_loss

    @staticmethod
    @amp_custom_bwd
    def backward(ctx, grad_output, grad_output2):
        (grad_input, grad_weight, grad_bias) = ctx.saved_tensors
        if not torch.equal(grad_output, torch.tensor(1.0, device=grad_output.device)):
            BT, H = grad_input.shape
            n_rows = BT
            BLOCK_SIZE = min(MAX_FUSED_SIZE, triton.next_power_of_2(H))
            element_mul_kernel[(n_rows,)](grad_input, grad_input.stride(-2), grad_output, H, BLOCK_SIZE=BLOCK_SIZE)
        return (grad_input, grad_weight, None, grad_bias, None, None, None, None, None, None, None, None)


class LigerFusedLinearCrossEntropyLoss(torch.nn.Module):
    def __init__(self, ce_weight=None, ignore_index: int = -100, lse_square_scale: float = 0.0,
                 label_smoothing: float = 0.0, reduction: str = "mean", softcap=None,
                 return_z_loss: bool = False, accum_dtype=None):
        super().__init__()
        assert 0 <= label_smoothing <= 1, f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}"
        self.ce_weight = ce_weight
        self.ignore_index = ignore_index
        self.lse_square_scale = lse_square_scale
        self.label_smoothing = label_smoothing
        self.reduction = reduction
        self.softcap = softcap
        self.return_z_loss = return_z_loss
        self.accum_dtype = accum_dtype

    def forward(self, lin_weight, _input, target, bias=None):
        label_smoothing = self.label_smoothing if torch.is_grad_enabled() else 0.0
        loss, z_loss = LigerFusedLinearCrossEntropyFunction.apply(
            _input,
            lin_weight,
            target,
            bias,
            self.ce_weight,
            self.ignore_index,
            self.lse_square_scale,
            label_smoothing,
            self.reduction,
            self.softcap,
            self.return_z_loss,
            self.accum_dtype,
        )
        if not self.return_z_loss:
            return loss
        return loss, z_loss
