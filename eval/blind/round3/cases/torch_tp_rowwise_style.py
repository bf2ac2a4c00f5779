# Modelled on torch/distributed/tensor/parallel/style.py (PyTorch 2.4-2.6).
from functools import partial

import torch
import torch.nn as nn
from torch.distributed.tensor import DeviceMesh, distribute_module, distribute_tensor, DTensor, Replicate, Shard
from torch.distributed.tensor.parallel.style import ParallelStyle


class RowwiseParallel(ParallelStyle):
    def __init__(self, *, input_layouts=None, output_layouts=None, use_local_output=True):
        super().__init__()
        self.input_layouts = (input_layouts or Shard(-1),)
        self.output_layouts = (output_layouts or Replicate(),)
        self.use_local_output = use_local_output

    @staticmethod
    def _prepare_input_fn(input_layouts, desired_input_layouts, mod, inputs, device_mesh):
        input_tensor = inputs[0]
        if not isinstance(input_tensor, DTensor):
            input_tensor = DTensor.from_local(input_tensor, device_mesh, input_layouts, run_check=False)
        if input_layouts != desired_input_layouts:
            input_tensor = input_tensor.redistribute(placements=desired_input_layouts, async_op=True)
        return input_tensor

    def _partition_linear_fn(self, name, module, device_mesh):
        module.register_parameter(
            "weight", nn.Parameter(distribute_tensor(module.weight, device_mesh, [Shard(1)]))
        )
        if getattr(module, "bias", None) is not None:
            module.register_parameter(
                "bias", nn.Parameter(distribute_tensor(module.bias, device_mesh, [Replicate()]))
            )

    @staticmethod
    def _prepare_output_fn(output_layouts, use_local_output, mod, outputs, device_mesh):
        if outputs.placements != output_layouts:
            outputs = outputs.redistribute(placements=output_layouts, async_op=torch.is_grad_enabled())
        return outputs.to_local() if use_local_output else outputs

    def _apply(self, module: nn.Module, device_mesh: DeviceMesh) -> nn.Module:
        self.desired_input_layouts = (Shard(-1),)
        return distribute_module(
            module,
            device_mesh,
            self._partition_linear_fn,
            partial(self._prepare_input_fn, self.input_layouts, self.desired_input_layouts),
            partial(self._prepare_output_fn, self.output_layouts, self.use_local_output),
        )


class PrepareModuleInput(ParallelStyle):
    def __init__(self, *, input_layouts=None, desired_input_layouts=None, use_local_output=False):
        self.input_layouts = (input_layouts,) if isinstance(input_layouts, (Shard, Replicate)) else input_layouts
        self.desired_input_layouts = (
            (desired_input_layouts,) if isinstance(desired_input_layouts, (Shard, Replicate))
            else desired_input_layouts
        )
        self.use_local_output = use_local_output

    def _prepare_input_arg(self, input, mesh, input_layout, desired_layout):
        if input_layout is None:
            return input
        if isinstance(input, DTensor):
            dt_inp = input
        else:
            assert isinstance(input, torch.Tensor), "expecting input to be a torch.Tensor!"
            dt_inp = DTensor.from_local(input, mesh, (input_layout,), run_check=False)
        if desired_layout is not None and input_layout != desired_layout:
            dt_inp = dt_inp.redistribute(placements=(desired_layout,))
        if not self.use_local_output:
            return dt_inp
        grad_placements = (desired_layout,) if torch.is_grad_enabled() and desired_layout is not None else None
        return dt_inp.to_local(grad_placements=grad_placements)

    def _prepare_input_fn(self, inputs, device_mesh):
        prepared_inputs = []
        for inp, input_layout, desired_layout in zip(inputs, self.input_layouts, self.desired_input_layouts):
            prepared_inputs.append(self._prepare_input_arg(inp, device_mesh, input_layout, desired_layout))
        return tuple(prepared_inputs)

    def _apply(self, module: nn.Module, device_mesh: DeviceMesh) -> nn.Module:
        module.register_forward_pre_hook(lambda _, inputs: self._prepare_input_fn(inputs, device_mesh))
        return module
