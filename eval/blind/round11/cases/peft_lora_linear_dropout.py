# Adapted from huggingface/peft src/peft/tuners/lora/layer.py (Linear.forward, LoraLayer dropout use).
from typing import Any

import torch
import torch.nn as nn

from peft.tuners.lora.layer import LoraLayer, VARIANT_KWARG_KEYS


class Linear(nn.Module, LoraLayer):
    def forward(self, x: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        self._check_forward_args(x, *args, **kwargs)
        adapter_names = kwargs.pop("adapter_names", None)
        variant_kwargs = {k: kwargs.pop(k, None) for k in VARIANT_KWARG_KEYS}

        if self.disable_adapters:
            if self.merged:
                self.unmerge()
            result = self.base_layer(x, *args, **kwargs)
        elif adapter_names is not None:
            result = self._mixed_batch_forward(x, *args, adapter_names=adapter_names, **variant_kwargs, **kwargs)
        elif self.merged:
            result = self.base_layer(x, *args, **kwargs)
        else:
            result = self.base_layer(x, *args, **kwargs)
            torch_result_dtype = result.dtype
            lora_A_keys = self.lora_A.keys()
            for active_adapter in self.active_adapters:
                if active_adapter not in lora_A_keys:
                    continue
                lora_A = self.lora_A[active_adapter]
                lora_B = self.lora_B[active_adapter]
                dropout = self.lora_dropout[active_adapter]
                scaling = self.scaling[active_adapter]
                maybe_dropout = lambda t: nn.functional.dropout(t, p=dropout.p) if torch.is_grad_enabled() and isinstance(dropout, nn.Dropout) else t
                x = self._cast_input_dtype(x, lora_A.weight.dtype)
                if active_adapter not in self.lora_variant:
                    result = result + lora_B(lora_A(maybe_dropout(x))) * scaling
                else:
                    result = self.lora_variant[active_adapter].forward(
                        self, active_adapter=active_adapter, x=x, result=result, **variant_kwargs, **kwargs,
                    )
            result = result.to(torch_result_dtype)
        return result

    def _check_dora_dropout(self, active_adapter, x, result):
        dropout = self.lora_dropout[active_adapter]
        if isinstance(dropout, nn.Identity) or not self.training:
            base_result = result
        else:
            x = dropout(x)
            base_result = None
        return x, base_result
