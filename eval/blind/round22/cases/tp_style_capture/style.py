# adapted from pytorch/pytorch torch/distributed/tensor/parallel/style.py
from functools import partial
from typing import Optional, Tuple

import torch
import torch.nn as nn
from torch.distributed._tensor import DeviceMesh, DTensor, Placement, Replicate, Shard, distribute_module

from ._grad_state import grad_mode_at_entry, with_grad_mode_capture


class RowwiseParallel:
    def __init__(self, *, input_layouts: Optional[Placement] = None, output_layouts: Optional[Placement] = None,
                 use_local_output: bool = True):
        self.input_layouts = (input_layouts or Shard(-1), )
        self.output_layouts = (output_layouts or Replicate(), )
        self.use_local_output = use_local_output

    @staticmethod
    def _prepare_input_fn(input_layouts, desired_input_layouts, mod, inputs, device_mesh):
        input_tensor = inputs[0]
        if not isinstance(input_tensor, DTensor):
            input_tensor = DTensor.from_local(input_tensor, device_mesh, input_layouts, run_check=False)
        if input_tensor.requires_grad:
            input_tensor.register_hook(lambda g: g.redistribute(placements=input_layouts))
        if input_layouts != desired_input_layouts:
            input_tensor = input_tensor.redistribute(placements=desired_input_layouts, async_op=True)
        return input_tensor

    @staticmethod
    def _prepare_output_fn(output_layouts, use_local_output, mod, outputs, device_mesh):
        # Rowwise sharding produces partial output, depending on output layouts:
        # 1. to replicate -> allreduce
        # 2. to shard -> reduce_scatter
        if outputs.placements != output_layouts:
            outputs = outputs.redistribute(placements=output_layouts, async_op=grad_mode_at_entry())
        return outputs.to_local() if use_local_output else outputs

    def _apply(self, module: nn.Module, device_mesh: DeviceMesh) -> nn.Module:
        self.desired_input_layouts: Tuple[Placement, ...] = (Shard(-1), )
        module.forward = with_grad_mode_capture(module.forward)
        return distribute_module(
            module,
            device_mesh,
            self._partition_linear_fn,
            partial(self._prepare_input_fn, self.input_layouts, self.desired_input_layouts),
            partial(self._prepare_output_fn, self.output_layouts, self.use_local_output),
        )


class SequenceParallel:
    def __init__(self, *, sequence_dim: int = 1, use_local_output: bool = False):
        self.sequence_dim = sequence_dim
        self.use_local_output = use_local_output

    @staticmethod
    def _prepare_input_fn(sequence_dim, mod, inputs, device_mesh):
        input_tensor = inputs[0]
        if isinstance(input_tensor, DTensor):
            return inputs
        placements = [Shard(sequence_dim)] if grad_mode_at_entry() else [Replicate()]
        return DTensor.from_local(input_tensor, device_mesh, placements, run_check=False)
