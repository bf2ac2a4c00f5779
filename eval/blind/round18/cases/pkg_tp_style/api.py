# adapted from pytorch/pytorch torch/distributed/tensor/parallel/style.py
from typing import Dict, Union

import torch.nn as nn
from torch.distributed.device_mesh import DeviceMesh

from ._grad_state import _record_grad_mode
from .style import ParallelStyle


def parallelize_module(
    module: nn.Module,
    device_mesh: DeviceMesh,
    parallelize_plan: Union[ParallelStyle, Dict[str, ParallelStyle]],
) -> nn.Module:
    if isinstance(parallelize_plan, ParallelStyle):
        return parallelize_plan._apply(module, device_mesh)
    for module_path, parallelize_style in parallelize_plan.items():
        submodule = module.get_submodule(module_path)
        parallelize_style._apply(submodule, device_mesh)
    module.register_forward_pre_hook(_record_grad_mode)
    return module
