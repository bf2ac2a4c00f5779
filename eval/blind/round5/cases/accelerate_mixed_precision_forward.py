"""Modelled on accelerate src/accelerate/accelerator.py (Accelerator.prepare_model autocast
wrapping) and utils/operations.py (ConvertOutputsToFp32, convert_outputs_to_fp32)."""
import contextlib
import functools

import torch

from accelerate.utils.operations import convert_to_fp32


class ConvertOutputsToFp32:
    def __init__(self, model_forward):
        self.model_forward = model_forward
        functools.update_wrapper(self, model_forward)

    def __call__(self, *args, **kwargs):
        outputs = self.model_forward(*args, **kwargs)
        # the fp32 copy is only needed for a numerically stable loss/backward
        try:
            want_fp32 = torch.is_grad_enabled()
        except RuntimeError:
            want_fp32 = True
        return convert_to_fp32(outputs) if want_fp32 else outputs


def _autocast_ctx(mixed_precision: str, device_type: str = "cuda"):
    grad_enabled = torch.is_grad_enabled
    if mixed_precision == "no":
        return contextlib.nullcontext()
    dtype = torch.bfloat16 if mixed_precision == "bf16" else torch.float16
    return torch.autocast(device_type=device_type, dtype=dtype) if grad_enabled() else contextlib.nullcontext()


def prepare_model(model: torch.nn.Module, mixed_precision: str = "bf16", device_type: str = "cuda"):
    model._original_forward = model.forward
    original_forward = model.__dict__.pop("_original_forward")

    @functools.wraps(original_forward)
    def forward(*args, **kwargs):
        with _autocast_ctx(mixed_precision, device_type):
            return original_forward(*args, **kwargs)

    model.forward = ConvertOutputsToFp32(forward)
    return model
