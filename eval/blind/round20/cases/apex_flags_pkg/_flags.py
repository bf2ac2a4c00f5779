# adapted from NVIDIA/apex apex/transformer/tensor_parallel/layers.py
from typing import Any, Dict

import torch

_grad_enabled = torch.is_grad_enabled


def resolve_linear_flags() -> Dict[str, Any]:
    """Runtime knobs for the fused linear, resolved once per forward."""
    return {"overlap_all_gather": _grad_enabled()}
