# adapted from state-spaces/mamba mamba_ssm/ops/selective_scan_interface.py
from .ops import selective_scan_fn, mamba_inner_fn
from .mixer import MambaMixer

__all__ = ["selective_scan_fn", "mamba_inner_fn", "MambaMixer"]
