# adapted from volcengine/verl verl/utils/ulysses.py
from dataclasses import dataclass

import torch


@dataclass
class SPCommConfig:
    async_a2a: bool
    num_chunks: int = 1


def current_comm_config(num_chunks: int = 1) -> SPCommConfig:
    return SPCommConfig(async_a2a=torch.is_grad_enabled(), num_chunks=num_chunks)
