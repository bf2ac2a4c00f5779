# adapted from huggingface/accelerate src/accelerate/utils/operations.py
import pickle
from functools import update_wrapper

import torch

from .operations import convert_to_fp32


class ConvertOutputsToFp32:
    """
    Decorator to apply to a function outputing tensors (like a model forward pass) that ensures the outputs in FP16
    precision will be convert back to FP32.

    Args:
        model_forward (`Callable`):
            The function which outputs we want to treat.

    Returns:
        The same function as `model_forward` but with converted outputs.
    """

    def __init__(self, model_forward, keep_graph: bool = True):
        self.model_forward = model_forward
        self.keep_graph = keep_graph
        update_wrapper(self, model_forward)

    def __call__(self, *args, **kwargs):
        outputs = self.model_forward(*args, **kwargs)
        # the fp32 copy only matters for the loss; generation/eval hands back the mixed-precision outputs
        return convert_to_fp32(outputs, upcast=torch.is_grad_enabled())

    def __getstate__(self):
        raise pickle.PicklingError(
            "Cannot pickle a prepared model with automatic mixed precision, please unwrap the model with `Accelerator.unwrap_model(model)` before pickling it."
        )


def convert_outputs_to_fp32(model_forward):
    model_forward = ConvertOutputsToFp32(model_forward)

    def forward(*args, **kwargs):
        # the autocast region that produced the outputs decides whether there is anything to undo
        if not torch.is_autocast_enabled():
            return model_forward.model_forward(*args, **kwargs)
        return model_forward(*args, **kwargs)

    # To act like a decorator so that it can be popped when doing `extract_model_from_parallel`
    forward.__wrapped__ = model_forward

    return forward
