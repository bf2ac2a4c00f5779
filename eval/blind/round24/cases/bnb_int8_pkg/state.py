# adapted from bitsandbytes-foundation/bitsandbytes bitsandbytes/nn/modules.py
from dataclasses import dataclass
from typing import Optional

import torch


@dataclass
class MatmulLtState:
    CB: Optional[torch.Tensor] = None
    SCB: Optional[torch.Tensor] = None
    threshold: float = 0.0
    has_fp16_weights: bool = True
    is_training: bool = True
    use_pool: bool = False
