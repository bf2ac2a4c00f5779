from functools import partial
from typing import Optional, Tuple

import torch
import torch.nn as nn
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_module, distribute_tensor
from torch.distributed.tensor.parallel.style import ParallelStyle
from torch.distributed.tensor.placement_types import Placement


class SequenceParallelColwise(ParallelStyle):
    def __init__(self, *, sequence_dim: int = 1, use_local_output: bool = True,
                 async_redistribute: bool = True):
        super().__init__()
        self.input_layouts = (Shard(sequence_dim),)
        self.desired_input_layouts = (Replicate(),)
        self.output_layouts = (Shard(-1),)
        self.use_local_output = use_local_output
        self.async_redistribute = async_redistribute

    @staticmethod
    def _prepare_input_fn(input_layouts, desired_input_layouts, async_redistribute, mod, inputs, device_mesh):
        input_tensor = inputs[0]
        if not isinstance(input_tensor, DTensor):
            input_tensor = DTensor.from_local(input_tensor, device_mesh, input_layouts, run_check=False)
        if input_layouts != desired_input_layouts:
            input_tensor = input_tensor.redistribute(
                placements=desired_input_layouts,
                async_op=async_redistribute and torch.is_grad_enabled(),
            )
        return input_tensor

    @staticmethod
    def _prepare_output_fn(output_layouts, use_local_output, mod, outputs, device_mesh):
        if outputs.placements != output_layouts:
            outputs = outputs.redistribute(placements=output_layouts, async_op=True)
        if not use_local_output:
            return outputs
        grad_placements = output_layouts if torch.is_grad_enabled() else None
        return outputs.to_local(grad_placements=grad_placements)

    def _partition_linear_fn(self, name, module, device_mesh):
        for name, param in module.named_parameters():
            dist_param = nn.Parameter(distribute_tensor(param, device_mesh, [Shard(0)]))
            module.register_parameter(name, dist_param)

    def _apply(self, module: nn.Module, device_mesh: DeviceMesh) -> nn.Module:
        return distribute_module(
            module,
            device_mesh,
            self._partition_linear_fn,
            partial(self._prepare_input_fn, self.input_layouts, self.desired_input_layouts, self.async_redistribute),
            partial(self._prepare_output_fn, self.output_layouts, self.use_local_output),
        )
