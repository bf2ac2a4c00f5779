# adapted from pytorch/pytorch torch/distributed/pipelining/stage.py
from typing import NamedTuple

import torch


class RuntimeFlags(NamedTuple):
    overlap_p2p: bool
    keep_for_backward: bool


def make_runtime_flags() -> RuntimeFlags:
    grad = torch.is_grad_enabled()
    return RuntimeFlags(overlap_p2p=grad, keep_for_backward=grad)
