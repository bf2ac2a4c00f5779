# Adapted from NVIDIA/TransformerEngine transformer_engine/pytorch/module/linear.py (Linear.forward argument setup).
from dataclasses import dataclass

import torch


@dataclass
class UbOverlapConfig:
    ag_fprop: bool
    rs_fprop: bool
    grad_enabled: bool
    ub_name: str = "proj"


def make_overlap_config(module) -> UbOverlapConfig:
    return UbOverlapConfig(
        ag_fprop=module.ub_overlap_ag_fprop,
        rs_fprop=module.ub_overlap_rs_fprop,
        grad_enabled=torch.is_grad_enabled(),
        ub_name=module.ub_name,
    )
