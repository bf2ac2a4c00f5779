# adapted from huggingface/nanotron src/nanotron/parallel/tensor_parallel/functional.py
from dataclasses import dataclass

import torch

from nanotron.parallel.tensor_parallel.enum import TensorParallelLinearMode


@dataclass
class TPConfig:
    mode: TensorParallelLinearMode = TensorParallelLinearMode.REDUCE_SCATTER
    tp_recompute_allgather: bool = True

    @property
    def async_comm(self) -> bool:
        return torch.is_grad_enabled()
