# adapted from state-spaces/mamba mamba_ssm/ops/selective_scan_interface.py
from .mixer import MambaMixer

__all__ = ["MambaMixer"]
