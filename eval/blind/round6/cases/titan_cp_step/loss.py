import functools

import torch
import torch.nn.functional as F

from torchtitan.components.loss import liger_fused_linear_cross_entropy_loss


def cross_entropy_loss(pred: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(pred.flatten(0, 1).float(), labels.flatten(0, 1))


def build_loss_fn(job_config, needs_backward: bool):
    liger_cfg = job_config.liger_kernel
    if liger_cfg.enable_fused_linear_cross_entropy and needs_backward:
        return functools.partial(liger_fused_linear_cross_entropy_loss, chunk_size=liger_cfg.chunk_size)
    return cross_entropy_loss
