from typing import Any, Dict

import torch
from torch import nn

from .dora import DoraLinearLayer
from .tuners_utils import BaseTunerLayer


class LoraLayer(BaseTunerLayer):
    adapter_layer_names = ("lora_A", "lora_B", "lora_magnitude_vector")
    other_param_names = ("r", "lora_alpha", "scaling", "lora_dropout")

    def __init__(self, base_layer: nn.Module, **kwargs) -> None:
        self.base_layer = base_layer
        self.r: Dict[str, int] = {}
        self.lora_alpha: Dict[str, float] = {}
        self.scaling: Dict[str, float] = {}
        self.lora_dropout = nn.ModuleDict({})
        self.lora_A = nn.ModuleDict({})
        self.lora_B = nn.ModuleDict({})
        self.lora_magnitude_vector = nn.ModuleDict()
        self.use_dora: Dict[str, bool] = {}
        self.in_features = base_layer.in_features
        self.out_features = base_layer.out_features

    def update_layer(self, adapter_name: str, r: int, lora_alpha: float, lora_dropout: float,
                     use_dora: bool = False) -> None:
        self.r[adapter_name] = r
        self.lora_alpha[adapter_name] = lora_alpha
        self.lora_dropout[adapter_name] = nn.Dropout(p=lora_dropout) if lora_dropout > 0.0 else nn.Identity()
        self.lora_A[adapter_name] = nn.Linear(self.in_features, r, bias=False)
        self.lora_B[adapter_name] = nn.Linear(r, self.out_features, bias=False)
        self.scaling[adapter_name] = lora_alpha / r
        self.use_dora[adapter_name] = use_dora
        if use_dora:
            dora_layer = DoraLinearLayer(fan_in_fan_out=False)
            dora_layer.update_layer(
                base_layer=self.get_base_layer(),
                lora_A=self.lora_A[adapter_name].weight,
                lora_B=self.lora_B[adapter_name].weight,
                scaling=self.scaling[adapter_name],
            )
            self.lora_magnitude_vector[adapter_name] = dora_layer


class Linear(nn.Module, LoraLayer):
    def __init__(self, base_layer: nn.Module, adapter_name: str, r: int = 0, lora_alpha: int = 1,
                 lora_dropout: float = 0.0, use_dora: bool = False, **kwargs) -> None:
        super().__init__()
        LoraLayer.__init__(self, base_layer, **kwargs)
        self._active_adapter = adapter_name
        self.update_layer(adapter_name, r, lora_alpha=lora_alpha, lora_dropout=lora_dropout, use_dora=use_dora)

    def _check_forward_args(self, x: torch.Tensor, *args: Any, **kwargs: Any) -> None:
        adapter_names = kwargs.get("adapter_names", None)
        if adapter_names is None:
            return
        if len(x) != len(adapter_names):
            raise ValueError(
                "Length of `adapter_names` should be the same as the number of inputs, but got "
                f"{len(adapter_names)} and {len(x)} respectively."
            )
        if self.requires_backward:
            raise ValueError("Cannot pass `adapter_names` while gradients are being recorded.")

    def forward(self, x: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        self._check_forward_args(x, *args, **kwargs)
        kwargs.pop("adapter_names", None)
        if self.disable_adapters or self.merged:
            return self.base_layer(x, *args, **kwargs)
        result = self.base_layer(x, *args, **kwargs)
        torch_result_dtype = result.dtype
        for active_adapter in self.active_adapters:
            if active_adapter not in self.lora_A.keys():
                continue
            lora_A = self.lora_A[active_adapter]
            lora_B = self.lora_B[active_adapter]
            dropout = self.lora_dropout[active_adapter]
            scaling = self.scaling[active_adapter]
            x = self._cast_input_dtype(x, lora_A.weight.dtype)
            if not self.use_dora[active_adapter]:
                result = result + lora_B(lora_A(dropout(x))) * scaling
            else:
                if isinstance(dropout, nn.Identity) or not self.requires_backward:
                    base_result = result
                else:
                    x = dropout(x)
                    base_result = None
                result = result + self.lora_magnitude_vector[active_adapter](
                    x,
                    lora_A=lora_A,
                    lora_B=lora_B,
                    scaling=scaling,
                    base_layer=self.get_base_layer(),
                    base_result=base_result,
                )
        return result.to(torch_result_dtype)
