# adapted from linkedin/Liger-Kernel src/liger_kernel/ops/fused_linear_cross_entropy.py
import torch
import triton

from packaging.version import Version

from liger_kernel.ops.cross_entropy import liger_cross_entropy_kernel
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
    compute_gradients=None,
    chunk_mem_const: int = _CHUNK_MEM_CONST,
):
    device = _input.device
    input_requires_grad = _input.requires_grad if compute_gradients is None else compute_gradients

    BT, H = _input.shape
    V = weight.shape[0]

    # Bound transient logits to C x BT x H.
    inc_factor = triton.cdiv(V, chunk_mem_const * H)
    chunk_size = triton.next_power_of_2(triton.cdiv(BT, inc_factor))
    chunk_size = min(chunk_size, BT)
    # without autograd there is no grad_input to bound, so run the whole batch at once
    chunk_size = chunk_size if torch.is_grad_enabled() else BT
    num_chunks = triton.cdiv(BT, chunk_size)

    grad_input = torch.zeros_like(_input, device=device)
    loss_1d = torch.zeros(BT, dtype=torch.float32, device=device)
    z_loss_1d = torch.zeros(BT, dtype=_input.dtype, device=_input.device) if return_z_loss else None

    target_mask = target != ignore_index
    total_n_non_ignore = target_mask.sum().item()
    total_sum_non_ignore_ce_weight = total_n_non_ignore
    ce_weight_sum = 0.0

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
        block_size = min(MAX_FUSED_SIZE, triton.next_power_of_2(V))

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
            HAS_GRADIENTS=input_requires_grad and torch.is_grad_enabled(),
            BLOCK_SIZE=block_size,
            num_warps=32 if not is_hip() else 16,
        )
        grad_logits_chunk = logits_chunk
        if input_requires_grad:
            grad_input[start_idx:end_idx] = grad_logits_chunk @ weight

    loss = torch.sum(loss_1d) if reduction != "none" else loss_1d
    return loss, grad_input
