# adapted from NVIDIA/apex apex/transformer/tensor_parallel/layers.py
from typing import Any, Dict

import torch


def comm_kwargs(layer) -> Dict[str, Any]:
    """Communication knobs forwarded to the linear autograd function."""
    grad_on = torch.is_grad_enabled()
    return {
        "gradient_accumulation_fusion": layer.gradient_accumulation_fusion,
        "async_grad_allreduce": grad_on,
        "overlap_gather": grad_on,
    }
