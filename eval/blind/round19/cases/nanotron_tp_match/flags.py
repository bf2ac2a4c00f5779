# adapted from huggingface/nanotron src/nanotron/parallel/tensor_parallel/functional.py
from typing import Tuple

import torch


def grad_flags() -> Tuple[bool, bool]:
    return torch.is_grad_enabled(), torch.is_inference_mode_enabled()
