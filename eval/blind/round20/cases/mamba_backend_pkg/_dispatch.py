# adapted from state-spaces/mamba mamba_ssm/ops/selective_scan_interface.py
import torch

from .backend import ScanBackend


def make_scan_backend() -> ScanBackend:
    return ScanBackend(fused=torch.is_grad_enabled())
