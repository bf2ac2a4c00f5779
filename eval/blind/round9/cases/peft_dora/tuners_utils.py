from typing import Any, List, Union

import torch
from torch import nn


class BaseTunerLayer:
    adapter_layer_names: tuple = ()
    other_param_names: tuple = ()
    _disable_adapters: bool = False
    _active_adapter: Union[str, List[str]] = "default"
    merged_adapters: List[str] = []

    def get_base_layer(self) -> nn.Module:
        base_layer = self
        while hasattr(base_layer, "base_layer"):
            base_layer = base_layer.base_layer
        return base_layer

    @property
    def weight(self) -> torch.Tensor:
        base_layer = self.get_base_layer()
        if hasattr(base_layer, "qweight"):
            return base_layer.qweight
        return base_layer.weight

    @property
    def merged(self) -> bool:
        return bool(self.merged_adapters)

    @property
    def disable_adapters(self) -> bool:
        return self._disable_adapters

    @property
    def active_adapters(self) -> List[str]:
        if isinstance(self._active_adapter, str):
            return [self._active_adapter]
        return self._active_adapter

    @property
    def requires_backward(self) -> bool:
        return torch.is_grad_enabled()

    def _cast_input_dtype(self, x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        if x.dtype == dtype:
            return x
        return x.to(dtype=dtype)
