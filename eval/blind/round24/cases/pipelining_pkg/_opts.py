# adapted from pytorch/pytorch torch/distributed/pipelining/_PipelineStage.py
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class ScheduleOpts:
    overlap_p2p: bool
    keep_for_backward: bool
    n_microbatches: int


def current_opts(n_microbatches: int) -> ScheduleOpts:
    grad = torch.is_grad_enabled()
    return ScheduleOpts(overlap_p2p=grad, keep_for_backward=grad, n_microbatches=n_microbatches)
