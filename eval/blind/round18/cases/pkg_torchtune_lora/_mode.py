# adapted from pytorch/torchtune torchtune/modules/peft/lora.py
import contextlib
from typing import Generator

import torch

# Whether the current recipe step is an optimisation step; set by the recipe around
# each forward so adapters do not need a reference to the recipe.
_LORA_TRAINING: bool = True


@contextlib.contextmanager
def lora_step() -> Generator[None, None, None]:
    global _LORA_TRAINING
    prev = _LORA_TRAINING
    _LORA_TRAINING = torch.is_grad_enabled()
    try:
        yield
    finally:
        _LORA_TRAINING = prev


def is_lora_training() -> bool:
    return _LORA_TRAINING
