from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class ForwardOptions:
    build_graph: bool
    incremental: bool = False


def current_options(incremental=False):
    return ForwardOptions(build_graph=torch.is_grad_enabled(), incremental=incremental)
