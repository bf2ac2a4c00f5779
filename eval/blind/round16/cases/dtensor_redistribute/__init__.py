# adapted from pytorch/pytorch torch/distributed/tensor/__init__.py
# Copyright (c) Meta Platforms, Inc. and affiliates
import torch
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.tensor.placement_types import Partial, Placement, Replicate, Shard

from ._api import DTensor, distribute_tensor
from ._redistribute import use_min_cost_redistribution_plan

# All public APIs from dtensor package
__all__ = [
    "DTensor",
    "DeviceMesh",
    "distribute_tensor",
    "init_device_mesh",
    "Shard",
    "Replicate",
    "Partial",
    "Placement",
    "use_min_cost_redistribution_plan",
]
