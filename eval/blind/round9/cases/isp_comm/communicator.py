from typing import Dict, List

import torch
from torch import distributed as dist
from torch import nn


def all_gather_raw(input_: torch.Tensor, process_group, async_op: bool = False, gather_dim: int = 0):
    world_size = dist.get_world_size(process_group)
    if world_size <= 1:
        return input_, None
    shape = list(input_.shape)
    shape[gather_dim] = shape[gather_dim] * world_size
    output = torch.empty(shape, dtype=input_.dtype, device=input_.device)
    handle = dist.all_gather_into_tensor(output, input_.contiguous(), group=process_group, async_op=async_op)
    return output, handle


class ISPCommunicator:
    def __init__(self, model: nn.Module, process_group, overlap: bool = False,
                 enable_memory_pool: bool = False, ckpt_block_num: int = 0) -> None:
        self.process_group = process_group
        self.overlap = overlap
        self.enable_memory_pool = enable_memory_pool
        self.is_forward = True
        self.grad_enabled = True
        self._ckpt_block_num = ckpt_block_num
        self._isp_modules: List[nn.Module] = []
        self._module_to_index: Dict[nn.Module, int] = {}
        self._weight_global_handle: Dict[nn.Module, object] = {}
        self._weight_global_output: Dict[nn.Module, torch.Tensor] = {}

    def switch_current_model_chunk(self, chunk_id: int) -> None:
        pass

    def _all_gather_module_weight(self, module: nn.Module) -> None:
        output, handle = all_gather_raw(module.weight, self.process_group, async_op=True)
        self._weight_global_handle[module] = handle
        self._weight_global_output[module] = output

    def _wait_handle(self, module: nn.Module) -> None:
        handle = self._weight_global_handle.get(module)
        if handle is not None:
            handle.wait()

    def _clear_weight(self, module: nn.Module) -> None:
        self._weight_global_output.pop(module, None)
        self._weight_global_handle.pop(module, None)

    def _pre_forward_hook_for_module(self, module: nn.Module, *args) -> None:
        if module not in self._weight_global_handle:
            self._all_gather_module_weight(module)
        self._wait_handle(module)
        index = self._isp_modules.index(module)
        if index + 1 < len(self._isp_modules):
            self._all_gather_module_weight(self._isp_modules[index + 1])

    def _post_forward_hook_for_module(self, module: nn.Module, *args) -> None:
        keep_for_recompute = self._module_to_index[module] < self._ckpt_block_num and self.grad_enabled
        if not keep_for_recompute:
            self._clear_weight(module)

    def weight_hook(self, tensor: torch.Tensor, async_op: bool = False, module: nn.Module = None) -> torch.Tensor:
        if dist.get_world_size(self.process_group) <= 1:
            return tensor
        if not self.overlap or not self.grad_enabled:
            result, _ = all_gather_raw(tensor, self.process_group, async_op=async_op)
        else:
            assert module is not None, "The module parameter must be specified"
            result = self._weight_global_output[module]
        return result

    def register_hooks(self) -> None:
        for idx, module in enumerate(self._isp_modules):
            self._module_to_index[module] = idx
            if self.overlap:
                module.register_forward_pre_hook(self._pre_forward_hook_for_module)
                module.register_forward_hook(self._post_forward_hook_for_module)
