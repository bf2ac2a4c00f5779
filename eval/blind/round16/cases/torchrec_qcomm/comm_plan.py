# adapted from pytorch/torchrec torchrec/distributed/types.py
from dataclasses import dataclass
from typing import Optional

import torch

from .codecs import QuantizedCommCodec


@dataclass(frozen=True)
class CommPlan:
    """Per-call communication plan for a pooled-embedding all-to-all."""

    grad_mode: bool
    has_forward_codec: bool
    has_backward_codec: bool


def make_comm_plan(forward_codec: Optional[QuantizedCommCodec], backward_codec: Optional[QuantizedCommCodec]) -> CommPlan:
    return CommPlan(
        grad_mode=torch.is_grad_enabled(),
        has_forward_codec=forward_codec is not None,
        has_backward_codec=backward_codec is not None,
    )
