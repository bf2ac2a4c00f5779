from contextlib import contextmanager, nullcontext
from typing import Any, Generator, Optional

import torch
from torch import nn

from lightning.fabric.plugins import Precision
from lightning.fabric.strategies import Strategy
from lightning.fabric.utilities.types import _DEVICE


class MixedPrecision(Precision):
    def __init__(self, precision: str, device: str, scaler: Optional[torch.amp.GradScaler] = None) -> None:
        self.precision = precision
        self.device = device
        self.scaler = scaler
        self._desired_input_dtype = torch.bfloat16 if precision == "bf16-mixed" else torch.float16

    def autocast_context_manager(self) -> torch.autocast:
        return torch.autocast(self.device, dtype=self._desired_input_dtype)

    @contextmanager
    def forward_context(self) -> Generator[None, None, None]:
        with self.autocast_context_manager():
            yield


class _FabricModule(nn.Module):
    def __init__(self, forward_module: nn.Module, strategy: Strategy,
                 original_module: Optional[nn.Module] = None) -> None:
        super().__init__()
        self._forward_module = forward_module
        self._original_module = original_module or forward_module
        self._strategy = strategy
        self._precision = strategy.precision
        self._skip_backward_sync = False
        self._grad_mode_at_call = True

    @property
    def module(self) -> nn.Module:
        return self._original_module or self._forward_module

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self._grad_mode_at_call = torch.is_grad_enabled()
        return super().__call__(*args, **kwargs)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        args, kwargs = self._precision.convert_input((args, kwargs))
        if hasattr(self._forward_module, "require_backward_grad_sync"):
            self._forward_module.require_backward_grad_sync = self._grad_mode_at_call and not self._skip_backward_sync
        precision_context = self._precision.forward_context() if self._grad_mode_at_call else nullcontext()
        with precision_context:
            output = self._forward_module(*args, **kwargs)
        output = self._precision.convert_output(output)
        return output

    @contextmanager
    def no_backward_sync(self, enabled: bool = True) -> Generator[None, None, None]:
        previous = self._skip_backward_sync
        self._skip_backward_sync = enabled
        try:
            yield
        finally:
            self._skip_backward_sync = previous

    def to(self, device: _DEVICE) -> "_FabricModule":
        self._forward_module.to(device)
        return self
