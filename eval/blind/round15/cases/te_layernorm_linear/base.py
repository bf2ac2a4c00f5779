# adapted from NVIDIA/TransformerEngine transformer_engine/pytorch/module/base.py
"""Base modules and utilities for TransformerEngine PyTorch API"""
import os
from abc import ABC
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Generator, Optional

import torch

import transformer_engine_torch as tex
from ..fp8 import FP8GlobalStateManager, get_default_fp8_recipe
from ..distributed import get_distributed_world_size

_2X_ACC_FPROP = False
_2X_ACC_DGRAD = True
_2X_ACC_WGRAD = True
_cublas_workspace = None
_ub_communicators = None
_NUM_MAX_UB_STREAMS = 3


def get_cublas_workspace_size_bytes() -> None:
    """Return 32 MiB if using hopper, 4 MiB for all other architectures."""
    if torch.cuda.get_device_properties(torch.cuda.current_device()).major >= 9:
        return 33_554_432
    return 4_194_304


def get_workspace() -> torch.Tensor:
    """Returns workspace for cublas."""
    global _cublas_workspace
    if _cublas_workspace is None:
        _cublas_workspace = torch.empty(get_cublas_workspace_size_bytes(), dtype=torch.uint8, device="cuda")
    return _cublas_workspace


def initialize_ub(shape: list, tp_size: int, use_fp8: bool = False, dtype: torch.dtype = torch.bfloat16, ub_cfgs: Optional[dict] = None) -> None:
    """Initialize communicators for TP comm overlap using userbuffers."""
    global _ub_communicators
    assert _ub_communicators is None, "UB communicators are already initialized."
    _ub_communicators = {}
    rank_id = torch.distributed.get_rank()
    global _cublas_workspace
    _cublas_workspace = get_workspace().repeat(_NUM_MAX_UB_STREAMS)
    for name in ("qkv_fprop", "fc1_fprop", "proj_fprop", "fc2_fprop", "qkv_dgrad", "fc1_dgrad"):
        sample_buffer = torch.empty(shape, dtype=torch.uint8 if use_fp8 else dtype, device="cuda")
        if name.endswith("_fprop") and name in ("qkv_fprop", "fc1_fprop"):
            ub_obj = tex.CommOverlapP2P(sample_buffer, rank_id, tp_size, 16, 2, 0, _NUM_MAX_UB_STREAMS)
        else:
            ub_obj = tex.CommOverlap(sample_buffer, rank_id, tp_size, 16, 2, 4, 0, _NUM_MAX_UB_STREAMS)
        _ub_communicators[name] = ub_obj


def get_ub(name: str):
    """Get userbuffer communicator corresponding to give key."""
    assert _ub_communicators is not None, "UB manager is not initialized."
    assert name in _ub_communicators, f"UB for {name} is not registered."
    return _ub_communicators[name]


def destroy_ub():
    global _ub_communicators
    _ub_communicators = None


@dataclass
class UbOverlapConfig:
    """Resolved userbuffer overlap settings for one GEMM."""

    name: str
    overlap_ag: bool = False
    atomic_gemm_ag: bool = False
    overlap_rs_dgrad: bool = False


def resolve_ub_overlap(
    ub_name: str,
    tp_group,
    ub_overlap_ag: bool,
    ub_atomic_gemm_ag: bool,
    ub_overlap_rs_dgrad: bool,
    is_grad_enabled: bool,
    return_layernorm_output: bool,
) -> UbOverlapConfig:
    if get_distributed_world_size(tp_group) == 1:
        return UbOverlapConfig(name=ub_name)
    overlap_ag = (ub_overlap_ag or ub_atomic_gemm_ag) and is_grad_enabled and not return_layernorm_output
    return UbOverlapConfig(
        name=ub_name,
        overlap_ag=overlap_ag,
        atomic_gemm_ag=ub_atomic_gemm_ag and overlap_ag,
        overlap_rs_dgrad=ub_overlap_rs_dgrad,
    )


class TransformerEngineBaseModule(torch.nn.Module, ABC):
    """Base TE module."""

    def __init__(self) -> None:
        super().__init__()
        assert torch.cuda.is_available(), "TransformerEngine needs CUDA."
        self.fp8_initialized = False
        self.fp8 = False
        self.fp8_calibration = False
        self.fp8_meta = {}
        self.fp8_meta["fp8_checkpoint"] = False
        self.fp8_meta["fp8_group"] = None
        self.fp8_meta["recipe"] = get_default_fp8_recipe()
        self.tp_group = None
        self.tp_size = 1
        self.sequence_parallel = False
        self.activation_dtype = torch.float32

    def set_activation_dtype(self, inp: torch.Tensor) -> None:
        """Get activation data type for AMP."""
        # Native AMP (`torch.autocast`) gets highest priority
        if torch.is_autocast_enabled():
            self.activation_dtype = torch.get_autocast_gpu_dtype()
            return
        dtype = inp.dtype
        for name, param in self.named_parameters():
            if param is not None:
                assert dtype == param.dtype, (
                    "Data types for parameters must match when outside of autocasted region. "
                    f" Found input dtype: {dtype} and {name!r} dtype: {param.dtype}"
                )
        self.activation_dtype = dtype

    def set_tensor_parallel_group(self, tp_group) -> None:
        self.tp_group = tp_group
        self.tp_group_initialized = True

    def init_fp8_metadata(self, num_gemms: int = 1) -> None:
        self.fp8 = FP8GlobalStateManager.is_fp8_enabled()
        self.fp8_calibration = FP8GlobalStateManager.is_fp8_calibration()
        self.fp8_meta["num_gemms"] = num_gemms

    @contextmanager
    def prepare_forward(self, inp: torch.Tensor, num_gemms: int = 1) -> Generator[torch.Tensor, None, None]:
        self.set_activation_dtype(inp)
        self.init_fp8_metadata(num_gemms=num_gemms)
        if self.fp8 and self.sequence_parallel:
            assert self.fp8_meta["recipe"].reduce_amax, (
                "Amax reduction across tensor parallel group is "
                "necessary when using sequence parallelism with FP8."
            )
        with torch.cuda.nvtx.range(self.__class__.__name__ + " forward"):
            yield inp.contiguous()
