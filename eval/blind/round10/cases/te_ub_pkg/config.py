# Adapted from NVIDIA/TransformerEngine transformer_engine/pytorch/module/base.py (prepare_forward state)
from dataclasses import dataclass
import torch


@dataclass
class FwdConfig:
    ub_overlap_rs_fprop: bool
    ub_overlap_ag_fprop: bool
    is_grad_enabled: bool
    fp8: bool = False


def make_fwd_config(module) -> FwdConfig:
    return FwdConfig(
        ub_overlap_rs_fprop=module.ub_overlap_rs,
        ub_overlap_ag_fprop=module.ub_overlap_ag,
        is_grad_enabled=torch.is_grad_enabled(),
        fp8=getattr(module, "fp8", False),
    )
