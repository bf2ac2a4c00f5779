# Modelled on torch/distributed/tensor/parallel/style.py ColwiseParallel / SequenceParallel (PyTorch 2.5).
from functools import partial

import torch
import torch.nn as nn
from torch.distributed.tensor import DeviceMesh, distribute_module, distribute_tensor, DTensor, Replicate, Shard
from torch.distributed.tensor.parallel.style import ParallelStyle

from ._hooks import grad_mode_aware


class ColwiseParallel(ParallelStyle):
    def __init__(self, *, input_layouts=None, output_layouts=None, use_local_output=True):
        super().__init__()
        self.input_layouts = (input_layouts or Replicate(),)
        self.output_layouts = (output_layouts or Shard(-1),)
        self.desired_input_layouts = (Replicate(),)
        self.use_local_output = use_local_output

    @staticmethod
    @grad_mode_aware
    def _prepare_input_fn(input_layouts, desired_input_layouts, mod, inputs, device_mesh, *, grad_enabled):
        input_tensor = inputs[0]
        if not isinstance(input_tensor, DTensor):
            input_tensor = DTensor.from_local(input_tensor, device_mesh, input_layouts, run_check=False)
        if input_layouts != desired_input_layouts:
            input_tensor = input_tensor.redistribute(placements=desired_input_layouts, async_op=grad_enabled)
        return input_tensor

    def _partition_linear_fn(self, name, module, device_mesh):
        for pname, param in module.named_parameters():
            module.register_parameter(pname, nn.Parameter(distribute_tensor(param, device_mesh, [Shard(0)])))

    @staticmethod
    @grad_mode_aware
    def _prepare_output_fn(output_layouts, use_local_output, mod, outputs, device_mesh, *, grad_enabled):
        if outputs.placements != output_layouts:
            outputs = outputs.redistribute(placements=output_layouts, async_op=True)
        if not use_local_output:
            return outputs
        return outputs.to_local(grad_placements=output_layouts if grad_enabled else None)

    def _apply(self, module: nn.Module, device_mesh: DeviceMesh) -> nn.Module:
        return distribute_module(
            module, device_mesh, self._partition_linear_fn,
            partial(self._prepare_input_fn, self.input_layouts, self.desired_input_layouts),
            partial(self._prepare_output_fn, self.output_layouts, self.use_local_output),
        )


class SequenceParallel(ParallelStyle):
    def __init__(self, *, sequence_dim: int = 1, use_local_output: bool = False):
        super().__init__()
        self.sequence_sharding = (Shard(sequence_dim),)
        self.use_local_output = use_local_output

    def _replicate_module_fn(self, name, module, device_mesh):
        for p_name, param in module.named_parameters():
            module.register_parameter(p_name, nn.Parameter(DTensor.from_local(param, device_mesh, [Replicate()],
                                                                              run_check=False)))

    @staticmethod
    @grad_mode_aware
    def _prepare_input_fn(sequence_sharding, mod, inputs, device_mesh, *, grad_enabled):
        input_tensor = inputs[0]
        if isinstance(input_tensor, DTensor):
            if input_tensor.placements != sequence_sharding and grad_enabled:
                return input_tensor.redistribute(placements=sequence_sharding)
            return inputs
        return DTensor.from_local(input_tensor, device_mesh, sequence_sharding, run_check=False)

    def _apply(self, module: nn.Module, device_mesh: DeviceMesh) -> nn.Module:
        return distribute_module(
            module, device_mesh, self._replicate_module_fn,
            partial(self._prepare_input_fn, self.sequence_sharding),
            None,
        )
