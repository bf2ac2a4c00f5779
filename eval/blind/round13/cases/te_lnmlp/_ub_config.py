# adapted from NVIDIA/TransformerEngine transformer_engine/pytorch/module/layernorm_mlp.py
"""Userbuffers (comm+GEMM overlap) configuration for the fused MLP."""
from dataclasses import dataclass


@dataclass(frozen=True)
class UbOverlapConfig:
    """Resolved Userbuffers overlap switches for one forward call."""

    overlap_ag: bool = False
    overlap_rs: bool = False
    overlap_rs_dgrad: bool = False
    bulk_wgrad: bool = False
    bulk_dgrad: bool = False


def resolve_ub_config(
    ub_overlap_ag: bool,
    ub_overlap_rs: bool,
    ub_overlap_rs_dgrad: bool,
    ub_bulk_wgrad: bool,
    ub_bulk_dgrad: bool,
    is_grad_enabled: bool,
    return_layernorm_output: bool,
    debug: bool = False,
) -> UbOverlapConfig:
    """Configure Userbuffers communication (comm+GEMM overlap)"""
    if debug:  # turn off userbuffers in debug mode
        return UbOverlapConfig()
    return UbOverlapConfig(
        overlap_ag=ub_overlap_ag and is_grad_enabled and not return_layernorm_output,
        overlap_rs=ub_overlap_rs and is_grad_enabled,
        overlap_rs_dgrad=ub_overlap_rs_dgrad,
        bulk_wgrad=ub_bulk_wgrad,
        bulk_dgrad=ub_bulk_dgrad,
    )
