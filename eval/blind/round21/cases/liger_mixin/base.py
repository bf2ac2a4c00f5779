# adapted from linkedin/Liger-Kernel src/liger_kernel/ops/rms_norm.py
import torch


class LigerAutogradMixin:
    """Shared helpers for Liger module wrappers."""

    def _in_autograd(self) -> bool:
        return torch.is_grad_enabled()
