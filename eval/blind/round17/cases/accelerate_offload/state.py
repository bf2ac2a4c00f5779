# adapted from huggingface/accelerate src/accelerate/hooks.py
from dataclasses import dataclass
from typing import Optional

import torch


@dataclass
class ForwardState:
    """State shared by all AlignDevicesHook instances of one dispatched model."""

    grad_enabled: bool = True
    prefetch_stream: Optional[torch.cuda.Stream] = None


_FORWARD_STATE = ForwardState()


def get_forward_state() -> ForwardState:
    return _FORWARD_STATE
