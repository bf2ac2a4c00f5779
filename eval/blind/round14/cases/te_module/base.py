# adapted from NVIDIA/TransformerEngine transformer_engine/pytorch/module/base.py
"""Base modules and utilities for TransformerEngine PyTorch API"""
import os
import warnings
from abc import ABC, abstractmethod
from contextlib import contextmanager
from typing import Dict, Generator, List, Optional, Tuple, Union

import torch

import transformer_engine_extensions as tex
from ..fp8 import FP8GlobalStateManager, get_default_fp8_recipe
from ..distributed import is_fp8_activation_recompute_enabled, in_fp8_activation_recompute_phase
from ._common import _ParameterInitMeta, ub_overlap_permitted

_2X_ACC_FPROP = False
_cublas_workspace = None
_ub_communicators = None


def get_workspace() -> torch.Tensor:
    """Returns workspace for cublas."""
    global _cublas_workspace
    if _cublas_workspace is None:
        _cublas_workspace = torch.empty(33_554_432, dtype=torch.uint8, device="cuda")
    return _cublas_workspace


def get_ub(name: str):
    """Get userbuffer communicator corresponding to give key."""
    assert _ub_communicators is not None, "UB manager is not initialized."
    assert name in _ub_communicators, f"UB for {name} is not registered."
    return _ub_communicators[name]


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
        self.param_init_meta = {}
        self.primary_weights_in_fp8 = FP8GlobalStateManager.with_fp8_parameters()

    def init_fp8_metadata(self, num_gemms: int = 1) -> None:
        """Initialize fp8 related metadata and tensors during fprop."""
        self.fp8 = FP8GlobalStateManager.is_fp8_enabled()
        self.fp8_calibration = FP8GlobalStateManager.is_fp8_calibration()
        self.fp8_meta["fp8_checkpoint"] = self.fp8 or self.fp8_calibration
        if self.fp8 or self.fp8_calibration:
            self.fp8_meta["recipe"] = FP8GlobalStateManager.get_fp8_recipe()
            self.fp8_meta["num_gemms"] = num_gemms
            self.fp8_initialized = True

    @contextmanager
    def prepare_forward(
        self,
        inp: torch.Tensor,
        is_first_microbatch: Union[bool, None],
        num_gemms: int = 1,
        allow_non_contiguous: bool = False,
    ) -> Generator[torch.Tensor, None, None]:
        """Checks and prep for FWD.
        The context manager is needed because there isn't a way for a module to know
        if it's the last FP8 module in the forward autocast. It is useful
        to setup the forward aggregated amax reduction for every module
        just in case. The autocast exit will pick up the most recent one.
        """
        self.init_fp8_metadata(num_gemms=num_gemms)
        self.fp8_meta["ub_overlap_permitted"] = ub_overlap_permitted()

        if self.fp8 and self.sequence_parallel:
            assert self.fp8_meta["recipe"].reduce_amax, \
                "Amax reduction across tensor parallel group is necessary when using sequence parallelism with FP8."

        if self.fp8 and in_fp8_activation_recompute_phase():
            FP8GlobalStateManager.get_old_fp8_meta_tensors_for_recompute(self.fp8_meta)
        elif self.fp8 and self.training and is_fp8_activation_recompute_enabled():
            FP8GlobalStateManager.copy_forward_fp8_meta_tensors_for_recompute(self.fp8_meta)

        with torch.cuda.nvtx.range(self.__class__.__name__ + " forward"):
            if not allow_non_contiguous:
                yield inp.contiguous()
            else:
                yield inp

        if self.fp8 and in_fp8_activation_recompute_phase():
            FP8GlobalStateManager.restore_fp8_meta_tensors(self.fp8_meta)
            return

        if self.fp8 and self.fp8_meta["recipe"].reduce_amax and torch.is_grad_enabled():
            FP8GlobalStateManager.reduce_and_update_fp8_tensors(forward=True, fp8_group=self.fp8_meta["fp8_group"])

    def set_tensor_parallel_group(self, tp_group) -> None:
        """Set TP group."""
        self.tp_group = tp_group
        self.tp_size = tp_group.size() if tp_group is not None else 1

    def register_parameter(self, name, param, **kwargs):
        super().register_parameter(name, param)
        self.param_init_meta[name] = _ParameterInitMeta(**kwargs)

    @abstractmethod
    def forward(self):
        """Needs override."""

    @abstractmethod
    def get_fp8_weights_scratchpad(self, is_first_microbatch: Union[bool, None]) -> List[torch.Tensor]:
        """Needs override."""
