# adapted from huggingface/peft src/peft/tuners/lora/layer.py
from __future__ import annotations

from typing import Any

import torch
import torch.nn as nn

from peft.tuners.tuners_utils import BaseTunerLayer


class LoraLayer(BaseTunerLayer):
    adapter_layer_names: tuple[str, ...] = ("lora_A", "lora_B", "lora_embedding_A", "lora_embedding_B")
    other_param_names: tuple[str, ...] = ("r", "lora_alpha", "scaling", "lora_dropout")

    def __init__(self, base_layer: nn.Module, ephemeral_gpu_offload: bool = False, **kwargs) -> None:
        self.base_layer = base_layer
        self.r = {}
        self.lora_alpha = {}
        self.scaling = {}
        self.lora_dropout = nn.ModuleDict({})
        self.lora_A = nn.ModuleDict({})
        self.lora_B = nn.ModuleDict({})
        self._disable_adapters = False
        self.merged_adapters = []
        self.lora_variant = {}
        self.cast_input_dtype_enabled: bool = True


class Linear(nn.Module, LoraLayer):
    # dropout on the adapter path is tied to autograd being on
    _adapter_dropout_active = staticmethod(torch.is_grad_enabled)

    def __init__(self, base_layer, adapter_name: str, r: int = 0, lora_alpha: int = 1,
                 lora_dropout: float = 0.0, **kwargs) -> None:
        super().__init__()
        LoraLayer.__init__(self, base_layer, **kwargs)
        self._active_adapter = adapter_name

    def forward(self, x: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        if self.disable_adapters:
            if self.merged:
                self.unmerge()
            return self.base_layer(x, *args, **kwargs)
        if self.merged:
            return self.base_layer(x, *args, **kwargs)
        result = self.base_layer(x, *args, **kwargs)
        torch_result_dtype = result.dtype
        for active_adapter in self.active_adapters:
            if active_adapter not in self.lora_A.keys():
                continue
            lora_A = self.lora_A[active_adapter]
            lora_B = self.lora_B[active_adapter]
            if self._adapter_dropout_active():
                dropout = self.lora_dropout[active_adapter]
            else:
                dropout = nn.Identity()
            scaling = self.scaling[active_adapter]
            if not torch.is_autocast_enabled():
                x = self._cast_input_dtype(x, lora_A.weight.dtype)
            result = result + lora_B(lora_A(dropout(x))) * scaling
        return result.to(torch_result_dtype)
