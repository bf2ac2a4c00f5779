"""Modelled on TransformerEngine transformer_engine/pytorch/module/base.py
(TransformerEngineBaseModule.prepare_forward / init_fp8_metadata) and fp8.py (FP8GlobalStateManager)."""
from contextlib import contextmanager
from typing import Generator, Optional

import torch

from transformer_engine.pytorch.fp8 import FP8GlobalStateManager
from transformer_engine.pytorch.distributed import (
    in_fp8_activation_recompute_phase,
    is_fp8_activation_recompute_enabled,
)
from transformer_engine.pytorch.fp8 import (
    copy_forward_fp8_meta_tensors_for_recompute,
    get_old_fp8_meta_tensors_for_recompute,
    restore_fp8_meta_tensors,
)


class TransformerEngineBaseModule(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fp8 = False
        self.fp8_calibration = False
        self.fp8_meta = {"fp8_checkpoint": False, "recipe": None}
        self.sequence_parallel = False
        self.tp_group = None
        self.activation_dtype: Optional[torch.dtype] = None

    def init_fp8_metadata(self, num_gemms: int = 1):
        self.fp8 = FP8GlobalStateManager.is_fp8_enabled()
        self.fp8_calibration = FP8GlobalStateManager.is_fp8_calibration()
        self.fp8_meta["fp8_checkpoint"] = self.fp8 or self.fp8_calibration
        if self.fp8:
            self.fp8_meta["recipe"] = FP8GlobalStateManager.get_fp8_recipe()

    @contextmanager
    def prepare_forward(self, inp: torch.Tensor, num_gemms: int = 1) -> Generator[torch.Tensor, None, None]:
        self.init_fp8_metadata(num_gemms=num_gemms)
        grad_mode = torch.is_grad_enabled()

        if self.fp8 and self.sequence_parallel:
            assert self.fp8_meta["recipe"].reduce_amax, "Amax reduction across TP+SP is required"

        # Activation recomputation: first (no_grad) forward stashes the fp8 scales so that the
        # recompute sees the same ones.
        if self.fp8 and self.training and is_fp8_activation_recompute_enabled() and not grad_mode:
            copy_forward_fp8_meta_tensors_for_recompute(self.fp8_meta)

        with torch.cuda.nvtx.range(self.__class__.__name__ + " forward"):
            if self.fp8 and in_fp8_activation_recompute_phase():
                get_old_fp8_meta_tensors_for_recompute(self.fp8_meta)
            elif self.fp8 and grad_mode:
                # register this module's amax buffers for the global (TP/DP) amax all-reduce
                FP8GlobalStateManager.add_fp8_tensors_to_global_buffer(self.fp8_meta)
            yield inp.contiguous()

        if self.fp8 and in_fp8_activation_recompute_phase():
            restore_fp8_meta_tensors(self.fp8_meta)
